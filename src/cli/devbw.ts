/**
 * `k3 devbw <file>...` (runtime.md 11.3): random one-expert O_DIRECT reads at queue depths 1, 4
 * and 16 on each file, in MB/s. The table is the command's data, on stdout.
 */
import { ExitCode, usageError } from "../errors.ts";
import { defaultDepths, defaultReads, expertReadBytes, measureFile, prepareReaders } from "../doctor/device-bandwidth.ts";
import { emit } from "../report/log.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { helpOption } from "./common-options.ts";
import { usageText, type CommandInfo } from "./usage.ts";
import { findInfoFlag, parseOptions } from "./args.ts";

interface DevbwArgs {
  reads: number;
}

const options: readonly OptionDef<DevbwArgs>[] = [
  { name: "reads", value: "N", description: `Reads per queue depth (default ${defaultReads})`, apply: (o, raw, flag) => { o.reads = parseInteger(raw, flag, 1, 100_000); } },
  helpOption,
];

const command: CommandInfo<DevbwArgs> = {
  name: "k3 devbw",
  description: `Measure each file's device the way k3 reads experts: random ${expertReadBytes}-byte O_DIRECT reads at queue depth ${defaultDepths.join(", ")}`,
  positionals: [{ name: "file", description: "Files to read (a shard, or any large file on the disk to measure); one or more" }],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  if (findInfoFlag(args, options, ["help"])) {
    emit(await usageText(command));
    return ExitCode.ok;
  }
  const parsed: DevbwArgs = { reads: defaultReads };
  const files = parseOptions(args, options, parsed);
  if (files.length === 0) throw usageError("devbw needs at least one <file>", await usageText(command));
  prepareReaders(Math.max(...defaultDepths));
  const width = Math.max(...files.map((f) => f.length));
  for (const path of files) {
    const m = measureFile(path, { reads: parsed.reads });
    const size = m.readBytes === expertReadBytes ? "one expert" : `the file is smaller than one expert's ${expertReadBytes}`;
    emit(`${path}: ${m.depths[0]?.reads} random reads of ${m.readBytes} bytes (${size}) per depth, ${m.direct ? "O_DIRECT" : "buffered (the filesystem refused O_DIRECT: this measures the page cache, not the device)"}\n`);
    for (const d of m.depths) emit(`  ${path.padEnd(width)}   ${`QD${d.depth}`.padEnd(5)} ${d.mbPerSecond.toFixed(1)} MB/s\n`);
    const first = m.depths[0];
    const last = m.depths.at(-1);
    if (first && last && m.depths.length > 1) emit(`  QD${last.depth} / QD${first.depth}: ${(last.mbPerSecond / first.mbPerSecond).toFixed(2)}x, the headroom the batch prefetch can use\n`);
  }
  return ExitCode.ok;
}
