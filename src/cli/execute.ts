/**
 * One generation from the command line, shared by `k3 <model_dir>` and `k3 demo`: open the
 * engine, generate, and tell people what happened on stderr as it happens. Everything printed
 * is rendered from the engine's plan and the run's result; the exit code follows the result.
 */
import type { SchemaConstraint } from "./json-schema-option.ts";
import type { ModelConfig } from "../checkpoint/config.ts";
import type { DecodeMode } from "../decode/loop.ts";
import type { SamplingOptions } from "../decode/sampling-options.ts";
import { teacherForced } from "../decode/teacher-forced.ts";
import { generate } from "../engine/generate.ts";
import { openEngine, type EngineRequest } from "../engine/open.ts";
import type { RunResult } from "../engine/result.ts";
import { ExitCode, K3Error, type ExitCodeValue } from "../errors.ts";
import type { BudgetRequest } from "../plan/budget.ts";
import { positionsNeeded } from "../plan/limits.ts";
import { log } from "../report/log.ts";
import { openingLines, planBlock } from "../report/plan-report.ts";
import { dropLine, hybridBanner, loadLines, runReport, runWarnings, speculationBanner, teacherForcedLines, verdictReport } from "../report/run-report.ts";
import { stepHeader, stepRow } from "../report/table.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { ExpertTraceRecorder } from "../weights/expert-trace.ts";

export interface RunSpec {
  modelDir: string;
  config: ModelConfig;
  configShape: string;
  layerCount: number;
  layersRequested: number;
  prompt: readonly number[];
  maxNewTokens: number;
  mode: DecodeMode;
  sampling: SamplingOptions;
  /** Ids per forward call when feeding the prompt (or a recomputed prefix). */
  prefillChunk: number;
  budgets: BudgetRequest;
  trunkDir: string | undefined;
  tokenizer: Tokenizer | undefined;
  faults?: ReadonlySet<string>;
  trunkReadFaults?: ReadonlyMap<number, number>;
  trace?: boolean;
  /** Speculative decode: up to this many drafted ids per sweep. */
  speculative?: number;
  /** Hybrid decode: the draft model's trunk and budget; its drafts replace the n-gram lookup's. */
  draft?: { trunkDir: string; budgetBytes: number };
  /** A state file to resume, with the counts its header gave. */
  loadState?: { path: string; position: number; idCount: number };
  saveState?: string;
  /** --batch: prompts decoded `parallel` at a time; `prompt` is then the longest of them. */
  batch?: { parallel: number };
  /** --json-schema: the continuation's constraint and the stop id it ends with. */
  schema?: SchemaConstraint;
}

/** What a finished run hands back to its command. */
export interface RunOutcome {
  result: RunResult;
  firstLogits: Float32Array | undefined;
  /** Every expert request, when `spec.trace` asked for it. */
  trace: ExpertTraceRecorder | undefined;
}

const stderr = (text: string) => process.stderr.write(`${text}\n`);

