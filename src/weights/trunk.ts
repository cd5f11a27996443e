/** What the forward pass asks of the trunk: a bound layer, in layer order, every pass. */
import type { LayerWeights } from "./types.ts";

export interface Trunk {
  readonly layerCount: number;
  /** The bound layer `layer`; valid until the next call to `layer`. */
  layer(layer: number): LayerWeights;
  close(): void;
}
