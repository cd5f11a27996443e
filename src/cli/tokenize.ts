/** `k3 tokenize --tok DIR [--file PATH] [--json] [--ordinary]`: text in, ids out on one line. */
import { readFileSync } from "node:fs";
import { ExitCode, K3Error, usageError } from "../errors.ts";
import { emit } from "../report/log.ts";
import { loadTokenizer } from "../tokenizer/index.ts";
import type { OptionDef } from "./args.ts";
import { readStdin } from "./prompt.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface TokenizeOptions {
  tokDir: string | undefined;
  file: string | undefined;
  json: boolean;
  ordinary: boolean;
}

const options: readonly OptionDef<TokenizeOptions>[] = [
  { name: "tok", value: "DIR", description: "Tokenizer directory (tiktoken.model + tokenizer_config.json)", apply: (o, raw) => { o.tokDir = raw; } },
  { name: "file", value: "PATH", description: "Read the text from PATH (default: standard input), bytes verbatim", apply: (o, raw) => { o.file = raw; } },
  { name: "json", description: 'Print {"ids":[...]} instead of comma-separated ids', apply: (o) => { o.json = true; } },
  { name: "ordinary", description: "Encode special-token text as ordinary text (as chat rendering does for user text)", apply: (o) => { o.ordinary = true; } },
  { name: "help", alias: "h", description: "Print this usage and exit", apply: () => {} },
];

const command: CommandInfo<TokenizeOptions> = {
  name: "k3 tokenize", description: "Encode text to Kimi token ids", positionals: [], options,
};

export async function main(args: readonly string[]): Promise<number> {
  const o: TokenizeOptions = { tokDir: undefined, file: undefined, json: false, ordinary: false };
  if (!(await parseCommandArgs(args, command, o))) return ExitCode.ok;
  if (!o.tokDir) throw usageError("tokenize needs --tok DIR: a directory holding tiktoken.model and tokenizer_config.json");
  let bytes: Uint8Array;
  if (o.file) {
    try {
      bytes = new Uint8Array(readFileSync(o.file));
    } catch (error) {
      throw new K3Error(ExitCode.runtime, `${o.file}: cannot read (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
  } else {
    bytes = readStdin();
  }
  const ids = loadTokenizer(o.tokDir).encode(bytes, { ordinary: o.ordinary });
  emit(o.json ? `${JSON.stringify({ ids })}\n` : `${ids.join(",")}\n`);
  return ExitCode.ok;
}
