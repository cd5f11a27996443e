/**
 * `k3 doctor [model_dir] [--trunk DIR]`: can this machine run Kimi K3, what to expect, and the
 * exact next command (src/ops/doctor.ts). The report is the command's data, on stdout; exit 0
 * unless the machine cannot run k3 at all.
 */
import { ExitCode } from "../errors.ts";
import { runDoctor } from "../ops/doctor.ts";
import { emit } from "../report/log.ts";
import type { OptionDef } from "./args.ts";
import { helpOption, requirePath } from "./common-options.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface DoctorArgs {
  trunkDir: string | undefined;
  skipDisk: boolean;
}

const options: readonly OptionDef<DoctorArgs>[] = [
  { name: "trunk", value: "DIR", description: "A packed trunk (k3 pack-trunk) to check against the checkpoint", apply: (o, raw, flag) => { o.trunkDir = requirePath(raw, flag); } },
  { name: "no-disk", description: "Skip the disk measurement (random O_DIRECT reads for a few seconds)", apply: (o) => { o.skipDisk = true; } },
  helpOption,
];

const command: CommandInfo<DoctorArgs> = {
  name: "k3 doctor",
  description: "Check whether this machine can run Kimi K3: CPU, memory and the preset it fits, free space, the disk as k3 reads it, the model and trunk; prints the next command",
  positionals: [{ name: "model_dir", description: "The checkpoint directory, if there is one yet" }],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  const parsed: DoctorArgs = { trunkDir: undefined, skipDisk: false };
  const positionals = await parseCommandArgs(args, command, parsed);
  if (!positionals) return ExitCode.ok;
  const result = runDoctor({ modelDir: positionals[0], trunkDir: parsed.trunkDir, skipDisk: parsed.skipDisk }, (line) => emit(`${line}\n`));
  return result.fail ? ExitCode.runtime : ExitCode.ok;
}
