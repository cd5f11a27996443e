/**
 * The memory plan (runtime.md section 3): what the run will hold, printed before anything
 * large is allocated, and a refusal with both numbers when it cannot fit. It is a forecast;
 * the measured peak RSS is reported at the end.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { attentionKind } from "../checkpoint/tensor-names.ts";
import { K3Error, ExitCode, usageError } from "../errors.ts";
import { formatBytes } from "../units.ts";

/**
 * What the runtime itself grows by during a run (JavaScript heap and JIT, libk3 and its thread
 * stacks), on top of the RSS measured when the plan is made: measured at 10-14 MB on the
 * K3-width benchmark (bench/streaming.ts), rounded up.
 */
export const runtimeGrowthBytes = 32e6;

export interface PlanInputs {
  config: ModelConfig;
  layerCount: number;
  /** prompt + gen + 1 */
  positions: number;
  /** Ids of the largest forward call (a prefill chunk): the activations are sized for it. */
  callTokens: number;
  trunk: { mode: "resident" | "streamed"; bytes: number };
  tablesBytes: number;
  expertCacheBytes: number;
  /** What the process holds already (runtime, shard index), measured when the plan is made. */
  baselineBytes: number;
  /** RAM for multi-turn state snapshots (--snapshot-gb); none for a single run. */
  snapshotBytes?: number;
  /**
   * Speculative decode (runtime.md 9.2): ids per verification sweep (the draft and the pending
   * id). The state is snapshot before every sweep and the sweep records what a replay needs.
   */
  sweepTokens?: number;
  /**
   * Hybrid decode (runtime.md 9.3): the draft model's streamed trunk (its ring plan's bytes). The
   * draft also holds its own state, snapshot, KV cache and activations, planned here like the
   * exact model's; it shares the embedding, the LM head and the expert cache.
   */
  draft?: { trunkBytes: number };
  /** Ultra-low-memory mode: `tablesBytes` is the streaming buffers, not the tables (runtime.md 2.4). */
  tablesStreamed?: boolean;
  /** Ultra-low-memory full recompute: one recurrent slot for every KDA layer. */
  oneRecurrentSlot?: boolean;
  /** Sequences decoded together (--parallel), each with its own recurrent state and KV cache; default 1. */
  sequences?: number;
}

export interface PlanTerm {
  name: string;
  bytes: number;
}

export interface MemoryPlan {
  terms: PlanTerm[];
  totalBytes: number;
  /** The positions planned for (prompt + gen + 1, or a chat's context). */
  positions: number;
  /** The model's context length (config max_position_embeddings): no request may exceed it. */
  contextLength: number;
  /** What one more position adds to the KV cache term. */
  kvBytesPerPosition: number;
  /** What one more position adds to the whole plan (the KV cache and the attention scratch). */
  bytesPerPosition: number;
}

/**
 * The MLA cache per position (model.md 9, the latent layout): per MLA layer the normalised
 * latent and the shared rope key, f32. Released: 24 × (512 + 64) × 4 = 55,296 B, against
 * 2,365,440 B for the expanded keys and values the cache no longer holds.
 */
export function kvBytesPerPosition(c: ModelConfig, layerCount: number): number {
  return mlaLayerCount(c, layerCount) * (c.kvLoraRank + c.qkRopeHeadDim) * 4;
}

/**
 * The recurrent part of one sequence state, which is also what one snapshot copies: per KDA
 * layer the f32 matrices and the ShortConv histories. Released: 69 × 6,733,824 B = 464.6 MB.
 */
export function recurrentStateBytes(c: ModelConfig, layerCount: number): number {
  const P = c.kdaNumHeads * c.kdaHeadDim;
  return (layerCount - mlaLayerCount(c, layerCount)) * (c.kdaNumHeads * c.kdaHeadDim * c.kdaHeadDim + 3 * P * (c.shortConvKernel - 1)) * 4;
}

/**
 * What a verification sweep over `tokens` ids records for its replay (model/state.ts): per KDA
 * layer and position the raw q, k, v, the normalised k, v and the decay (P floats each) and the
 * write strength (one per head). Released, a sweep of 5: 69 × 5 × 73,824 × 4 B = 101.9 MB.
 */
