/**
 * One run on an open engine: decode from a prompt, collecting everything the run produced into
 * a RunResult. Statistics are this run's alone (the engine's counters are read as differences),
 * so an engine can serve run after run.
 */
import type { Constraint } from "../decode/constraint.ts";
import type { Drafter } from "../decode/drafter.ts";
import { decode, type DecodeMode } from "../decode/loop.ts";
import { ngramDrafter } from "../decode/ngram-drafter.ts";
import { createSampler } from "../decode/sampling.ts";
import { samplingDefaults, type SamplingOptions } from "../decode/sampling-options.ts";
import { readStateFile, stateFileBytes, writeStateFile } from "../model/state-file.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import { addStats, emptyStats } from "../weights/expert-cache.ts";
import type { ExpertStepStats, TrunkStats } from "./result.ts";
import { startHybrid } from "./hybrid.ts";
import { peakRssBytes, type Engine } from "./open.ts";
import type { RunResult, StepResult } from "./result.ts";

export interface GenerateOptions {
  maxNewTokens: number;
  mode: DecodeMode;
  /** How tokens are chosen; greedy (the run command's default) when omitted. */
  sampling?: SamplingOptions;
  stopIds?: ReadonlySet<number>;
  /** Decodes the generated ids to `generatedText`; without it the text is null. */
  tokenizer?: Tokenizer;
  /** The layer count the user asked for (defaults to the model's), for the results. */
  layersRequested?: number;
  /**
   * Speculative decode: up to `maxDraft` ids per sweep from `drafter`; by default the engine's
   * draft model when it has one (hybrid decode), else the n-gram lookup.
   */
  speculative?: { maxDraft: number; drafter?: Drafter };
  /** Masks what may be generated (a JSON schema, --json-schema); nothing is masked without it. */
  constraint?: Constraint;
  /** A state file to resume: its ids come before `prompt` (runtime.md 8.3). */
  loadState?: string;
  /** Where to write the state after the run. */
  saveState?: string;
}

export interface GenerateEvents {
  /** After each step, with its token, time and expert figures. */
  onStep?: (step: StepResult) => void;
  /** Each token as it is chosen; returning a reason ends the run after it. */
  onToken?: (token: number, step: number) => "stop" | "cancelled" | undefined | void;
  /** The logits of the last prompt position, once (the step-0 logits). */
  onFirstLogits?: (logits: Float32Array) => void;
}

function sumStats(steps: readonly StepResult[]): ExpertStepStats {
  const total = emptyStats();
  for (const { experts } of steps) addStats(total, experts);
  return total;
}

function statsSince(now: TrunkStats, before: TrunkStats): TrunkStats {
  const delta = { ...now };
  for (const key of Object.keys(delta) as (keyof TrunkStats)[]) delta[key] -= before[key];
  return delta;
}

