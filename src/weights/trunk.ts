/** What the forward pass asks of the trunk: a bound layer, in layer order, every pass. */
import type { RingPlan, TrunkStats } from "./streamed-trunk.ts";
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
