/** `k3 <model_dir> [options]`: validate the request, read the checkpoint, generate. */
import { join } from "node:path";
import { loadConfig, type ModelConfig } from "../checkpoint/config.ts";
import { decode } from "../decode/greedy.ts";
import { prepareEngine } from "../model/load.ts";
import { checkKvFits, checkPlanFits, planText } from "../plan/memory-plan.ts";
import { cacheReport, expertCacheLine, ioShareReport, runInvalidReport, trunkBanner, trunkReport } from "../report/run-report.ts";
import { dumpCacheTrace, traceWrittenLine } from "../weights/expert-trace.ts";
import { existsSync } from "node:fs";
import { setBufferedFallbackReporter } from "../native/file.ts";
import { badScaleBytes, threadsFromEnv } from "../native/kernels.ts";
import { decodeSeconds, stepHeader, stepRow, summaryLine } from "../report/table.ts";
import { resultsJson, writeAtomically } from "../report/results.ts";
import { formatBytes } from "../report/units.ts";

import { ExitCode, usageError } from "../errors.ts";
import { maxPositions, maxPromptIds } from "../plan/limits.ts";
import { presetListing } from "../plan/presets.ts";
import { emit, log } from "../report/log.ts";
import { findInfoFlag, parseOptions } from "./args.ts";
import { decodeText, resolvePrompt, tokMissingMessage } from "./prompt.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
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
  if (options.promptSources.length === 0) throw usageError("a prompt is required: give one of --ids, --prompt, --prompt-file");
  const sources = [...new Set(options.promptSources)];
  if (sources.length > 1) throw usageError(`${sources.join(" and ")} are mutually exclusive: give exactly one prompt source`);
  if (options.promptSources[0] !== "--ids" && !options.tokDir) throw usageError(tokMissingMessage(options.promptSources[0] as string));
  if (options.promptSources[0] === "--ids" && options.promptValue !== "-") checkRequest(options.ids, options.gen);
  return options;
}

/** Request limits (runtime.md 1.6): refused, never truncated. */
function checkRequest(ids: readonly number[], gen: number): void {
  if (ids.length > maxPromptIds) throw usageError(`the prompt has ${ids.length} ids; the ceiling is ${maxPromptIds}`);
  if (ids.length + gen + 1 > maxPositions) {
    throw usageError(`prompt (${ids.length}) + --gen (${gen}) + 1 exceeds the ${maxPositions}-position ceiling`);
  }
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
  const prompt = resolvePrompt({ source: options.promptSources[0] as string, value: options.promptValue, tokDir: options.tokDir });
  options.ids = prompt.ids;
  checkRequest(options.ids, options.gen);
  const outside = options.ids.find((id) => id >= config.vocabSize);
  if (outside !== undefined) {
    throw usageError(`${options.promptSources[0]}: token id ${outside} is outside the vocabulary (size ${config.vocabSize})`);
  }
  const layerCount = options.layers ?? config.numLayers;
  if (layerCount > config.numLayers) throw usageError(`--layers ${layerCount} exceeds the model's ${config.numLayers} layers`);
  if (layerCount < config.numLayers) {
    log.warn(`NOTE: binding only the first ${layerCount} of ${config.numLayers} layers; the output is NOT the full model`);
  }
  return generate(options, config, shape, layerCount, prompt.tokenizer);
}

function peakRssBytes(): number {
  return process.resourceUsage().maxRSS * 1024; // Linux reports kilobytes
}

/** Fault injection for tests of the dropped-expert path: K3_INJECT_EXPERT_FAULT=layer:expert[,…]. */
function injectedFaults(): Set<string> | undefined {
  const raw = process.env.K3_INJECT_EXPERT_FAULT;
  if (!raw) return undefined;
  const keys = raw.split(",").map((k) => k.trim());
  for (const key of keys) {
    if (!/^\d+:\d+$/.test(key)) throw usageError(`K3_INJECT_EXPERT_FAULT: '${key}' is not layer:expert`);
  }
  return new Set(keys);
}

