/**
 * `k3 <model_dir> --ids ... [options]` run in the test's own process, for the tests of what the
 * engine does (ids, logits, budgets, chunks, state files, speculation): the command's own
 * argument parsing (parseRunArgs), the RunSpec its main() builds, the engine it opens and the
 * report it prints (executeRun, executeTfCheck), and its JSON results (resultJson). What the
 * run prints on stderr is captured and returned, not shown. No process is started, no model is
 * loaded twice over, and the kernels run with Zig's safety checks (the tests load libk3-safe).
 *
 * Not here, so tested through dist/k3 (test/support/k3.ts): how outputs are written (--out,
 * --dump-logits and --dump-cache-trace files; the logits come back as `firstLogits`), exit codes
 * and the checks main() makes before the engine opens, signals, and text prompts.
 */
import { join } from "node:path";
import { loadConfig } from "../../src/checkpoint/config.ts";
import { resolveSampling, samplingDefaults } from "../../src/decode/sampling-options.ts";
import { checkLayers, injectedFaults, injectedTrunkReadFaults } from "../../src/cli/common-options.ts";
import { executeRun, executeTfCheck, type RunSpec } from "../../src/cli/execute.ts";
import { parseRunArgs } from "../../src/cli/run.ts";
import { speculationRequest } from "../../src/cli/speculation-options.ts";
import { stateFileCounts } from "../../src/model/state-file.ts";
import { resultJson } from "../../src/report/results.ts";
import type { ExpertTraceRecorder } from "../../src/weights/expert-trace.ts";

export interface InProcessRun {
  /** The JSON results, as `--out -` prints them (snake_case keys), read as the dist/k3 tests read them. */
  json: any;
  /** Everything the run wrote on stderr. */
  stderr: string;
  /** The step-0 logits (what --dump-logits writes). */
  firstLogits: Float32Array | undefined;
  /** Every expert request, with --dump-cache-trace. */
  trace: ExpertTraceRecorder | undefined;
}

/**
 * One in-process run at a time: a run yields to the event loop between its steps (decode is the
 * server's loop too), and its stderr is collected by replacing process.stderr.write, so two
 * runs of concurrent tests must not overlap. They are CPU-bound in one thread either way.
 */
let turn: Promise<void> = Promise.resolve();

/** Runs `fn` alone, with the process's stderr writes collected instead of shown. */
async function capturingStderr<T>(fn: () => T | Promise<T>): Promise<{ value: T; stderr: string }> {
  const previous = turn;
  let done!: () => void;
  turn = new Promise((resolve) => { done = resolve; });
  await previous;
  const write = process.stderr.write;
  let text = "";
  process.stderr.write = ((chunk: string | Uint8Array) => {
    text += typeof chunk === "string" ? chunk : Buffer.from(chunk).toString();
    return true;
  }) as typeof process.stderr.write;
  try {
    return { value: await fn(), stderr: text };
  } finally {
    process.stderr.write = write;
    done();
  }
}

/** The RunSpec `k3 <args>` would run, built as src/cli/run.ts main() builds it (--ids prompts only). */
export function runSpec(args: readonly string[]): { spec: RunSpec; tfCheck: boolean } {
  const options = parseRunArgs(args);
  const source = options.promptSources[0];
  if (source !== undefined && source !== "--ids") throw new Error(`runInProcess takes --ids prompts only, not ${source}`);
  const { config, shape } = loadConfig(options.configPath ?? join(options.modelDir, "config.json"));
  const prior = options.loadState ? stateFileCounts(options.loadState) : undefined;
  const layerCount = checkLayers(options.layers, config);
  const spec: RunSpec = {
    modelDir: options.modelDir, config, configShape: shape, layerCount, layersRequested: options.layers ?? config.numLayers,
    prompt: options.ids, maxNewTokens: options.gen, mode: options.mode, prefillChunk: options.prefillChunk,
    sampling: resolveSampling(options.sampling, samplingDefaults.run), budgets: options.budgetRequest, trunkDir: options.trunkDir,
    tokenizer: undefined, faults: injectedFaults(), trunkReadFaults: injectedTrunkReadFaults(),
    trace: options.dumpCacheTrace !== undefined,
    ...speculationRequest(options),
    loadState: options.loadState && prior ? { path: options.loadState, ...prior } : undefined,
    saveState: options.saveState,
  };
  return { spec, tfCheck: options.tfCheck };
}

/** `k3 <args> --out -` in this process: the JSON results, stderr and the step-0 logits. */
export async function runInProcess(args: readonly string[]): Promise<InProcessRun> {
  const { spec, tfCheck } = runSpec(args);
  if (tfCheck) {
    const { value, stderr } = await capturingStderr(() => executeTfCheck(spec));
    return { json: value, stderr, firstLogits: undefined, trace: undefined };
  }
  const { value: outcome, stderr } = await capturingStderr(() => executeRun(spec));
  return { json: JSON.parse(resultJson(outcome.result)), stderr, firstLogits: outcome.firstLogits, trace: outcome.trace };
}

/** The bytes of a logits row, for bit-for-bit comparison (Buffer.compare). */
export const logitBytes = (logits: Float32Array | undefined): Buffer => {
  if (!logits) throw new Error("the run produced no logits (--gen 0?)");
  return Buffer.from(logits.buffer, logits.byteOffset, logits.byteLength);
};
