/** `k3 <model_dir> [options]`: validate the request, read the config and prompt, generate. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { resolveSampling, samplingDefaults } from "../decode/sampling-options.ts";
import type { RunResult } from "../engine/result.ts";
import { resultJson } from "../report/results.ts";
import { argumentName, usageError } from "../errors.ts";
import { writeAtomically } from "../fs.ts";
import { maxPositions, maxPromptIds } from "../plan/limits.ts";
import { emit, log } from "../report/log.ts";
import { dumpCacheTrace, traceWrittenLine } from "../weights/expert-trace.ts";
import { parseOptions } from "./args.ts";
import { checkLayers, checkTokenizerFits, injectedFaults, tokMissingMessage } from "./common-options.ts";
import { executeRun, finishRun, type RunOutcome } from "./execute.ts";
import { resolvePrompt } from "./prompt.ts";
import { defaultRunOptions, runOptionTable, type RunOptions } from "./run-options.ts";

/** Parses and validates everything that needs no model: exit-2 mistakes surface here. */
export function parseRunArgs(args: readonly string[]): RunOptions {
  const first = args[0];
  if (first === undefined) throw usageError("missing <model_dir>");
  if (first.startsWith("-")) throw usageError(`the first argument must be the model directory, got ${argumentName(first)}`);
  const options = defaultRunOptions();
  options.modelDir = first;
  const extra = parseOptions(args.slice(1), runOptionTable, options);
  if (extra.length > 0) throw usageError(`unexpected argument ${argumentName(extra[0] as string)} (options start with --)`);
  if (options.promptSources.length === 0) throw usageError("a prompt is required: give one of --ids, --prompt, --prompt-file");
  const sources = [...new Set(options.promptSources)];
  if (sources.length > 1) throw usageError(`${sources.join(" and ")} are mutually exclusive: give exactly one prompt source`);
  if (options.promptSources[0] !== "--ids" && !options.tokDir) throw usageError(tokMissingMessage(options.promptSources[0] as string));
  if (options.promptSources[0] === "--ids" && options.promptValue !== "-") checkRequest(options.ids, options.gen);
  resolveSampling(options.sampling, samplingDefaults.run); // a bad knob is a usage error before anything loads
  return options;
}

/** Request limits (runtime.md 1.6): refused, never truncated. */
function checkRequest(ids: readonly number[], gen: number): void {
  if (ids.length > maxPromptIds) throw usageError(`the prompt has ${ids.length} ids; the ceiling is ${maxPromptIds}`);
  if (ids.length + gen + 1 > maxPositions) {
    throw usageError(`prompt (${ids.length}) + --gen (${gen}) + 1 exceeds the ${maxPositions}-position ceiling`);
  }
}

/** Returns the process exit code. Info flags and the bare `k3` are answered by cli/main.ts. */
export async function main(args: readonly string[]): Promise<number> {
  const options = parseRunArgs(args);
  const configPath = options.configPath ?? join(options.modelDir, "config.json");
  const { config, shape, warnings } = loadConfig(configPath);
  for (const warning of warnings) log.warn(`${configPath}: ${warning}`);
  const prompt = resolvePrompt({ source: options.promptSources[0] as string, value: options.promptValue, tokDir: options.tokDir });
  checkRequest(prompt.ids, options.gen);
  if (prompt.tokenizer && options.tokDir) {
    const warning = checkTokenizerFits(prompt.tokenizer, config, options.tokDir);
    if (warning) log.warn(warning);
  }
  const outside = prompt.ids.find((id) => id >= config.vocabSize);
  if (outside !== undefined) {
    throw usageError(`${options.promptSources[0]}: token id ${outside} is outside the vocabulary (size ${config.vocabSize})`);
  }
  const layerCount = checkLayers(options.layers, config);
  if (layerCount < config.numLayers) {
    log.warn(`NOTE: binding only the first ${layerCount} of ${config.numLayers} layers; the output is NOT the full model`);
  }
  if (options.dumpCacheTrace && !existsSync(options.dumpCacheTrace)) {
    throw usageError(`--dump-cache-trace: directory ${options.dumpCacheTrace} does not exist`);
  }
  const outcome = executeRun({
    modelDir: options.modelDir, config, configShape: shape, layerCount, layersRequested: options.layers ?? config.numLayers,
    prompt: prompt.ids, maxNewTokens: options.gen, mode: options.mode, prefillChunk: options.prefillChunk,
    sampling: resolveSampling(options.sampling, samplingDefaults.run), budgets: options.budgets, trunkDir: options.trunkDir,
    tokenizer: prompt.tokenizer, faults: injectedFaults(), trace: options.dumpCacheTrace !== undefined,
  });
  writeOutputs(options, outcome);
  return finishRun(outcome.result);
}

/** The files and stdout data a run was asked for: the logits dump, the results, the trace. */
function writeOutputs(options: RunOptions, outcome: RunOutcome): void {
  if (options.dumpLogits) dumpLogits(options.dumpLogits, outcome.firstLogits);
  writeResults(options.out, outcome.result);
  if (options.dumpCacheTrace && outcome.trace) {
    const dump = dumpCacheTrace(options.dumpCacheTrace, outcome.trace);
    if (dump.trace) log.info(traceWrittenLine(dump.trace));
    log.info(`wrote ${dump.histogramPath}`);
  }
}

function dumpLogits(path: string, logits: Float32Array | undefined): void {
  if (!logits) {
    log.warn("--dump-logits: no step ran (--gen 0), nothing written");
    return;
  }
  try {
    writeAtomically(path, new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength), "the logits");
    log.info(`wrote ${path} (${logits.length} float32 logits)`);
  } catch (error) {
    // As the original: the tokens are still good, so say so and go on to the results.
    log.error(`--dump-logits: ${(error as Error).message}; continuing without it`);
  }
}

function writeResults(out: string, result: RunResult): void {
  const json = resultJson(result);
  if (out === "-") {
    emit(json);
    return;
  }
  writeAtomically(out, json, "the JSON results");
  log.info(`wrote ${out}`);
}

