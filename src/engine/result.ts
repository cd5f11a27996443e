/**
 * What one run produced, as plain data: the ids and text, every step's time and cache figures,
 * the plan it ran under, the trunk and expert statistics, and what went wrong. `--out` writes it
 * whole (report/results.ts), and the stderr report is a function of it alone.
 */
import type { DecodeMode, FinishReason, SpeculationStats } from "../decode/loop.ts";
import type { SamplingOptions } from "../decode/sampling-options.ts";
import type { ExpertCachePlan, ExpertDrop, ExpertStepStats } from "../weights/expert-cache.ts";
import type { TrunkStats } from "../weights/trunk.ts";
import type { HybridStats } from "./hybrid.ts";
import type { EnginePlan } from "./open.ts";

export type { DraftPlan, EnginePlan, TrunkPlacement, UltraPlan } from "./open.ts";
export type { HybridStats } from "./hybrid.ts";
export type { ExpertCachePlan, ExpertDrop, ExpertStepStats, SpeculationStats, TrunkStats };

export interface StepResult {
  step: number;
  token: number;
  seconds: number;
  /** This step's expert requests; `residentHits` is the TRUE hit rate's numerator. */
  experts: ExpertStepStats;
}

export interface RunResult {
  promptIds: number[];
  generatedIds: number[];
  /** The whole sequence: prompt then generated. */
  fullIds: number[];
  /** The generated ids decoded once (text prompts); null for --ids runs. */
  generatedText: string | null;
  finishReason: FinishReason;
  mode: DecodeMode;
  /** How the tokens were chosen (temperature 0: greedy). */
  sampling: SamplingOptions;
  layers: number;
  layersRequested: number;
  /** Step wall time over generated tokens; loading and setup excluded. */
  secondsPerToken: number;
  /** Sum of the step wall times. */
  decodeSeconds: number;
  /** From opening the checkpoint to the end of the run. */
  wallSeconds: number;
  peakRssBytes: number;
  peakRssAfterLoadBytes: number;
  loadSeconds: number;
  expertDrops: number;
  expertBytesRead: number;
  trunkBytesRead: number;
  steps: StepResult[];
  plan: EnginePlan;
  /** Streamed trunk statistics; undefined when the trunk is resident. */
  trunkStats: TrunkStats | undefined;
  experts: {
    total: ExpertStepStats;
    /** Slots holding an expert when the run ended. */
    residentSlots: number;
  };
  /** Seconds the forward pass waited on the disk (trunk and experts) over the decode seconds. */
  ioShare: number;
  drops: ExpertDrop[];
  badScaleBytes: number;
  /** Warnings raised while the run bound streamed layers, each once. */
  warnings: string[];
  /** Speculative decode's sweeps, drafted and accepted ids; undefined without --spec. */
  speculation: SpeculationStats | undefined;
  /** Hybrid decode's draft model: what it fed and proposed, its cache-only routing, its trunk stream. */
  hybrid: HybridStats | undefined;
  /** Ultra-low-memory mode (runtime.md 2.4): the embedding and LM head were read from disk as needed. */
  ultraLowMemory: boolean;
  /** Bytes of embedding rows and of LM head chunks read during the run (0 when they are resident). */
  embeddingBytesRead: number;
  lmHeadBytesRead: number;
  /** Seconds spent waiting for those reads (the I/O share's "model tables" term). */
  tableReadSeconds: number;
  /** The state file the run resumed from: its path, the positions and ids it held, its size and the seconds its restore took. */
  resumedFrom: { path: string; priorPositions: number; priorIds: number; bytes: number; seconds: number } | undefined;
  /** The state file written after the run. */
  savedState: { path: string; bytes: number; positions: number; seconds: number } | undefined;
}
