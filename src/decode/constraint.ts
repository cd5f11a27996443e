/**
 * A constraint on the ids a row may emit (chat.md 4.8): a mask applied to the logits the row's
 * sampler draws from, never to the forward pass. The decode loop asks it for the mask before each
 * choice, tells it every id emitted, and feeds the ids it forces (each the only id its mask
 * allows) without sampling, in one forward call. Without a constraint the loop is unchanged, id
 * for id. What a constraint means (a JSON schema, the K3 reply structure) is decided above decode/.
 */

/** Bit `id & 31` of word `id >> 5` set: `id` may come next. XGrammar's bitmask layout. */
export type TokenMask = Int32Array;

export interface Constraint {
  /** The ids allowed next, or undefined when any id may come (nothing to mask at this point). */
  allowed(): Promise<TokenMask | undefined>;
  /** Told each id the row emitted, chosen or forced, in order. */
  accept(id: number): void;
  /**
   * The ids that must come next, at most `limit`, stopping before a stop id; each is accepted as
   * it is taken, so the caller must emit them all (or end the run).
   */
  takeForced(limit: number): Promise<number[]>;
}

export function maskWords(vocabSize: number): number {
  return (vocabSize + 31) >>> 5;
}

export function maskHas(mask: TokenMask, id: number): boolean {
  return ((mask[id >>> 5] as number) >>> (id & 31) & 1) === 1;
}

export function maskSet(mask: TokenMask, id: number): void {
  mask[id >>> 5] = (mask[id >>> 5] as number) | (1 << (id & 31));
}

/** A mask allowing exactly `ids`. */
export function maskOf(vocabSize: number, ids: Iterable<number>): TokenMask {
  const mask = new Int32Array(maskWords(vocabSize));
  for (const id of ids) maskSet(mask, id);
  return mask;
}

/** How many ids the mask allows below `vocabSize`, and the first of them (-1 when none). */
export function maskCount(mask: TokenMask, vocabSize: number): { count: number; first: number } {
  let count = 0;
  let first = -1;
  const words = Math.min(mask.length, maskWords(vocabSize));
  for (let w = 0; w < words; w++) {
    let bits = mask[w] as number;
    if (w === words - 1 && (vocabSize & 31) !== 0) bits &= (1 << (vocabSize & 31)) - 1;
    if (bits === 0) continue;
    if (first < 0) first = (w << 5) + (31 - Math.clz32(bits & -bits));
    while (bits !== 0) {
      bits &= bits - 1;
      count++;
    }
  }
  return { count, first };
}

/**
 * The logits with every disallowed id at -Infinity: the sampler's rules (chat.md 3.4) then run over
 * the allowed ids alone, and greedy is the argmax of the allowed ids (lowest id on ties).
 */
export function maskLogits(logits: Float32Array, mask: TokenMask): Float32Array {
  const out = new Float32Array(logits.length);
  out.fill(Number.NEGATIVE_INFINITY);
  const words = Math.min(mask.length, maskWords(logits.length));
  for (let w = 0; w < words; w++) {
    let bits = mask[w] as number;
    while (bits !== 0) {
      const id = (w << 5) + (31 - Math.clz32(bits & -bits));
      if (id < logits.length) out[id] = logits[id] as number;
      bits &= bits - 1;
    }
  }
  return out;
}
