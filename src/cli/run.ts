/** `k3 <model_dir> [options]`: validate the request, read the config and prompt, generate. */
import { join, resolve } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { resolveSampling, samplingDefaults } from "../decode/sampling-options.ts";
import type { RunResult } from "../engine/result.ts";
import { stopIfSignalled, watchSignals } from "../native/signals.ts";
import { resultJson } from "../report/results.ts";
import { ExitCode, argumentName, usageError } from "../errors.ts";
import { checkOutputDir, checkOutputFile, commitAll, outputTarget, stageBytes, type StagedWrite } from "../fs.ts";
import { budgetRequest } from "../plan/budget.ts";
import { emit, log } from "../report/log.ts";
import { histogramFileName, stageCacheTrace, traceFileName, traceWrittenLine } from "../weights/expert-trace.ts";
import { parseOptions } from "./args.ts";
import { checkLayers, checkTokenizerFits, injectedFaults, injectedTrunkReadFaults, tokMissingMessage } from "./common-options.ts";
import { executeRun, executeTfCheck, finishRun, type RunOutcome } from "./execute.ts";
import { schemaConstraint } from "./json-schema-option.ts";
import { stateFileCounts } from "../model/state-file.ts";
import { loadTokenizer } from "../tokenizer/index.ts";
import { checkInVocabulary, checkRequest, resolvePrompt } from "./prompt.ts";
import { runBatchFile } from "./run-batch.ts";
import { defaultRunOptions, runOptionTable, type ParsedRun, type RunOptions } from "./run-options.ts";
import { checkSpeculation, speculationRequest } from "./speculation-options.ts";

/** Parses and validates everything that needs no model: exit-2 mistakes surface here. */
export function parseRunArgs(args: readonly string[]): ParsedRun {
  const first = args[0];
  if (first === undefined) throw usageError("missing <model_dir>");
  if (first.startsWith("-")) throw usageError(`the first argument must be the model directory, got ${argumentName(first)}`);
  const options = defaultRunOptions();
  options.modelDir = first;
  const extra = parseOptions(args.slice(1), runOptionTable, options);
  if (extra.length > 0) throw usageError(`unexpected argument ${argumentName(extra[0] as string)} (options start with --)`);
  if (options.promptSources.length === 0 && !options.loadState) {
    throw usageError("a prompt is required: give one of --ids, --prompt, --prompt-file (or resume with --load-state)");
  }
  const sources = [...new Set(options.promptSources)];
  if (sources.length > 1) throw usageError(`${sources.join(" and ")} are mutually exclusive: give exactly one prompt source`);
  const source = options.promptSources[0];
  if (source !== undefined && source !== "--ids" && source !== "--batch" && !options.tokDir) throw usageError(tokMissingMessage(source));
  if (options.parallelGiven && source !== "--batch") throw usageError("--parallel decodes the prompts of --batch together: it needs --batch FILE");
  if (options.logprobs !== undefined && source !== "--batch") throw usageError("--logprobs reports on the JSON lines of --batch: it needs --batch FILE");
  if (options.jsonSchema !== undefined && !options.tokDir) throw usageError("--json-schema needs --tok DIR: the grammar is over the tokenizer's pieces");
  if (options.jsonSchema !== undefined && options.tfCheck) throw usageError("--tf-check runs no decode: it cannot be combined with --json-schema");
  if (source === "--batch") {
    const alone = [
      ["--load-state", options.loadState], ["--save-state", options.saveState], ["--recompute", options.mode === "recompute" ? true : undefined],
      ["--tf-check", options.tfCheck || undefined], ["--dump-logits", options.dumpLogits], ["--dump-cache-trace", options.dumpCacheTrace],
      ["--draft-trunk", options.draftTrunk],
    ].find(([, v]) => v !== undefined);
    if (alone) throw usageError(`${alone[0]} is for one prompt: it cannot be combined with --batch`);
    if (!options.outGiven) options.out = "-"; // one JSON line per prompt, for pipelines
  }
  if (source === "--ids" && options.promptValue !== "-") checkRequest(options.ids.length, options.gen);
  const stateful = [["--spec", options.spec], ["--load-state", options.loadState], ["--save-state", options.saveState]].find(([, v]) => v !== undefined);
  const recompute = options.mode === "recompute";
  const budgets = budgetRequest(options.budgets);
  checkSpeculation(options, { recompute, ultra: budgets.ultraLowMemory });
  if (stateful && recompute) throw usageError(`${stateful[0]} needs incremental decode (it carries the sequence state); drop --recompute`);
  if (stateful && options.tfCheck) throw usageError(`--tf-check runs no decode: it cannot be combined with ${stateful[0]}`);
  if (options.tfCheck && options.draftTrunk) throw usageError("--tf-check runs no decode: it cannot be combined with --draft-trunk");
  resolveSampling(options.sampling, samplingDefaults.run); // a bad knob is a usage error before anything loads
  return { ...options, budgetRequest: budgets };
}

