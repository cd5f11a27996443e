/** `k3 tokenize --tok DIR [--file PATH] [--json] [--ordinary]`: text in, ids out on one line. */
import { ExitCode, usageError } from "../errors.ts";
import { readOrFail } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { emit } from "../report/log.ts";
import { loadTokenizer } from "../tokenizer/index.ts";
import type { OptionDef } from "./args.ts";
import { helpOption, tokMissingMessage, tokOption } from "./common-options.ts";
import { readStdin } from "./prompt.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface TokenizeOptions {
  tokDir: string | undefined;
  file: string | undefined;
  json: boolean;
  ordinary: boolean;
}

const options: readonly OptionDef<TokenizeOptions>[] = [
  tokOption("Tokenizer directory (tiktoken.model + tokenizer_config.json)"),
  { name: "file", value: "PATH", description: "Read the text from PATH (default: standard input), bytes verbatim", apply: (o, raw) => { o.file = raw; } },
  { name: "json", description: 'Print {"ids":[...]} instead of comma-separated ids', apply: (o) => { o.json = true; } },
  { name: "ordinary", description: "Encode special-token text as ordinary text (as chat rendering does for user text)", apply: (o) => { o.ordinary = true; } },
  helpOption,
];

const command: CommandInfo<TokenizeOptions> = {
  name: "k3 tokenize", description: "Encode text to Kimi token ids", positionals: [], options,
};

export async function main(args: readonly string[]): Promise<number> {
  const o: TokenizeOptions = { tokDir: undefined, file: undefined, json: false, ordinary: false };
  if (!(await parseCommandArgs(args, command, o))) return ExitCode.ok;
  if (!o.tokDir) throw usageError(tokMissingMessage("tokenize"));
  const bytes = o.file ? new Uint8Array(readOrFail(o.file, "the text", inputLimits.promptTextBytes)) : readStdin(inputLimits.promptTextBytes, "the text");
  const ids = loadTokenizer(o.tokDir).encode(bytes, { ordinary: o.ordinary });
  emit(o.json ? `${JSON.stringify({ ids })}\n` : `${ids.join(",")}\n`);
  return ExitCode.ok;
}
