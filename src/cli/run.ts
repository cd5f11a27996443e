/** `k3 <model_dir> [options]`: validate the request, read the checkpoint, generate. */
import { join } from "node:path";
import { loadConfig, type ModelConfig } from "../checkpoint/config.ts";
import { decode } from "../decode/greedy.ts";
import { loadModel } from "../model/load.ts";
import { setBufferedFallbackReporter } from "../native/file.ts";
import { decodeSeconds, stepHeader, stepRow, summaryLine } from "../report/table.ts";
import { resultsJson, writeAtomically } from "../report/results.ts";
import { formatBytes } from "../report/units.ts";

import { ExitCode, usageError } from "../errors.ts";
import { maxPositions, maxPromptIds } from "../plan/limits.ts";
import { presetListing } from "../plan/presets.ts";
import { emit, log } from "../report/log.ts";
import { findInfoFlag, parseOptions } from "./args.ts";
import { subcommands } from "./commands.ts";
import { defaultRunOptions, runOptionTable, runPositionals, type RunOptions } from "./run-options.ts";
import { usageText, version, type CommandInfo } from "./usage.ts";

export const runCommand: CommandInfo<RunOptions> = {
  name: "k3",
  description: "Run Kimi K3 from a checkpoint directory",
  positionals: runPositionals,
  options: runOptionTable,
};

export async function runUsage(): Promise<string> {
  return usageText(runCommand, subcommands);
}

/** Parses and validates everything that needs no model: exit-2 mistakes surface here. */
export function parseRunArgs(args: readonly string[]): RunOptions {
  const first = args[0];
  if (first === undefined) throw usageError("missing <model_dir>");
  if (first.startsWith("-")) throw usageError(`the first argument must be the model directory, got ${first}`);
  const options = defaultRunOptions();
  options.modelDir = first;
  const extra = parseOptions(args.slice(1), runOptionTable, options);
  if (extra.length > 0) throw usageError(`unexpected argument ${extra[0]} (options start with --)`);
  if (options.promptSources.length === 0) throw usageError("a prompt is required: give --ids");
  const sources = [...new Set(options.promptSources)];
  if (sources.length > 1) throw usageError(`${sources.join(" and ")} are mutually exclusive: give exactly one prompt source`);
  if (options.ids.length > maxPromptIds) throw usageError(`the prompt has ${options.ids.length} ids; the ceiling is ${maxPromptIds}`);
  if (options.ids.length + options.gen + 1 > maxPositions) {
    throw usageError(`prompt (${options.ids.length}) + --gen (${options.gen}) + 1 exceeds the ${maxPositions}-position ceiling`);
  }
  return options;
}

/** Returns the process exit code. */
export async function runMain(args: readonly string[]): Promise<number> {
  const info = findInfoFlag(args, runOptionTable, ["help", "version", "list-presets"]);
  if (info === "help") emit(await runUsage());
  if (info === "version") emit(`k3 ${version}\n`);
  if (info === "list-presets") emit(presetListing());
  if (info) return ExitCode.ok;
  if (args.length === 0) throw usageError("missing <model_dir>", await runUsage());

  const options = parseRunArgs(args);
  const configPath = options.configPath ?? join(options.modelDir, "config.json");
  const { config, shape, warnings } = loadConfig(configPath);
  for (const warning of warnings) log.warn(`${configPath}: ${warning}`);
  const outside = options.ids.find((id) => id >= config.vocabSize);
  if (outside !== undefined) {
    throw usageError(`--ids: token id ${outside} is outside the vocabulary (size ${config.vocabSize})`);
  }
  const layerCount = options.layers ?? config.numLayers;
  if (layerCount > config.numLayers) throw usageError(`--layers ${layerCount} exceeds the model's ${config.numLayers} layers`);
  if (layerCount < config.numLayers) {
    log.warn(`NOTE: binding only the first ${layerCount} of ${config.numLayers} layers; the output is NOT the full model`);
  }
  return generate(options, config, shape, layerCount);
}

function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024; // Linux reports kilobytes
}

async function generate(options: RunOptions, config: ModelConfig, shape: string, layerCount: number): Promise<number> {
  const wallStarted = performance.now();
  setBufferedFallbackReporter((path) => log.info(`${path}: the filesystem refuses O_DIRECT; reading through the page cache`));
  const loaded = loadModel(options.modelDir, config, layerCount, options.ids.length + options.gen + 1);
  try {
    const { index } = loaded;
    log.info(`indexed ${index.tensorCount} tensors from ${index.shards.length} shard(s) in ${loaded.indexSeconds.toFixed(3)} s (config: ${shape})`);
    for (const warning of loaded.warnings) log.warn(warning);
    log.info(`resident trunk: ${formatBytes(loaded.trunkBytes)} for ${layerCount} layers, embedding and lm_head ${formatBytes(loaded.tableBytes)}, loaded in ${loaded.loadSeconds.toFixed(2)} s`);
    log.info(`prompt: ${options.ids.length} tokens, generating ${options.gen} (${options.mode})`);
    process.stderr.write(`${stepHeader()}\n`);
    const result = decode(loaded.model, options.ids, options.gen, options.mode, (step) => process.stderr.write(`${stepRow(step)}\n`));
    process.stderr.write(`${summaryLine(result.steps)}\n`);
    if (options.dumpLogits) {
      if (result.firstLogits) {
        const logits = result.firstLogits;
        try {
          writeAtomically(options.dumpLogits, new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength), "the logits");
          log.info(`wrote ${options.dumpLogits} (${logits.length} float32 logits)`);
        } catch (error) {
          // As the original: the tokens are still good, so say so and go on to the results.
          log.error(`--dump-logits: ${(error as Error).message}; continuing without it`);
        }
      } else {
        log.warn("--dump-logits: no step ran (--gen 0), nothing written");
      }
    }
    const peak = peakRssBytes();
    process.stderr.write(`PEAK RSS for the whole run: ${formatBytes(peak)}   <- quote this, not the plan\n`);
    const seconds = decodeSeconds(result.steps);
    const json = resultsJson({
      prompt_ids: options.ids, generated_ids: result.generated, full_ids: [...options.ids, ...result.generated],
      layers: layerCount, layers_requested: options.layers ?? config.numLayers,
      seconds_per_token: result.steps.length > 0 ? seconds / result.steps.length : 0,
      wall_seconds: (performance.now() - wallStarted) / 1000, mode: options.mode, peak_rss_bytes: peak,
    });
    if (options.out === "-") {
      emit(json);
    } else {
      writeAtomically(options.out, json, "the JSON results");
      log.info(`wrote ${options.out}`);
    }
    return ExitCode.ok;
  } finally {
    loaded.close();
  }
}
