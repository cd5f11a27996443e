/**
 * Presence and frequency penalties (OpenAI's definition): an id generated c > 0 times loses
 * c * frequency + presence from its logit. They read only what this run generated, which a
 * sampler learns through `accept`, never the prompt.
 */
export class TokenCounts {
  private readonly counts = new Map<number, number>();

  add(token: number): void {
    this.counts.set(token, (this.counts.get(token) ?? 0) + 1);
  }

  get entries(): ReadonlyMap<number, number> {
    return this.counts;
  }
}

export interface Penalties {
  readonly presencePenalty: number;
  readonly frequencyPenalty: number;
}

/** Lowers `scores` (logits as f64) in place for every counted id. */
export function applyPenalties(scores: Float64Array, counts: ReadonlyMap<number, number>, penalties: Penalties): void {
  const { presencePenalty, frequencyPenalty } = penalties;
  if (presencePenalty === 0 && frequencyPenalty === 0) return;
  for (const [id, count] of counts) {
    if (id >= 0 && id < scores.length && count > 0) scores[id] = (scores[id] as number) - (count * frequencyPenalty + presencePenalty);
  }
}