/** Returns the process exit code. Info flags and the bare `k3` are answered by cli/main.ts. */
export async function main(args: readonly string[]): Promise<number> {
  const options = parseRunArgs(args);
  watchSignals();
  checkOutputs(options);
  const configPath = options.configPath ?? join(options.modelDir, "config.json");
  const { config, shape, warnings } = loadConfig(configPath);
  for (const warning of warnings) log.warn(`${configPath}: ${warning}`);
  const source = options.promptSources[0];
  const layerCount = checkLayers(options.layers, config);
  if (layerCount < config.numLayers) {
    log.warn(`NOTE: binding only the first ${layerCount} of ${config.numLayers} layers; the output is NOT the full model`);
  }
  if (source === "--batch") return runBatchFile(options, { config, configShape: shape, layerCount });
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
  if (prompt.tokenizer && options.tokDir) {
    const warning = checkTokenizerFits(prompt.tokenizer, config, options.tokDir);
    if (warning) log.warn(warning);
  }
  checkInVocabulary(prompt.ids, config.vocabSize, options.promptSources[0] as string);
  const spec = {
    modelDir: options.modelDir, config, configShape: shape, layerCount, layersRequested: options.layers ?? config.numLayers,
    prompt: prompt.ids, maxNewTokens: options.gen, mode: options.mode, prefillChunk: options.prefillChunk,
    sampling: resolveSampling(options.sampling, samplingDefaults.run), budgets: options.budgetRequest, trunkDir: options.trunkDir,
    tokenizer: prompt.tokenizer, faults: injectedFaults(), trunkReadFaults: injectedTrunkReadFaults(),
    trace: options.dumpCacheTrace !== undefined,
    ...speculationRequest(options),
    loadState: options.loadState && prior ? { path: options.loadState, ...prior } : undefined,
    saveState: options.saveState,
    ...(options.jsonSchema && { schema: await schemaConstraint(options.jsonSchema, prompt.tokenizer) }),
  };
  if (options.tfCheck) {
    const check = executeTfCheck(spec);
    writeJson(options.out, `${JSON.stringify(check)}\n`, "the teacher-forced check");
    return ExitCode.ok;
  }
  const outcome = await executeRun(spec);
  writeOutputs(options, outcome);
  return finishRun(outcome.result);
}

/** The paths the run will write, each flag with its path; "-" is stdout. */
function outputPaths(options: RunOptions): [flag: string, path: string][] {
  const paths: [string, string][] = [["--out", options.out]];
  if (options.dumpLogits) paths.push(["--dump-logits", options.dumpLogits]);
  if (options.saveState) paths.push(["--save-state", options.saveState]);
  if (options.dumpCacheTrace) {
    for (const name of [histogramFileName, traceFileName]) paths.push(["--dump-cache-trace", join(options.dumpCacheTrace, name)]);
  }
  return paths;
}

/**
 * Every output is checked before the model loads (runtime.md 1.7: a usage error, exit 2), so a
 * run is not wasted on a path it could never write; no two outputs may land on the same file.
 */
function checkOutputs(options: RunOptions): void {
  if (options.dumpCacheTrace) checkOutputDir(options.dumpCacheTrace, "--dump-cache-trace", { create: false });
  const seen = new Map<string, string>();
  for (const [flag, path] of outputPaths(options)) {
    checkOutputFile(path, flag);
    const key = path === "-" ? "stdout" : resolve(outputTarget(path).path);
    const other = seen.get(key);
    if (other) throw usageError(`${other} and ${flag} both write ${path === "-" ? "to stdout" : path}; give them different paths`);
    seen.set(key, flag);
  }
}

/**
 * The files and stdout data a run was asked for. Each is written complete to a temporary first,
 * then all are renamed into place with the results last (stdout last of all): when any of them
 * cannot be written nothing claims the run succeeded, and no temporary is left.
 */
function writeOutputs(options: RunOptions, outcome: RunOutcome): void {
  const writes: StagedWrite[] = [];
  const stdout: (string | Uint8Array)[] = [];
  const done: string[] = [];
  try {
    const logits = outcome.firstLogits;
    if (options.dumpLogits && !logits) log.warn("--dump-logits: no step ran (--gen 0), nothing written");
    if (options.dumpLogits && logits) {
      const bytes = new Uint8Array(logits.buffer, logits.byteOffset, logits.byteLength);
      if (options.dumpLogits === "-") {
        stdout.push(bytes);
      } else {
        writes.push(stageBytes({ path: options.dumpLogits, what: "the logits", flag: "--dump-logits" }, bytes));
        done.push(`wrote ${options.dumpLogits} (${logits.length} float32 logits)`);
      }
    }
    if (options.dumpCacheTrace && outcome.trace) {
      const staged = stageCacheTrace(options.dumpCacheTrace, outcome.trace, "--dump-cache-trace");
      writes.push(...staged.writes);
      done.push(`wrote ${staged.dump.histogramPath}`);
      if (staged.dump.trace) done.push(traceWrittenLine(staged.dump.trace));
    }
    stageJson(options.out, resultJson(outcome.result), "the JSON results", { writes, stdout, done });
    stopIfSignalled(); // the last moment a signal can keep the results from appearing
  } catch (error) {
    for (const write of writes) write.discard();
    throw error;
  }
  commitAll(writes);
  for (const data of stdout) emit(data);
  for (const line of done) log.info(line);
}

/** Stages `json` for `--out` (a file, or stdout for "-"). */
function stageJson(out: string, json: string, what: string, into: { writes: StagedWrite[]; stdout: (string | Uint8Array)[]; done: string[] }): void {
  if (out === "-") {
    into.stdout.push(json);
    return;
  }
  into.writes.push(stageBytes({ path: out, what, flag: "--out" }, json));
  into.done.push(`wrote ${out}`);
}

/** Writes one JSON document to `--out` whole, or not at all. */
function writeJson(out: string, json: string, what: string): void {
  const into = { writes: [] as StagedWrite[], stdout: [] as (string | Uint8Array)[], done: [] as string[] };
  stageJson(out, json, what, into);
  commitAll(into.writes);
  for (const data of into.stdout) emit(data);
  for (const line of into.done) log.info(line);
}
