/**
 * `k3 doctor [model_dir] [--trunk DIR] [--preset P | --trunk-gb X --cache-gb Y] [--json]`: can
 * this machine run Kimi K3, how fast will it be here, and the exact next command
 * (src/doctor/doctor.ts). The report is the command's data, on stdout: text, or one JSON object
 * with `--json`. Exit 0 unless the machine cannot run k3 at all.
 */
import { ExitCode } from "../errors.ts";
import type { BudgetAction } from "../plan/budget.ts";
import { runDoctor } from "../doctor/doctor.ts";
import { emit } from "../report/log.ts";
import type { OptionDef } from "./args.ts";
import { helpOption, requirePath } from "./common-options.ts";
import { memoryOptions, type MemoryTarget } from "./memory-options.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface DoctorArgs extends MemoryTarget {
  skipDisk: boolean;
  json: boolean;
}

/** The budget options a run takes, for the forecast; --trunk is the doctor's own (it checks the pack too). */
const budgetOptions = memoryOptions<DoctorArgs>().filter((o) => o.name === "preset" || o.name === "trunk-gb" || o.name === "cache-gb");

const options: readonly OptionDef<DoctorArgs>[] = [
  { name: "trunk", value: "DIR", description: "A packed trunk (k3 pack-trunk) to check against the checkpoint; the disk is measured on it and the forecast streams it", apply: (o, raw, flag) => { o.trunkDir = requirePath(raw, flag); } },
  ...budgetOptions,
  { name: "no-disk", description: "Skip the disk measurement (random O_DIRECT reads and the trunk's reads for a few seconds)", apply: (o) => { o.skipDisk = true; } },
  { name: "json", description: "Print the facts as one JSON object on stdout instead of the text report", apply: (o) => { o.json = true; } },
  helpOption,
];

const command: CommandInfo<DoctorArgs> = {
  name: "k3 doctor",
  description: "Check whether this machine can run Kimi K3 and forecast its speed here: CPU and kernels, memory and the preset it fits, free space, the disk as k3 reads it, this machine's kernel rates, s/token per preset (or for the budgets given), the model and trunk; prints the next command",
  positionals: [{ name: "model_dir", description: "The checkpoint directory, if there is one yet (else the forecast uses the release's sizes)" }],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  const parsed: DoctorArgs = { trunkDir: undefined, budgets: [] as BudgetAction[], skipDisk: false, json: false };
  const positionals = await parseCommandArgs(args, command, parsed);
  if (!positionals) return ExitCode.ok;
  const result = runDoctor(
    { modelDir: positionals[0], trunkDir: parsed.trunkDir, skipDisk: parsed.skipDisk, budgets: parsed.budgets },
    parsed.json ? () => {} : (line) => emit(`${line}\n`),
  );
  if (parsed.json) emit(`${JSON.stringify(result.facts, null, 2)}\n`);
  return result.fail ? ExitCode.runtime : ExitCode.ok;
}
