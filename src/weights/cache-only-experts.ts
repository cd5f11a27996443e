/**
 * Cache-only routing for the hybrid draft (runtime.md 9.3): the draft's router picks its top-k,
 * only the experts already resident in the exact model's cache are kept, and their combining
 * weights are renormalised to what the whole top-k summed to (1 before ρ when the router
 * renormalises). Nothing is ever read from disk for a draft token: a pick that is not resident
 * is skipped, which is not a drop; with none resident the shared experts alone contribute. The
 * cache is only looked at (`peek`): its contents, use order and statistics stay the exact
 * model's alone.
 */
import type { Routing } from "../native/kernels.ts";
import type { ExpertCache } from "./expert-cache.ts";
import type { ExpertSource } from "./experts.ts";
import type { ExpertWeights } from "./types.ts";

export interface DraftExpertStats {
  /** Routing picks of the draft (top-k for every token of every MoE layer). */
  picks: number;
  /** Picks served from the cache. */
  served: number;
  /** Picks skipped because the expert was not resident (never read, never a drop). */
  skipped: number;
  /** Tokens and layers where no pick was resident: only the shared experts contributed. */
  sharedOnly: number;
}

export const emptyDraftStats = (): DraftExpertStats => ({ picks: 0, served: 0, skipped: 0, sharedOnly: 0 });

export class CacheOnlyExperts implements ExpertSource {
  readonly #cache: ExpertCache;
  readonly stats: DraftExpertStats = emptyDraftStats();

  constructor(cache: ExpertCache) {
    this.#cache = cache;
  }

  /** Nothing is loaded, so nothing needs waves: a call's whole union is one batch. */
  get waveCapacity(): number {
    return Number.MAX_SAFE_INTEGER;
  }

  restrict(layer: number, routing: Routing, tokens: number, k: number): void {
    const { experts, weights } = routing;
    for (let t = 0; t < tokens; t++) {
      let all = 0;
      let kept = 0;
      let served = 0;
      for (let j = t * k; j < (t + 1) * k; j++) {
        const w = weights[j] as number;
        all += w; // f64, in top-k order
        if (this.#cache.peek(layer, experts[j] as number)) {
          kept += w;
          served++;
        } else {
          weights[j] = 0;
        }
      }
      this.stats.picks += k;
      this.stats.served += served;
      this.stats.skipped += k - served;
      if (served === 0) this.stats.sharedOnly++;
      if (served === k || kept === 0) continue;
      const scale = all / kept;
      for (let j = t * k; j < (t + 1) * k; j++) weights[j] = Math.fround((weights[j] as number) * scale);
    }
  }

  pick(): void {
    // The draft's picks are counted in `restrict`; the trace records the exact model's alone.
  }

  prefetch(): void {
    // Cache-only: nothing is ever loaded for a draft token.
  }

  get(layer: number, expert: number): ExpertWeights | undefined {
    return this.#cache.peek(layer, expert);
  }
}
