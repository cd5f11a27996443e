/** `k3 pack-trunk <model_dir> <trunk_dir>`: write the packed trunk that `--trunk` streams from. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { indexCheckpoint } from "../checkpoint/safetensors.ts";
import { envValue } from "../env.ts";
import { watchSignals } from "../native/signals.ts";
import { ExitCode, usageError } from "../errors.ts";
import { checkOutputDir, checkOutputFile } from "../fs.ts";
import { log } from "../report/log.ts";
import { formatBytes } from "../units.ts";
import { TensorReader } from "../weights/tensor-reader.ts";
import { trunkBinName, trunkJsonName } from "../weights/trunk-file.ts";
import { packTrunk } from "../offline/trunk-pack.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { checkLayers, configOption, helpOption, layersOption } from "./common-options.ts";
import { parseCommandArgs, usageText, type CommandInfo } from "./usage.ts";

interface PackOptions {
  configPath: string | undefined;
  layers: number | undefined;
  force: boolean;
  compress: boolean;
}

const options: readonly OptionDef<PackOptions>[] = [
  configOption(),
  layersOption("Pack only the first N layers"),
  { name: "force", description: "Replace a different pack already in <trunk_dir>", apply: (o) => { o.force = true; } },
  { name: "compress", description: "Store the bf16 matrices in a lossless code (fewer bytes read and pinned; decodes to the same bytes)", apply: (o) => { o.compress = true; } },
  helpOption,
];

const command: CommandInfo<PackOptions> = {
  name: "k3 pack-trunk",
  description: "Pack each layer's trunk tensors into one aligned run per layer (trunk.bin + trunk.json)",
  positionals: [
    { name: "model_dir", description: "Checkpoint directory (the .safetensors shards)" },
    { name: "trunk_dir", description: "Output directory for trunk.bin and trunk.json" },
  ],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  const parsed: PackOptions = { configPath: undefined, layers: undefined, force: false, compress: false };
  const positionals = await parseCommandArgs(args, command, parsed);
  if (!positionals) return ExitCode.ok;
  const [modelDir, trunkDir] = positionals;
  if (!modelDir || !trunkDir) throw usageError("pack-trunk needs <model_dir> and <trunk_dir>", await usageText(command));
  watchSignals();
  // Checked before the checkpoint is read: a pack is not wasted on a directory it cannot write.
  checkOutputDir(trunkDir, "<trunk_dir>", { create: true });
  if (existsSync(trunkDir)) for (const name of [trunkBinName, trunkJsonName]) checkOutputFile(join(trunkDir, name), "<trunk_dir>");
  const configPath = parsed.configPath ?? join(modelDir, "config.json");
  const { config } = loadConfig(configPath);
  const layerCount = checkLayers(parsed.layers, config);
  const index = indexCheckpoint(modelDir);
  const reader = new TensorReader(index);
  try {
    const result = packTrunk(index, reader, config, layerCount, trunkDir, {
      force: parsed.force,
      compress: parsed.compress,
      killAfterLayers: killAfterLayers(layerCount),
      onProgress: (p) => {
        const rate = p.seconds > 0 ? (p.bytesDone / 1e6 / p.seconds).toFixed(0) : "-";
        const stored = p.storedBytes !== undefined ? ` -> ${formatBytes(p.storedBytes)} stored (${((100 * p.storedBytes) / p.bytesDone).toFixed(1)}%)` : "";
        log.info(`packed ${p.layersDone}/${p.layerCount} layers, ${formatBytes(p.bytesDone)}${stored}, ${p.seconds.toFixed(1)} s (${rate} MB/s)`);
      },
    });
    if (result.alreadyPacked) {
      log.info(`${trunkDir} already holds this pack (${layerCount} layers); nothing to do`);
      return ExitCode.ok;
    }
    const storedBytes = result.manifest.codec ? result.manifest.layers.reduce((sum, l) => sum + (l.stored_bytes ?? 0), 0) : undefined;
    log.info(
      `wrote ${trunkBinName}: ${formatBytes(result.payloadBytes)} across ${layerCount} layers` +
        (storedBytes !== undefined ? `, stored in ${formatBytes(storedBytes)} (${((100 * storedBytes) / result.payloadBytes).toFixed(1)}%, ${result.manifest.codec?.name})` : "") + ", verified",
    );
    log.info(`largest layer run: ${formatBytes(result.largestLayerBytes)}  <- the streaming slot size`);
    log.info(`wrote ${trunkJsonName} in ${result.seconds.toFixed(1)} s`);
    return ExitCode.ok;
  } finally {
    reader.close();
  }
}

/** K3_PACK_KILL_AFTER_LAYERS=N[:SIGINT|SIGTERM|SIGKILL] (tests only): that signal after N layers, SIGKILL by default. */
function killAfterLayers(layerCount: number): { layers: number; signal: "SIGKILL" | "SIGINT" | "SIGTERM" } | undefined {
  const raw = envValue("K3_PACK_KILL_AFTER_LAYERS");
  if (!raw) return undefined;
  const [count = "", signal = "SIGKILL"] = raw.split(":");
  if (signal !== "SIGKILL" && signal !== "SIGINT" && signal !== "SIGTERM") {
    throw usageError(`K3_PACK_KILL_AFTER_LAYERS: '${signal}' is not SIGKILL, SIGINT or SIGTERM`);
  }
  return { layers: parseInteger(count, "K3_PACK_KILL_AFTER_LAYERS", 1, layerCount), signal };
}