async function generate(options: RunOptions, config: ModelConfig, shape: string, layerCount: number, tokenizer: Tokenizer | undefined): Promise<number> {
  const wallStarted = performance.now();
  threadsFromEnv(); // a bad K3_THREADS is a usage error before anything is loaded
  setBufferedFallbackReporter((path) => log.info(`${path}: the filesystem refuses O_DIRECT; reading through the page cache`));
  if (options.dumpCacheTrace && !existsSync(options.dumpCacheTrace)) {
    throw usageError(`--dump-cache-trace: directory ${options.dumpCacheTrace} does not exist`);
  }
  if (!options.trunkDir && options.budgets.some((b) => b.kind !== "cache")) {
    log.warn("--preset/--trunk-gb without --trunk: the trunk is held resident, so the trunk budget does not apply");
  }
  const prepared = prepareEngine({
    modelDir: options.modelDir, config, layerCount, positions: options.ids.length + options.gen + 1,
    promptTokens: options.ids.length, budgets: options.budgets, trunkDir: options.trunkDir,
    faults: injectedFaults(), trace: options.dumpCacheTrace !== undefined,
    onDrop: (drop) => process.stderr.write(`EXPERT DROP: layer ${drop.layer} expert ${drop.expert} failed to load; this token is CORRUPT (${drop.reason})\n`),
  });
  try {
    const { index, budgets } = prepared;
    if (budgets.auto) {
      const a = budgets.auto;
      log.info(`auto budget: ${a.availableGb.toFixed(2)} GB available, ${a.reserveGb.toFixed(2)} GB reserved -> trunk ${a.trunkGb.toFixed(2)} GB / expert cache ${a.cacheGb.toFixed(2)} GB`);
    }
    log.info(`model ${options.modelDir}: ${layerCount} layers, prompt ${options.ids.length} tokens, generating ${options.gen} (${options.mode})` +
      (budgets.preset ? `; preset ${budgets.preset} (trunk ${budgets.trunkGb} GB / expert cache ${budgets.cacheGb} GB)` : ""));
    log.info(`indexed ${index.tensorCount} tensors from ${index.shards.length} shard(s) in ${prepared.indexSeconds.toFixed(3)} s (config: ${shape})`);
    process.stderr.write(`${planText(prepared.plan, prepared.availableBytes)}\n`);
    checkKvFits(prepared.plan, prepared.availableBytes, options.ids.length + options.gen + 1);
    checkPlanFits(prepared.plan, prepared.availableBytes);
    if (prepared.streamed) {
      process.stderr.write(`${trunkBanner(prepared.streamed.plan, prepared.streamed.packedBytes, layerCount, true)}\n`);
    }
    const loadStarted = performance.now();
    const loaded = prepared.materialize((bound) => {
      if (bound % 10 === 0) log.info(`  bound ${bound}/${layerCount} layers, ${((performance.now() - loadStarted) / 1000).toFixed(1)} s elapsed`);
    });
    for (const warning of loaded.warnings) log.warn(warning);
    if (!prepared.streamed) log.info(`resident trunk: ${formatBytes(prepared.trunkPayloadBytes)} for ${layerCount} layers, loaded in ${loaded.loadSeconds.toFixed(2)} s`);
    log.info(`peak RSS after loading weights: ${formatBytes(peakRssBytes())}  (the plan above is a forecast, this is measured)`);
    log.info(expertCacheLine(prepared.expertPlan));
    const experts = loaded.experts;
    process.stderr.write(`${stepHeader()}\n`);
    const result = decode(loaded.model, options.ids, options.gen, options.mode, {
      beforeStep: () => experts.beginStep(),
      afterStep: (step) => {
        experts.endStep();
        process.stderr.write(`${stepRow(step, experts.step)}\n`);
      },
    });
    const seconds = decodeSeconds(result.steps);
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
    const text = tokenizer && result.generated.length > 0 ? decodeText(tokenizer, result.generated) : null;
    if (text !== null) process.stderr.write(`\n--- generated text ---\n${text}\n----------------------\n\n`);
    const peak = peakRssBytes();
    process.stderr.write(`PEAK RSS for the whole run: ${formatBytes(peak)}   <- quote this, not the plan\n`);
    process.stderr.write(`layers completed: ${layerCount}/${config.numLayers}; routed expert drops: ${experts.drops.length}\n`);
    if (result.steps.length > 0) process.stderr.write(`${cacheReport(prepared.expertPlan, experts.step, experts.residentSlots)}\n`);
    if (badScaleBytes() > 0) log.warn(`${badScaleBytes()} MXFP4 scale bytes of 255 (NaN in OCP MX) were met and treated as a zero multiplier`);
    const json = resultsJson({
      prompt_ids: options.ids, generated_ids: result.generated, full_ids: [...options.ids, ...result.generated],
      layers: layerCount, layers_requested: options.layers ?? config.numLayers,
      seconds_per_token: result.steps.length > 0 ? seconds / result.steps.length : 0,
      wall_seconds: (performance.now() - wallStarted) / 1000, mode: options.mode, peak_rss_bytes: peak,
      expert_drops: experts.drops.length, expert_bytes_read: experts.total.bytesRead,
      trunk_bytes_read: prepared.streamed?.stats.bytesRead ?? prepared.trunkPayloadBytes,
      generated_text: text,
    });
    if (options.out === "-") {
      emit(json);
    } else {
      writeAtomically(options.out, json, "the JSON results");
      log.info(`wrote ${options.out}`);
    }
    if (options.dumpCacheTrace && experts.trace) {
      const dump = dumpCacheTrace(options.dumpCacheTrace, experts.trace);
      if (dump.trace) log.info(traceWrittenLine(dump.trace));
      log.info(`wrote ${dump.histogramPath}`);
    }
    process.stderr.write(`${ioShareReport(prepared.streamed?.stats, experts.total, seconds, result.steps.length)}\n`);
    if (prepared.streamed) process.stderr.write(`${trunkReport(prepared.streamed.plan, prepared.streamed.stats, layerCount)}\n`);
    if (experts.drops.length > 0) {
      process.stderr.write(`${runInvalidReport(experts.drops)}\n`);
      return ExitCode.corruptTokens;
    }
    return ExitCode.ok;
  } finally {
    prepared.close();
  }
}
