/**
 * Seeded sampling (chat.md 3.4 rule 2). The order is fixed because it defines what a seed
 * reproduces:
 *
 *   logits -> presence/frequency penalties -> divide by temperature -> softmax in f64 with the
 *   maximum subtracted -> sort by probability descending, ties by lower id -> top-k -> top-p ->
 *   min-p -> renormalise -> one uniform draw over the survivors in that order.
 *
 * top-p keeps the smallest prefix whose share of the mass left after top-k reaches top_p (at
 * least one id), so top-k first then top-p is not the same as the other way round. min-p drops
 * ids whose probability is below min_p times the most likely survivor's. Temperature 0 is greedy
 * and never reaches this file's arithmetic.
 */
import { applyPenalties, TokenCounts } from "./penalties.ts";
import { orderByProbability } from "./probability-order.ts";
import { SplitMix64, type UniformSource } from "./rng.ts";
import { argmax, greedy, type Sampler } from "./sampler.ts";
import { type SamplingOptions, validateSampling } from "./sampling-options.ts";

/** The ids that can be drawn, most likely first, with probabilities that sum to 1. */
export interface Candidates {
  readonly ids: Uint32Array;
  readonly probs: Float64Array;
}

/**
 * The distribution one draw would sample from, given the ids generated so far (for penalties).
 * It consumes no randomness, so it can also serve checks and speculative acceptance.
 */
export function samplingDistribution(
  logits: Float32Array,
  options: SamplingOptions,
  counts: ReadonlyMap<number, number> = new Map(),
): Candidates {
  if (options.temperature === 0) return pointMass(argmax(logits));
  const scores = new Float64Array(logits.length);
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i] as number;
    scores[i] = Number.isNaN(v) ? -Infinity : v; // NaN never wins, as in argmax
  }
  applyPenalties(scores, counts, options);
  let max = -Infinity;
  for (let i = 0; i < scores.length; i++) {
    scores[i] = (scores[i] as number) / options.temperature;
    if ((scores[i] as number) > max) max = scores[i] as number;
  }
  if (max === -Infinity) return pointMass(argmax(logits));

  // Comparing with the maximum first keeps exp(inf - inf) out: an infinite logit gets weight 1.
  const weights = scores;
  let total = 0;
  for (let i = 0; i < weights.length; i++) {
    const z = weights[i] as number;
    weights[i] = z === max ? 1 : Math.exp(z - max);
    total += weights[i] as number;
  }
  let live = 0;
  for (let i = 0; i < weights.length; i++) {
    weights[i] = (weights[i] as number) / total;
    if ((weights[i] as number) > 0) live++;
  }
  const probs = weights;
  // Ids of probability 0 would sort last and can never be drawn: leaving them out changes nothing.
  const positive = new Uint32Array(live);
  for (let i = 0, at = 0; i < probs.length; i++) if ((probs[i] as number) > 0) positive[at++] = i;
  const order = orderByProbability(probs, positive);

  let kept = order.length;
  if (options.topK > 0 && options.topK < kept) kept = options.topK;
  if (options.topP < 1) kept = nucleus(order, probs, kept, options.topP);
  if (options.minP > 0) {
    const floor = options.minP * (probs[order[0] as number] as number);
    let end = 1;
    while (end < kept && (probs[order[end] as number] as number) >= floor) end++;
    kept = end;
  }

  const ids = order.slice(0, kept);
  const out = new Float64Array(kept);
  let mass = 0;
  for (let i = 0; i < kept; i++) mass += probs[ids[i] as number] as number;
  for (let i = 0; i < kept; i++) out[i] = (probs[ids[i] as number] as number) / mass;
  return { ids, probs: out };
}

/** Length of the smallest prefix of the first `kept` ids whose share of their mass reaches topP. */
function nucleus(order: Uint32Array, probs: Float64Array, kept: number, topP: number): number {
  let mass = 0;
  for (let i = 0; i < kept; i++) mass += probs[order[i] as number] as number;
  const target = topP * mass;
  let sum = 0;
  for (let i = 0; i < kept; i++) {
    sum += probs[order[i] as number] as number;
    if (sum >= target) return i + 1;
  }
  return kept;
}

function pointMass(id: number): Candidates {
  return { ids: Uint32Array.of(id), probs: Float64Array.of(1) };
}

/** The candidate a uniform `u` in [0, 1) picks: the first whose running sum passes u. */
export function drawFrom(candidates: Candidates, u: number): number {
  const { ids, probs } = candidates;
  let sum = 0;
  for (let i = 0; i < ids.length; i++) {
    sum += probs[i] as number;
    if (u < sum) return ids[i] as number;
  }
  // Rounding can leave the sum a hair under 1; u landed in that sliver, which belongs to the last.
  return ids[ids.length - 1] as number;
}

/**
 * A sampler for `options`. Temperature 0 returns `greedy` itself, so the reference path is the
 * same object, bit for bit, and draws nothing. Otherwise every `choose` makes exactly one draw
 * from `random` (by default SplitMix64 seeded with options.seed), whatever the logits.
 */
export function createSampler(options: SamplingOptions, random?: UniformSource): Sampler {
  validateSampling(options); // callers check with their own naming first; this keeps NaN out regardless
  if (options.temperature === 0) return greedy;
  const source = random ?? new SplitMix64(options.seed);
  const counts = new TokenCounts();
  return {
    choose: (logits) => drawFrom(samplingDistribution(logits, options, counts.entries), source.nextUniform()),
    accept: (token) => counts.add(token),
  };
}
