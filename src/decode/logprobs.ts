/**
 * Log-probabilities of the ids a run emitted (chat.md 4.8), from the distribution each was drawn
 * from: the row as the sampler saw it (a constraint's mask already applied), with temperature,
 * penalties, top-k, top-p and min-p (sampling.ts). Ids outside what could be drawn have no entry.
 * At temperature 0 greedy draws nothing, so the distribution reported is the row's softmax at
 * temperature 1 over the allowed ids: the one greedy takes the most probable id of. An id a
 * constraint forced had one possible value: log-probability 0, and itself as its only
 * alternative. Natural logarithms, f64, as OpenAI reports them.
 */
import { TokenCounts } from "./penalties.ts";
import { samplingDistribution } from "./sampling.ts";
import type { SamplingOptions } from "./sampling-options.ts";

/** OpenAI's most alternatives per id (`top_logprobs`). */
export const maxTopLogprobs = 20;

export interface TokenLogprob {
  readonly id: number;
  readonly logprob: number;
  /** The most probable ids of the same distribution, most likely first (ties to the lower id). */
  readonly top: readonly { readonly id: number; readonly logprob: number }[];
}

/** The `top` most probable of `weights` (unnormalised), as (id, weight) most likely first, lower id on ties. */
function largest(weights: Float64Array, top: number): { id: number; w: number }[] {
  const out: { id: number; w: number }[] = [];
  if (top <= 0) return out;
  for (let id = 0; id < weights.length; id++) {
    const w = weights[id] as number;
    if (!(w > 0)) continue;
    if (out.length === top && w <= (out[top - 1] as { w: number }).w) continue;
    let at = out.length;
    while (at > 0 && (out[at - 1] as { w: number }).w < w) at--;
    out.splice(at, 0, { id, w });
    if (out.length > top) out.pop();
  }
  return out;
}

/** Computes each emitted id's entry; told every id, as a sampler is, for the penalties. */
export class LogprobRecorder {
  readonly #options: SamplingOptions;
  readonly #top: number;
  readonly #counts = new TokenCounts();

  constructor(options: SamplingOptions, top: number) {
    this.#options = options;
    this.#top = Math.max(0, Math.min(maxTopLogprobs, top));
  }

  /** The entry of `id` chosen from `row` (undefined: forced), then counted. */
  record(id: number, row: Float32Array | undefined): TokenLogprob {
    const entry = row === undefined ? { id, logprob: 0, top: this.#top > 0 ? [{ id, logprob: 0 }] : [] } : this.#entry(id, row);
    this.#counts.add(id);
    return entry;
  }

  #entry(id: number, row: Float32Array): TokenLogprob {
    if (this.#options.temperature === 0) return this.#softmax(id, row);
    const { ids, probs } = samplingDistribution(row, this.#options, this.#counts.entries);
    let logprob = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < ids.length; i++) if (ids[i] === id) logprob = Math.log(probs[i] as number);
    const top = Array.from({ length: Math.min(this.#top, ids.length) }, (_, i) => ({ id: ids[i] as number, logprob: Math.log(probs[i] as number) }));
    return { id, logprob, top };
  }

  /** Temperature 1 over the row's finite logits, in f64 with the maximum subtracted. */
  #softmax(id: number, row: Float32Array): TokenLogprob {
    let max = Number.NEGATIVE_INFINITY;
    for (let i = 0; i < row.length; i++) {
      const v = row[i] as number;
      if (v > max) max = v;
    }
    const weights = new Float64Array(row.length);
    let total = 0;
    for (let i = 0; i < row.length; i++) {
      const v = row[i] as number;
      const w = v === max ? 1 : Number.isFinite(v) ? Math.exp(v - max) : 0;
      weights[i] = w;
      total += w;
    }
    const log = (w: number) => (w > 0 ? Math.log(w / total) : Number.NEGATIVE_INFINITY);
    return { id, logprob: log(weights[id] ?? 0), top: largest(weights, this.#top).map((e) => ({ id: e.id, logprob: log(e.w) })) };
  }
}