/** Opens the engine for `spec`, printing the opening lines, the plan and the load lines. */
export function openForRun(spec: RunSpec) {
  const prior = spec.loadState?.idCount ?? 0;
  const fedFirst = prior - (spec.loadState?.position ?? 0) + spec.prompt.length;
  const ultraRecompute = spec.mode === "recompute" && spec.budgets.ultraLowMemory;
  // The longest call: the prompt (incremental), the whole prefix (recompute), or one verification sweep.
  // In ultra-low-memory recompute one recurrent slot serves every layer, so each pass is one call.
  const longestCall = ultraRecompute ? spec.prompt.length + spec.maxNewTokens : Math.max(
    Math.min(spec.prefillChunk, spec.mode === "recompute" ? spec.prompt.length + spec.maxNewTokens : Math.max(fedFirst, 1)),
    spec.speculative ? spec.speculative + 1 : 1,
  );
  const sequences = spec.batch?.parallel ?? 1;
  const request: EngineRequest = {
    modelDir: spec.modelDir, config: spec.config, layerCount: spec.layerCount,
    positions: positionsNeeded(prior, spec.prompt.length, spec.maxNewTokens),
    // A batched step holds at most one such call of every sequence.
    prefillChunk: sequences * longestCall, sequences,
    budgets: spec.budgets, trunkDir: spec.trunkDir, faults: spec.faults, trunkReadFaults: spec.trunkReadFaults, trace: spec.trace,
    draft: spec.draft, mode: spec.mode, speculative: spec.speculative,
  };
  const engine = openEngine(request, {
    onPlan: (plan) => {
      const intent = { promptTokens: spec.prompt.length, maxNewTokens: spec.maxNewTokens, mode: spec.mode, configShape: spec.configShape };
      for (const line of openingLines(plan, intent)) log.info(line);
      stderr(planBlock(plan));
    },
    onLayerBound: (bound, total, seconds) => {
      if (bound % 10 === 0) log.info(`  bound ${bound}/${total} layers, ${seconds.toFixed(1)} s elapsed`);
    },
    onWarning: (message) => log.warn(message),
    onDrop: (drop) => stderr(dropLine(drop)),
    onBufferedFallback: (path) => log.info(`${path}: the filesystem refuses O_DIRECT; reading through the page cache`),
  });
  for (const line of loadLines(engine.plan, engine.loadSeconds, engine.peakRssAfterLoadBytes)) log.info(line);
  return engine;
}

/** Runs `spec` and prints its report; the engine is closed when it returns. */
export async function executeRun(spec: RunSpec): Promise<RunOutcome> {
  using engine = openForRun(spec);
  if (spec.loadState) log.info(`resuming from ${spec.loadState.path}: ${spec.loadState.position} prior positions, ${spec.prompt.length} new`);
  if (spec.speculative && engine.plan.draft) for (const line of hybridBanner(engine.plan.draft, spec.speculative)) log.info(line);
  else if (spec.speculative) log.info(speculationBanner(spec.speculative));
  stderr(stepHeader());
  let firstLogits: Float32Array | undefined;
  let stepsDone = 0;
  let result: RunResult;
  try {
    result = await generate(engine, spec.prompt, {
      maxNewTokens: spec.maxNewTokens, mode: spec.mode, sampling: spec.sampling, tokenizer: spec.tokenizer, layersRequested: spec.layersRequested,
      speculative: spec.speculative ? { maxDraft: spec.speculative } : undefined, loadState: spec.loadState?.path, saveState: spec.saveState,
      ...(spec.schema && { constraint: spec.schema.make(), stopIds: spec.schema.stopIds }),
    }, {
      onStep: (step) => { stepsDone++; stderr(stepRow(step)); },
      onFirstLogits: (logits) => { firstLogits = logits; },
    });
  } catch (error) {
    // The step table above looks like a run in progress: say plainly that it ended here.
    if (error instanceof K3Error && error.exitCode === ExitCode.runtime) {
      throw new K3Error(error.exitCode, `${error.message}; the run stopped at step ${stepsDone} and wrote no results`);
    }
    throw error;
  }
  stderr(runReport(result));
  for (const warning of runWarnings(result)) log.warn(warning);
  return { result, firstLogits, trace: engine.experts.trace };
}

/** `--tf-check`: the agreement lines on stderr; returns the JSON fields of runtime.md 9.4. */
export function executeTfCheck(spec: RunSpec): { tf_positions: number; tf_matches: number; tf_agreement: number } {
  using engine = openForRun(spec);
  const started = performance.now();
  const check = teacherForced(engine.model, spec.prompt, engine.plan.prefillChunk);
  for (const line of teacherForcedLines(check, spec.prompt, (performance.now() - started) / 1000)) stderr(line);
  return { tf_positions: check.positions, tf_matches: check.matches, tf_agreement: Number((check.matches / check.positions).toFixed(4)) };
}

/** Prints the verdict, last, and returns the exit code: 4 when an expert was dropped. */
export function finishRun(result: RunResult): ExitCodeValue {
  const verdict = verdictReport(result);
  if (verdict) stderr(verdict);
  return result.drops.length > 0 ? ExitCode.corruptTokens : ExitCode.ok;
}
