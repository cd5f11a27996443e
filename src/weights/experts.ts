/**
 * What the forward pass asks of the routed experts: announce a token's top-k for a layer, then
 * take them one by one in top-k order. An expert that could not be loaded comes back undefined;
 * the source has counted it, and the run will be reported invalid.
 */
import type { Routing } from "../native/kernels.ts";
import type { ExpertWeights } from "./types.ts";

export interface ExpertSource {
  /** How many experts one batch can hold (a larger union is loaded in waves of this many). */
  readonly waveCapacity: number;
  /**
   * A source that serves only some picks (the hybrid draft's cache-only routing) drops the
   * others here, before anything is computed: their weights become 0 and the kept ones are
   * renormalised. Sources that serve every pick have no such method; routing stays as routed.
   */
  restrict?(layer: number, routing: Routing, tokens: number, k: number): void;
  /** Records one token's routing picks, in top-k order (statistics and the trace). */
  pick(layer: number, experts: readonly number[]): void;
  /** Starts loading a batch of `layer`'s experts; they stay resident until the next batch. */
  prefetch(layer: number, experts: readonly number[]): void;
  get(layer: number, expert: number): ExpertWeights | undefined;
}
