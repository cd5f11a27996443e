/** `k3 detokenize --tok DIR`: ids on stdin (comma/space separated, or {"ids":[...]}) to bytes on stdout. */
import { ExitCode, usageError } from "../errors.ts";
import { inputLimits } from "../input-limits.ts";
import { loadTokenizer } from "../tokenizer/index.ts";
import type { OptionDef } from "./args.ts";
import { helpOption, tokMissingMessage, tokOption } from "./common-options.ts";
import { parseIdsText, readStdin } from "./prompt.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface DetokenizeOptions {
  tokDir: string | undefined;
}

const options: readonly OptionDef<DetokenizeOptions>[] = [
  tokOption("Tokenizer directory (tiktoken.model + tokenizer_config.json)"),
  helpOption,
];

const command: CommandInfo<DetokenizeOptions> = {
  name: "k3 detokenize", description: "Decode Kimi token ids from stdin to exactly their bytes on stdout", positionals: [], options,
};

export async function main(args: readonly string[]): Promise<number> {
  const o: DetokenizeOptions = { tokDir: undefined };
  if (!(await parseCommandArgs(args, command, o))) return ExitCode.ok;
  if (!o.tokDir) throw usageError(tokMissingMessage("detokenize"));
  const ids = parseIdsText(new TextDecoder().decode(readStdin(inputLimits.idsTextBytes, "the ids")), "stdin");
  const bytes = loadTokenizer(o.tokDir).decode(ids);
  process.stdout.write(bytes);
  return ExitCode.ok;
}