export async function generate(engine: Engine, prompt: readonly number[], options: GenerateOptions, events: GenerateEvents = {}): Promise<RunResult> {
  const { experts, streamed, plan } = engine;
  const trunkBefore = streamed ? { ...streamed.stats } : undefined;
  const tablesBefore = { ...engine.tables.stats };
  const dropsBefore = experts.drops.length;
  const badScalesBefore = engine.badScaleBytes();
  const warningsBefore = engine.warnings.length;
  const steps: StepResult[] = [];
  const sampling = options.sampling ?? samplingDefaults.run;
  const carried = options.loadState || options.saveState ? engine.model.newState() : undefined;
  let hybrid: ReturnType<typeof startHybrid>;
  try {
    // The pending-token rule (runtime.md 8.3): everything the file holds after its cached positions is fed first.
    const restoreStarted = performance.now();
    const resumed = options.loadState && carried ? readStateFile(options.loadState, carried) : undefined;
    const restoreSeconds = (performance.now() - restoreStarted) / 1000;
    const history = resumed?.ids ?? [];
    const fedFirst = [...history.slice(resumed?.position ?? 0), ...prompt];
    hybrid = options.speculative && !options.speculative.drafter ? startHybrid(engine) : undefined;
    const drafter = options.speculative && (options.speculative.drafter ?? hybrid?.drafter ?? ngramDrafter);
    const decoded = await decode(engine.model, fedFirst, {
      maxNewTokens: options.maxNewTokens, mode: options.mode, sampler: createSampler(sampling), stopIds: options.stopIds, constraint: options.constraint,
      // A draft model starts from position 0 (its state is never saved): it feeds the resumed positions first.
      prefillChunk: plan.prefillChunk, state: carried, history: history.slice(0, resumed?.position ?? 0),
      speculative: drafter && options.speculative && { drafter, maxDraft: options.speculative.maxDraft },
      onToken: events.onToken,
      beforeStep: () => experts.beginStep(),
      afterStep: (record) => {
        experts.endStep();
        const step = { ...record, experts: { ...experts.step } };
        steps.push(step);
        events.onStep?.(step);
      },
    });
    if (decoded.firstLogits) events.onFirstLogits?.(decoded.firstLogits);
    const generated = decoded.generated;
    const fullIds = [...history, ...prompt, ...generated];
    let savedState: RunResult["savedState"];
    if (options.saveState && carried) {
      const started = performance.now();
      const bytes = writeStateFile(options.saveState, carried, fullIds);
      savedState = { path: options.saveState, bytes, positions: carried.position, seconds: (performance.now() - started) / 1000 };
    }
    const decodeSeconds = steps.reduce((sum, s) => sum + s.seconds, 0);
    const total = sumStats(steps);
    const trunkStats = streamed && trunkBefore ? statsSince(streamed.stats, trunkBefore) : undefined;
    const tables = { ...engine.tables.stats };
    for (const key of Object.keys(tables) as (keyof typeof tables)[]) tables[key] -= tablesBefore[key];
    // Ultra-low-memory mode reads the embedding rows and the LM head synchronously: all of it is waiting.
    const waited = (trunkStats?.waitSeconds ?? 0) + total.waitSeconds + tables.readSeconds;
    return {
      promptIds: [...prompt], generatedIds: generated, fullIds,
      generatedText: options.tokenizer && generated.length > 0 ? options.tokenizer.decodeText(generated) : null,
      finishReason: decoded.finish, mode: options.mode, sampling,
      layers: plan.layerCount, layersRequested: options.layersRequested ?? plan.modelLayers,
      secondsPerToken: steps.length > 0 ? decodeSeconds / steps.length : 0, decodeSeconds,
      wallSeconds: (performance.now() - engine.openedAt) / 1000,
      peakRssBytes: peakRssBytes(), peakRssAfterLoadBytes: engine.peakRssAfterLoadBytes, loadSeconds: engine.loadSeconds,
      expertDrops: experts.drops.length - dropsBefore, expertBytesRead: total.bytesRead,
      trunkBytesRead: trunkStats?.bytesRead ?? plan.trunkPayloadBytes,
      steps, plan, trunkStats,
      experts: { total, residentSlots: experts.residentSlots },
      ioShare: decodeSeconds > 0 ? waited / decodeSeconds : 0,
      drops: experts.drops.slice(dropsBefore),
      badScaleBytes: engine.badScaleBytes() - badScalesBefore,
      warnings: [...new Set(engine.warnings.slice(Math.max(warningsBefore, engine.warningsAtLoad)))],
      speculation: decoded.speculation,
      hybrid: hybrid?.stats(),
      ultraLowMemory: engine.tables.streamed,
      embeddingBytesRead: tables.embeddingBytesRead, lmHeadBytesRead: tables.lmHeadBytesRead, tableReadSeconds: tables.readSeconds,
      resumedFrom: resumed && options.loadState && carried
        ? {
          path: options.loadState, priorPositions: resumed.position, priorIds: history.length,
          bytes: stateFileBytes(carried, resumed.position, history.length), seconds: restoreSeconds,
        }
        : undefined,
      savedState,
    };
  } finally {
    hybrid?.close();
    if (carried) engine.model.release(carried);
  }
}
