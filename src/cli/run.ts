/** `k3 <model_dir> [options]`: validate the request, read the checkpoint, generate. */
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { indexCheckpoint } from "../checkpoint/safetensors.ts";
import { ExitCode, K3Error, usageError } from "../errors.ts";
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
  const started = performance.now();
  const index = indexCheckpoint(options.modelDir);
  log.info(
    `checkpoint: ${index.shards.length} shard(s), ${index.tensorCount} tensors indexed in ` +
      `${((performance.now() - started) / 1000).toFixed(3)} s; config ${shape}, ${config.numLayers} layers`,
  );
  throw new K3Error(ExitCode.runtime, "the forward pass is not part of this build yet");
}
