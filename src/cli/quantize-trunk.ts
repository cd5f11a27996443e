/** `k3 quantize-trunk <trunk_dir> <out_dir>`: an int8 (I8R) draft trunk for --draft-trunk. */
import { ExitCode, usageError } from "../errors.ts";
import { log } from "../report/log.ts";
import { formatBytes } from "../units.ts";
import { trunkBinName, trunkJsonName } from "../weights/trunk-file.ts";
import { quantizeTrunk } from "../offline/trunk-quantize.ts";
import type { OptionDef } from "./args.ts";
import { helpOption } from "./common-options.ts";
import { parseCommandArgs, usageText, type CommandInfo } from "./usage.ts";

interface QuantizeOptions {
  force: boolean;
}

const options: readonly OptionDef<QuantizeOptions>[] = [
  { name: "force", description: "Replace a different trunk already in <out_dir>", apply: (o) => { o.force = true; } },
  helpOption,
];

const command: CommandInfo<QuantizeOptions> = {
  name: "k3 quantize-trunk",
  description: "Quantise a packed trunk to an int8 (I8R) draft trunk for hybrid decode (--draft-trunk)",
  positionals: [
    { name: "trunk_dir", description: "A packed trunk (k3 pack-trunk)" },
    { name: "out_dir", description: "Output directory for the draft trunk's trunk.bin and trunk.json" },
  ],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  const parsed: QuantizeOptions = { force: false };
  const positionals = await parseCommandArgs(args, command, parsed);
  if (!positionals) return ExitCode.ok;
  const [trunkDir, outDir] = positionals;
  if (!trunkDir || !outDir) throw usageError("quantize-trunk needs <trunk_dir> and <out_dir>", await usageText(command));
  const result = quantizeTrunk(trunkDir, outDir, {
    force: parsed.force,
    onProgress: (p) => {
      const rate = p.seconds > 0 ? (p.bytesIn / 1e6 / p.seconds).toFixed(0) : "-";
      log.info(`quantized ${p.layersDone}/${p.layerCount} layers, ${formatBytes(p.bytesIn)} -> ${formatBytes(p.bytesOut)}, ${p.seconds.toFixed(1)} s (${rate} MB/s)`);
    },
  });
  const layers = result.manifest.n_layers;
  if (result.alreadyDone) {
    log.info(`${outDir} already holds the draft trunk of this source (${layers} layers); nothing to do`);
    return ExitCode.ok;
  }
  log.info(`wrote ${trunkBinName}: ${formatBytes(result.bytesOut)} across ${layers} layers (from ${formatBytes(result.bytesIn)}), verified`);
  log.info(`${result.matrices} matrices quantised to I8R (per-row absmax / 127, int8), ${result.copied} tensors copied unchanged`);
  log.info(`wrote ${trunkJsonName} in ${result.seconds.toFixed(1)} s; use it with --draft-trunk ${outDir}`);
  return ExitCode.ok;
}
