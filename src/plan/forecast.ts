/**
 * How fast a token will be at a memory budget, from bytes and measured rates (issue 27): the
 * plan's byte census of one decode token (trunk re-read from disk, routed experts read from
 * disk, bytes the kernels touch in RAM) divided by what this machine measured (k3's own disk
 * reads, k3's own kernels, the memory read bandwidth, the FMA peak). `k3 doctor` prints it and
 * `k3 budget` prints its census; both call this file, so they cannot disagree.
 *
 * The expert assumption: routing spreads a token's picks evenly over the experts, so a cache of
 * S expert slots out of E serves S / E of the reads. On the released model that is 4.4% at
 * 64 GB, in line with the original's measurement of almost no reuse below ~36 GB; a model with
 * few experts (K3-width: 192) reuses far more. The range's upper end assumes no reuse at all.
 */
import { planTrunk } from "./trunk-plan.ts";
import type { TrunkLayerBytes } from "./token-bytes.ts";

/** Bytes per weight of MXFP4: a 4-bit code plus one 8-bit scale per 32 (model.md 5). */
export const mxfp4BytesPerWeight = 0.53125;
const bf16BytesPerWeight = 2;

/** The sizes a token's cost follows from: read from a checkpoint's headers or from the release's table. */
export interface ModelCensus {
  /** Where the sizes come from, as the report names it. */
  source: string;
  /** Per layer: its trunk bytes (everything but the routed experts). */
  trunkLayers: readonly TrunkLayerBytes[];
  /** The LM head: every row is read for every token. */
  lmHeadBytes: number;
  /** One routed expert (gate, up and down, MXFP4 with scales). */
  expertBytes: number;
  /** Routed experts in the model, over all layers. */
  routedExperts: number;
  /** Experts a token picks in each MoE layer (top-k). */
  expertsPerToken: number;
  moeLayers: number;
}

/** A budget as a run would be given it: the trunk resident, or streamed at a trunk budget. */
export interface ForecastBudget {
  label: string;
  /** Bytes for pinned layers plus the ring; undefined: the trunk is resident (no --trunk). */
  trunkBytes: number | undefined;
  cacheBytes: number;
}

/** Rates measured on this machine, bytes (or multiply-adds) per second. */
export interface MeasuredRates {
  /** k3's trunk reads (large sequential chunks in flight); undefined when the disk was not measured. */
  trunkDiskBytesPerSecond: number | undefined;
  /** Reads of one routed expert each, at the depth a layer's misses have in flight. */
  expertDiskBytesPerSecond: number | undefined;
  /** k3's bf16 matrix-vector product at T = 1, weight bytes per second. */
  bf16BytesPerSecond: number;
  /** k3's MXFP4 matrix-vector product at T = 1, weight bytes (codes and scales) per second. */
  mxfp4BytesPerSecond: number;
  /** Reading memory on every compute thread. */
  memoryBytesPerSecond: number;
  /** f64 fused multiply-adds per second on every compute thread (half the FLOP/s). */
  multiplyAddsPerSecond: number;
}

export interface TokenCensus {
  /** Trunk layers held in RAM (all of them when resident). */
  pinnedLayers: number;
  layers: number;
  /** Trunk bytes read from disk every token (the unpinned layers). */
  trunkDiskBytes: number;
  /** Expert slots the cache budget holds, at most every expert. */
  cacheSlots: number;
  /** The share of a token's expert picks the cache serves, under even routing. */
  expertHitShare: number;
  /** Routed experts a token picks (top-k in every MoE layer). */
  expertPicks: number;
  /** Expert bytes read from disk a token: expected, and with no reuse at all. */
  expertDiskBytes: number;
  expertDiskBytesNoReuse: number;
  /** Bytes the kernels read in RAM a token: the whole trunk, the LM head, the picked experts. */
  ramBytes: number;
  /** Of `ramBytes`, what the bf16 kernels read and what the MXFP4 ones read. */
  bf16Bytes: number;
  mxfp4Bytes: number;
  /** One multiply-add per weight read. */
  multiplyAdds: number;
}

const sum = (values: readonly number[]) => values.reduce((a, b) => a + b, 0);

