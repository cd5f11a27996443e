/** `k3 <model_dir> [options]`: validate the request, read the config and prompt, generate. */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { defaultHybridDraftIds } from "../decode/drafter.ts";
import { resolveSampling, samplingDefaults } from "../decode/sampling-options.ts";
import type { RunResult } from "../engine/result.ts";
import { resultJson } from "../report/results.ts";
import { ExitCode, usageError } from "../errors.ts";
import { writeAtomically } from "../fs.ts";
import { defaultDraftTrunkBytes, ultraRequested } from "../plan/budget.ts";
import { maxPositions, maxPromptIds } from "../plan/limits.ts";
import { emit, log } from "../report/log.ts";
import { dumpCacheTrace, traceWrittenLine } from "../weights/expert-trace.ts";
import { stateFileCounts } from "../model/state-file.ts";
import { loadTokenizer } from "../tokenizer/index.ts";
import { parseOptions } from "./args.ts";
import { checkLayers, injectedFaults, tokMissingMessage } from "./common-options.ts";
import { executeRun, executeTfCheck, finishRun, type RunOutcome } from "./execute.ts";
import { resolvePrompt } from "./prompt.ts";
import { defaultRunOptions, runOptionTable, type RunOptions } from "./run-options.ts";

/** Parses and validates everything that needs no model: exit-2 mistakes surface here. */
export function parseRunArgs(args: readonly string[]): RunOptions {
  const first = args[0];
  if (first === undefined) throw usageError("missing <model_dir>");
  if (first.startsWith("-")) throw usageError(`the first argument must be the model directory, got ${first}`);
  const options = defaultRunOptions();
  options.modelDir = first;
  const extra = parseOptions(args.slice(1), runOptionTable, options);
  if (extra.length > 0) throw usageError(`unexpected argument ${extra[0]} (options start with --)`);
  if (options.promptSources.length === 0 && !options.loadState) {
    throw usageError("a prompt is required: give one of --ids, --prompt, --prompt-file (or resume with --load-state)");
  }
  const sources = [...new Set(options.promptSources)];
  if (sources.length > 1) throw usageError(`${sources.join(" and ")} are mutually exclusive: give exactly one prompt source`);
  const source = options.promptSources[0];
  if (source !== undefined && source !== "--ids" && !options.tokDir) throw usageError(tokMissingMessage(source));
  if (source === "--ids" && options.promptValue !== "-") checkRequest(options.ids.length, options.gen);
  if (options.mode === "recompute") {
    const needsState = [["--spec", options.spec], ["--load-state", options.loadState], ["--save-state", options.saveState]].find(([, v]) => v !== undefined);
    if (needsState) throw usageError(`${needsState[0]} needs incremental decode (it carries the sequence state); drop --recompute`);
  }
  if (options.draftTrunkBytes !== undefined && !options.draftTrunk) throw usageError("--draft-trunk-gb is the draft trunk's budget: it needs --draft-trunk DIR");
  if (options.draftTrunk && options.mode === "recompute") {
    throw usageError("--draft-trunk needs incremental decode (the draft carries its own state); drop --recompute");
  }
  if (ultraRequested(options.budgets)) {
    const serialOnly = [["--spec", options.spec], ["--draft-trunk", options.draftTrunk]].find(([, v]) => v !== undefined);
    if (serialOnly) throw usageError(`ultra-low-memory mode (--ultra-low-memory or --preset ultra) decodes serially: it cannot be combined with ${serialOnly[0]}`);
  }
  if (options.tfCheck) {
    const other = [["--spec", options.spec], ["--load-state", options.loadState], ["--save-state", options.saveState], ["--draft-trunk", options.draftTrunk]].find(([, v]) => v !== undefined);
    if (other) throw usageError(`--tf-check runs no decode: it cannot be combined with ${other[0]}`);
  }
  resolveSampling(options.sampling, samplingDefaults.run); // a bad knob is a usage error before anything loads
  return options;
}

/** Request limits (runtime.md 1.6): refused, never truncated. `prior`: ids a resumed state brings. */
function checkRequest(promptIds: number, gen: number, prior = 0): void {
  if (promptIds > maxPromptIds) throw usageError(`the prompt has ${promptIds} ids; the ceiling is ${maxPromptIds}`);
  if (prior + promptIds + gen + 1 > maxPositions) {
    const resumed = prior > 0 ? `the resumed state's ${prior} ids + ` : "";
    throw usageError(`${resumed}prompt (${promptIds}) + --gen (${gen}) + 1 exceeds the ${maxPositions}-position ceiling`);
  }
}

/** Returns the process exit code. Info flags and the bare `k3` are answered by cli/main.ts. */
export async function main(args: readonly string[]): Promise<number> {
  const options = parseRunArgs(args);
  const configPath = options.configPath ?? join(options.modelDir, "config.json");
  const { config, shape, warnings } = loadConfig(configPath);
  for (const warning of warnings) log.warn(`${configPath}: ${warning}`);
  const source = options.promptSources[0];
  const prompt = source === undefined
    ? { ids: [], tokenizer: options.tokDir ? loadTokenizer(options.tokDir) : undefined }
    : resolvePrompt({ source, value: options.promptValue, tokDir: options.tokDir });
  // The header alone, before anything is sized: the positions count what the state brings (runtime.md 8.4's weakness, fixed).
  const prior = options.loadState ? stateFileCounts(options.loadState) : undefined;
  if (prior && prior.idCount === prior.position && prompt.ids.length === 0) {
    throw usageError(`--load-state: ${options.loadState} holds no pending id (it was saved with --gen 0); give a prompt to continue with`);
  }
  if (options.tfCheck && prompt.ids.length < 2) throw usageError("--tf-check needs a prompt of at least 2 ids");
  checkRequest(prompt.ids.length, options.gen, prior?.idCount ?? 0);
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
  const spec = {
    modelDir: options.modelDir, config, configShape: shape, layerCount, layersRequested: options.layers ?? config.numLayers,
    prompt: prompt.ids, maxNewTokens: options.gen, mode: options.mode, prefillChunk: options.prefillChunk,
    sampling: resolveSampling(options.sampling, samplingDefaults.run), budgets: options.budgets, trunkDir: options.trunkDir,
    tokenizer: prompt.tokenizer, faults: injectedFaults(), trace: options.dumpCacheTrace !== undefined,
    speculative: options.spec ?? (options.draftTrunk ? defaultHybridDraftIds : undefined),
    draft: options.draftTrunk ? { trunkDir: options.draftTrunk, budgetBytes: options.draftTrunkBytes ?? defaultDraftTrunkBytes } : undefined,
    loadState: options.loadState && prior ? { path: options.loadState, ...prior } : undefined,
    saveState: options.saveState,
  };
  if (options.tfCheck) {
    const check = executeTfCheck(spec);
    writeJson(options.out, `${JSON.stringify(check)}\n`, "the teacher-forced check");
    return ExitCode.ok;
  }
  const outcome = executeRun(spec);
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
  writeJson(out, resultJson(result), "the JSON results");
}

function writeJson(out: string, json: string, what: string): void {
  if (out === "-") {
    emit(json);
    return;
  }
  writeAtomically(out, json, what);
  log.info(`wrote ${out}`);
}

