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
}

export interface PlanTerm {
  name: string;
  bytes: number;
}

export interface MemoryPlan {
  terms: PlanTerm[];
  totalBytes: number;
}

/** Activations of the largest step (the prompt's prefill): a forecast of the kernels' buffers. */
function bufferBytes(c: ModelConfig, tokens: number, layerCount: number): number {
  const P = c.kdaNumHeads * c.kdaHeadDim;
  const blocks = Math.floor(layerCount / c.attnResBlockSize) + 2;
  const mlaWidth = c.numAttentionHeads * (c.qkNopeHeadDim + c.qkRopeHeadDim + 2 * c.vHeadDim);
  const ffnWidth = Math.max(c.intermediateSize, c.numSharedExperts * c.moeIntermediateSize);
  const perLayer = 12 * P + 3 * ffnWidth + mlaWidth + 4 * c.routedExpertHiddenSize;
  return 4 * (tokens * (c.hiddenSize * (blocks + 8) + perLayer) + c.vocabSize);
}

export function memoryPlan(p: PlanInputs): MemoryPlan {
  const c = p.config;
  const layers = Array.from({ length: p.layerCount }, (_, l) => l);
  const kdaLayers = layers.filter((l) => attentionKind(c, l) === "kda").length;
  const mlaLayers = p.layerCount - kdaLayers;
  const P = c.kdaNumHeads * c.kdaHeadDim;
  const recurrent = kdaLayers * (c.kdaNumHeads * c.kdaHeadDim * c.kdaHeadDim + 3 * P * (c.shortConvKernel - 1)) * 4;
  const kv = mlaLayers * p.positions * (c.numAttentionHeads * (c.qkNopeHeadDim + c.vHeadDim) + c.qkRopeHeadDim) * 4;
  const terms: PlanTerm[] = ([
    [p.trunk.mode === "streamed" ? "trunk (STREAMED)" : "trunk (resident)", p.trunk.bytes],
    ["embed + lm_head", p.tablesBytes],
    ["expert cache", p.expertCacheBytes],
    ["recurrent state", recurrent],
    ["buffers", bufferBytes(c, p.callTokens, p.layerCount)],
    ["KV cache", kv],
    ["process + index", p.baselineBytes + runtimeGrowthBytes],
  ] as const).map(([name, bytes]) => ({ name, bytes }));
  return { terms, totalBytes: terms.reduce((sum, t) => sum + t.bytes, 0) };
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

/** The KV preflight (runtime.md 3.3): a request whose MLA cache alone cannot fit is refused (exit 2). */
export function checkKvFits(plan: MemoryPlan, availableBytes: number | undefined, positions: number): void {
  const kv = plan.terms.find((t) => t.name === "KV cache")?.bytes ?? 0;
  if (availableBytes === undefined || kv <= 0.9 * availableBytes) return;
  throw usageError(
    `REFUSING: the KV cache needs ${formatBytes(kv)} for ${positions} positions (${formatBytes(kv / positions)} per position) ` +
      `but only ${formatBytes(availableBytes)} is available; ask for fewer tokens or a shorter prompt`,
  );
}