export function replayRecordBytes(c: ModelConfig, layerCount: number, tokens: number): number {
  const P = c.kdaNumHeads * c.kdaHeadDim;
  return (layerCount - mlaLayerCount(c, layerCount)) * tokens * (6 * P + c.kdaNumHeads) * 4;
}

/** One KDA layer's recurrent matrices and conv histories: the slot ultra's recompute reuses (6.73 MB released). */
export function recurrentSlotBytes(c: ModelConfig): number {
  const P = c.kdaNumHeads * c.kdaHeadDim;
  return (c.kdaNumHeads * c.kdaHeadDim * c.kdaHeadDim + 3 * P * (c.shortConvKernel - 1)) * 4;
}

function mlaLayerCount(c: ModelConfig, layerCount: number): number {
  return Array.from({ length: layerCount }, (_, l) => l).filter((l) => attentionKind(c, l) === "mla").length;
}

/**
 * The latent attention kernel's scratch that grows with the positions attended (zig/abi.zig
 * `k3_mla_latent_attention`): one f32 score per head and position, shared by the threads.
 */
function attentionScratchPerPosition(c: ModelConfig): number {
  return 4 * c.numAttentionHeads;
}

/** Its fixed part: the shared head-interleaved query and latent output (f64), eight heads a block. */
function attentionScratchFixed(c: ModelConfig): number {
  const R = c.kvLoraRank;
  const blocks = Math.ceil(c.numAttentionHeads / 8);
  return 8 * (8 * blocks * (R + c.qkRopeHeadDim) + c.numAttentionHeads * R);
}

/**
 * Activations of the largest step (the prompt's prefill) and the attention scratch for
 * `positions`: a forecast of the kernels' buffers.
 */
function bufferBytes(c: ModelConfig, tokens: number, layerCount: number, positions: number): number {
  const P = c.kdaNumHeads * c.kdaHeadDim;
  const blocks = Math.floor(layerCount / c.attnResBlockSize) + 2;
  const mlaWidth = c.numAttentionHeads * (c.qkNopeHeadDim + c.qkRopeHeadDim + 2 * c.vHeadDim);
  const ffnWidth = Math.max(c.intermediateSize, c.numSharedExperts * c.moeIntermediateSize);
  const perLayer = 12 * P + 3 * ffnWidth + mlaWidth + 4 * c.routedExpertHiddenSize;
  const activations = 4 * (tokens * (c.hiddenSize * (blocks + 8) + perLayer) + c.vocabSize);
  const attention = mlaLayerCount(c, layerCount) > 0 ? attentionScratchFixed(c) + positions * attentionScratchPerPosition(c) : 0;
  return activations + attention;
}

export function memoryPlan(p: PlanInputs): MemoryPlan {
  const c = p.config;
  const mlaLayers = mlaLayerCount(c, p.layerCount);
  const recurrent = p.oneRecurrentSlot ? recurrentSlotBytes(c) : recurrentStateBytes(c, p.layerCount);
  const sequences = p.sequences ?? 1;
  const each = sequences > 1 ? ` (${sequences} sequences)` : "";
  // KV bytes per position of every sequence: the positions a plan names are each sequence's.
  const perPosition = sequences * kvBytesPerPosition(c, p.layerCount);
  const kv = p.positions * perPosition;
  const terms: PlanTerm[] = ([
    [p.trunk.mode === "streamed" ? "trunk (STREAMED)" : "trunk (resident)", p.trunk.bytes],
    [p.tablesStreamed ? "embed + lm_head (STREAMED)" : "embed + lm_head", p.tablesBytes],
    ["expert cache", p.expertCacheBytes],
    [`recurrent state${each}`, sequences * recurrent],
    ["buffers", bufferBytes(c, p.callTokens, p.layerCount, p.positions)],
    [`KV cache${each}`, kv],
    ...(p.snapshotBytes ? [["state snapshots", p.snapshotBytes] as const] : []),
    // the snapshot taken before every sweep, and what the sweep records for a replay
    ...(p.sweepTokens ? [["speculation", recurrent + replayRecordBytes(c, p.layerCount, p.sweepTokens)] as const] : []),
    ...(p.draft
      ? ([
        ["draft trunk (STREAMED)", p.draft.trunkBytes],
        // its state, the snapshot of it each sweep, its KV cache and its activations
        ["draft state", 2 * recurrent + p.positions * kvBytesPerPosition(c, p.layerCount) + bufferBytes(c, p.callTokens, p.layerCount, p.positions)],
      ] as const)
      : []),
    ["process + index", p.baselineBytes + runtimeGrowthBytes],
  ] as const).map(([name, bytes]) => ({ name, bytes }));
  return {
    terms, totalBytes: terms.reduce((sum, t) => sum + t.bytes, 0), positions: p.positions, contextLength: c.maxPositionEmbeddings,
    kvBytesPerPosition: perPosition, bytesPerPosition: perPosition + (mlaLayers > 0 ? attentionScratchPerPosition(c) : 0),
  };
}