/** What one decode token moves at `budget`. */
export function tokenCensus(model: ModelCensus, budget: ForecastBudget): TokenCensus {
  const costs = model.trunkLayers.map((l) => l.bytes);
  const pinned = budget.trunkBytes === undefined ? costs.length : planTrunk(costs, budget.trunkBytes).pinned;
  const trunkBytes = sum(costs);
  const cacheSlots = Math.min(model.routedExperts, Math.floor(budget.cacheBytes / model.expertBytes));
  const expertHitShare = model.routedExperts > 0 ? cacheSlots / model.routedExperts : 0;
  const expertPicks = model.expertsPerToken * model.moeLayers;
  const pickedBytes = expertPicks * model.expertBytes;
  const bf16Bytes = trunkBytes + model.lmHeadBytes;
  return {
    pinnedLayers: pinned, layers: costs.length, trunkDiskBytes: sum(costs.slice(pinned)),
    cacheSlots, expertHitShare, expertPicks,
    expertDiskBytes: pickedBytes * (1 - expertHitShare), expertDiskBytesNoReuse: pickedBytes,
    ramBytes: bf16Bytes + pickedBytes, bf16Bytes, mxfp4Bytes: pickedBytes,
    multiplyAdds: bf16Bytes / bf16BytesPerWeight + pickedBytes / mxfp4BytesPerWeight,
  };
}

export type Limit = "trunk reads from disk" | "expert reads from disk" | "the kernels in RAM";

export interface Forecast {
  budget: ForecastBudget;
  census: TokenCensus;
  /** Each term of a token, in seconds (undefined: the disk was not measured). */
  trunkDiskSeconds: number | undefined;
  expertDiskSeconds: number | undefined;
  expertDiskSecondsNoReuse: number | undefined;
  /** k3's kernels over the bytes they read, at the rates measured. */
  kernelSeconds: number;
  /** The floors under `kernelSeconds`: the RAM bytes at the memory bandwidth, the weights at the FMA peak. */
  memoryFloorSeconds: number;
  computeFloorSeconds: number;
  /**
   * Expected s/token: the trunk streams behind the compute (the ring reads the next layer while
   * this one runs); expert misses are read after routing picks them and the layer waits for
   * them, so they add (measured on K3-width: a token's ~20 misses cost about their disk time).
   */
  expectedSeconds: number | undefined;
  /** Everything overlapped, the kernels at their floors, at the expected reuse; nothing overlapped and no expert reuse. */
  lowSeconds: number | undefined;
  highSeconds: number | undefined;
  /** The largest term of the expected figure. */
  binds: Limit | undefined;
}

/** The forecast of one budget; the disk terms need the disk's rates (a resident run with every expert cached does not). */
export function forecast(model: ModelCensus, budget: ForecastBudget, rates: MeasuredRates): Forecast {
  return forecastOf(budget, tokenCensus(model, budget), rates);
}

/** `forecast` from a census already taken (the doctor picks the expert reads' disk rate from it first). */
export function forecastOf(budget: ForecastBudget, census: TokenCensus, rates: MeasuredRates): Forecast {
  const kernelSeconds = census.bf16Bytes / rates.bf16BytesPerSecond + census.mxfp4Bytes / rates.mxfp4BytesPerSecond;
  const memoryFloorSeconds = census.ramBytes / rates.memoryBytesPerSecond;
  const computeFloorSeconds = census.multiplyAdds / rates.multiplyAddsPerSecond;
  const inRam = Math.max(kernelSeconds, memoryFloorSeconds, computeFloorSeconds);
  const disk = (bytes: number, rate: number | undefined) => (bytes === 0 ? 0 : rate === undefined ? undefined : bytes / rate);
  const trunkDiskSeconds = disk(census.trunkDiskBytes, rates.trunkDiskBytesPerSecond);
  const expertDiskSeconds = disk(census.expertDiskBytes, rates.expertDiskBytesPerSecond);
  const expertDiskSecondsNoReuse = disk(census.expertDiskBytesNoReuse, rates.expertDiskBytesPerSecond);
  const known = trunkDiskSeconds !== undefined && expertDiskSeconds !== undefined;
  let binds: Limit | undefined;
  if (known) {
    const terms: [Limit, number][] = [["trunk reads from disk", trunkDiskSeconds], ["expert reads from disk", expertDiskSeconds], ["the kernels in RAM", inRam]];
    binds = terms.reduce((a, b) => (b[1] > a[1] ? b : a))[0];
  }
  return {
    budget, census, trunkDiskSeconds, expertDiskSeconds, expertDiskSecondsNoReuse, kernelSeconds, memoryFloorSeconds, computeFloorSeconds,
    expectedSeconds: known ? Math.max(trunkDiskSeconds, inRam) + expertDiskSeconds : undefined,
    lowSeconds: known ? Math.max(trunkDiskSeconds + expertDiskSeconds, memoryFloorSeconds, computeFloorSeconds) : undefined,
    highSeconds: known && expertDiskSecondsNoReuse !== undefined ? trunkDiskSeconds + expertDiskSecondsNoReuse + inRam : undefined,
    binds,
  };
}

/** How many of a layer's expert reads are in flight together: its expected misses (at least one). */
export function expertReadsInFlight(model: ModelCensus, census: TokenCensus): number {
  return Math.max(1, Math.round(model.expertsPerToken * (1 - census.expertHitShare)));
}
