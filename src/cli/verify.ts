/**
 * `k3 verify <model_dir> [--hash]`: the directory against the release's per-shard table (or its
 * download record's listing), headers and tensors, and with --hash every file's sha256 against
 * the record (src/fetch/verify.ts). The report is the command's data, on stdout; exit 0 only on a
 * byte-exact match.
 */
import { existsSync, statSync } from "node:fs";
import { ExitCode, runtimeError, usageError } from "../errors.ts";
import { emit } from "../report/log.ts";
import { verifyModel } from "../fetch/verify.ts";
import type { OptionDef } from "./args.ts";
import { helpOption } from "./common-options.ts";
import { parseCommandArgs, usageText, type CommandInfo } from "./usage.ts";

interface VerifyArgs {
  hash: boolean;
}

const options: readonly OptionDef<VerifyArgs>[] = [
  { name: "hash", description: "Also hash every file (re-reads everything) against the sha256 k3 download recorded", apply: (o) => { o.hash = true; } },
  helpOption,
];

const command: CommandInfo<VerifyArgs> = {
  name: "k3 verify",
  description: "Check a model directory: shard count, every shard's size against the release table, headers, tensors, and with --hash every sha256",
  positionals: [{ name: "model_dir", description: "The checkpoint directory" }],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  const parsed: VerifyArgs = { hash: false };
  const positionals = await parseCommandArgs(args, command, parsed);
  if (!positionals) return ExitCode.ok;
  const [dir] = positionals;
  if (!dir) throw usageError("verify needs <model_dir>", await usageText(command));
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw runtimeError(`${dir}: not a directory`);
  const result = await verifyModel(dir, { hash: parsed.hash }, (line) => emit(`${line}\n`));
  return result.ok ? ExitCode.ok : ExitCode.runtime;
}
