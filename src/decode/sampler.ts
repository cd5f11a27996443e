/**
 * Choosing the next token from a row of logits. Sampling only reads the logits, so whatever a
 * sampler does, the forward pass (and with it greedy decoding) is untouched.
 */
export interface Sampler {
  /** The id to emit for this row of logits. */
  choose(logits: Float32Array): number;
  /**
   * Told every id the run emits, after it is chosen: samplers whose choice depends on what was
   * generated (presence and frequency penalties) keep their history here. Greedy has none.
   */
  accept?(token: number): void;
}

/** Arg-max with ties to the lowest id (model.md 6.13). NaN never wins. */
export function argmax(logits: Float32Array): number {
  let best = 0;
  let bestValue = -Infinity;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i] as number;
    if (v > bestValue) {
      bestValue = v;
      best = i;
    }
  }
  return best;
}

export const greedy: Sampler = { choose: argmax };