/**
 * The most positions a request may use under this plan (runtime.md 1.6): the context length,
 * and, when MemAvailable is known, what keeps the KV cache within 90% of it (the preflight)
 * and the whole plan within 95% (the plan check), everything else as planned.
 */
export function positionCeiling(plan: MemoryPlan, availableBytes: number | undefined): number {
  if (availableBytes === undefined || plan.bytesPerPosition === 0) return plan.contextLength;
  const kvFits = Math.floor((0.9 * availableBytes) / plan.kvBytesPerPosition);
  const rest = plan.totalBytes - plan.positions * plan.bytesPerPosition;
  const planFits = Math.floor((0.95 * availableBytes - rest) / plan.bytesPerPosition);
  return Math.max(0, Math.min(plan.contextLength, kvFits, planFits));
}

/**
 * The most sequences that fit within 95% of MemAvailable with everything else as `inputs` plans
 * it (the largest call's ids scaled with them): 0 when not even one does.
 */
export function sequencesFitting(inputs: PlanInputs, availableBytes: number): number {
  const asked = inputs.sequences ?? 1;
  const fits = (n: number) => memoryPlan({ ...inputs, sequences: n, callTokens: Math.ceil((inputs.callTokens * n) / asked) }).totalBytes <= 0.95 * availableBytes;
  let lo = 0;
  let hi = asked;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Refuses (exit 1) when the plan exceeds 95% of MemAvailable, naming what to change. */
export function checkPlanFits(plan: MemoryPlan, availableBytes: number | undefined): void {
  if (availableBytes === undefined || plan.totalBytes <= 0.95 * availableBytes) return;
  const shortfall = plan.totalBytes - 0.95 * availableBytes;
  throw new K3Error(
    ExitCode.runtime,
    `REFUSING TO START: the plan needs ${formatBytes(plan.totalBytes)} but only ${formatBytes(availableBytes)} is available ` +
      `(95% usable, short by ${formatBytes(shortfall)}); lower --cache-gb or --trunk-gb (with --trunk), use a smaller --preset, or fewer --layers`,
  );
}

/**
 * The KV preflight (runtime.md 3.3), before anything large is allocated: a request longer than
 * the model's context length, or whose MLA cache alone exceeds 90% of MemAvailable, is refused
 * (exit 2) with the ceiling this plan allows.
 */
export function checkKvFits(plan: MemoryPlan, availableBytes: number | undefined, positions: number): void {
  const ceiling = positionCeiling(plan, availableBytes);
  if (positions > plan.contextLength) {
    throw usageError(
      `REFUSING: ${positions} positions (prompt + generated + 1, or the chat context) exceed the model's context length of ` +
        `${plan.contextLength} (max_position_embeddings); at most ${ceiling} positions fit; ask for fewer tokens or a shorter prompt`,
    );
  }
  const kv = plan.terms.find((t) => t.name.startsWith("KV cache"))?.bytes ?? 0;
  if (availableBytes === undefined || kv <= 0.9 * availableBytes) return;
  throw usageError(
    `REFUSING: the KV cache needs ${formatBytes(kv)} for ${positions} positions (${formatBytes(kv / positions)} per position) ` +
      `but only ${formatBytes(availableBytes)} is available; at most ${ceiling} positions fit; ask for fewer tokens or a shorter prompt`,
  );
}
