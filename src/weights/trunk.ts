/** What the forward pass asks of the trunk: a bound layer, in layer order, every pass. */
import type { LayerWeights } from "./types.ts";

export interface Trunk {
  readonly layerCount: number;
  /** The bound layer `layer`; valid until the next call to `layer`. */
  layer(layer: number): LayerWeights;
  close(): void;
}

/** A trunk read from a pack while it runs (plain or compressed), with its plan and its reads. */
export interface StreamingTrunk extends Trunk {
  readonly plan: RingPlan;
  readonly stats: TrunkStats;
}

/** What the streamed trunk executes: the pinned prefix and the ring, decided by the planner. */
export interface RingPlan {
  /** Layers 0 … pinned−1 are read once and kept. */
  pinned: number;
  /** Slots the other layers cycle through (0: every layer is pinned). */
  ringSlots: number;
  /** The ring's memory (arena and vectors); at least one slot of the largest unpinned layer. */
  ringBytes: number;
}

/** What a trunk read and decoded, and the time it took: the run report's streaming block. */
export interface TrunkStats {
  binds: number;
  hits: number;
  reads: number;
  bytesRead: number;
  /** Of `bytesRead`, what was read ahead while the previous layer computed. */
  aheadBytes: number;
  /** Device seconds of the reads, on whichever thread did them. */
  readSeconds: number;
  /** Seconds the forward pass spent waiting for reads. */
  waitSeconds: number;
  /** A compressed trunk's decoded bytes (what the kernels were given) and the seconds decoding took; 0 for a plain one. */
  bytesDecoded: number;
  codecSeconds: number;
}
