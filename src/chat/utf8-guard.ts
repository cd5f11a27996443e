/**
 * Keeps a grammar's text valid UTF-8 (RFC 3629). XGrammar checks the bytes of a string by their
 * pattern only: measured on the Kimi vocabulary, it lets a lead byte C0, C1 or F5-F7 through,
 * and overlong, surrogate and above-U+10FFFF sequences after E0, ED, F0 and F4. The guard narrows
 * its mask: at a character boundary to the ids whose bytes are valid UTF-8 so far (a table made
 * once per tokenizer), in the middle of a character to the ids that continue it correctly.
 */
import { maskHas, type TokenMask } from "../decode/constraint.ts";
import type { Tokenizer } from "../tokenizer/index.ts";

/** Continuation bytes still needed, and the range the next one must fall in. */
interface Utf8State {
  need: number;
  lo: number;
  hi: number;
}

const boundary = (): Utf8State => ({ need: 0, lo: 0x80, hi: 0xbf });

/** Advances `s` over `bytes`; false at the first byte no valid UTF-8 has there. */
function advance(s: Utf8State, bytes: Uint8Array): boolean {
  for (const b of bytes) {
    if (s.need > 0) {
      if (b < s.lo || b > s.hi) return false;
      s.need--;
      s.lo = 0x80;
      s.hi = 0xbf;
      continue;
    }
    if (b < 0x80) continue;
    if (b >= 0xc2 && b <= 0xdf) s.need = 1;
    else if (b === 0xe0) Object.assign(s, { need: 2, lo: 0xa0 });
    else if (b === 0xed) Object.assign(s, { need: 2, hi: 0x9f });
    else if (b >= 0xe1 && b <= 0xef) s.need = 2;
    else if (b === 0xf0) Object.assign(s, { need: 3, lo: 0x90 });
    else if (b === 0xf4) Object.assign(s, { need: 3, hi: 0x8f });
    else if (b >= 0xf1 && b <= 0xf3) s.need = 3;
    else return false;
  }
  return true;
}

const boundaryMasks = new WeakMap<Tokenizer, TokenMask>();

/** Ordinary ids whose bytes, from a character boundary, are valid UTF-8 (possibly ending mid-character). */
function validFromBoundary(tokenizer: Tokenizer): TokenMask {
  let mask = boundaryMasks.get(tokenizer);
  if (!mask) {
    mask = new Int32Array((tokenizer.vocabSize + 31) >>> 5);
    for (let id = 0; id < tokenizer.rankCount; id++) {
      if (advance(boundary(), tokenizer.tokenBytes(id))) mask[id >>> 5] = (mask[id >>> 5] as number) | (1 << (id & 31));
    }
    boundaryMasks.set(tokenizer, mask);
  }
  return mask;
}

export class Utf8Guard {
  readonly #tokenizer: Tokenizer;
  readonly #valid: TokenMask;
  #state = boundary();

  constructor(tokenizer: Tokenizer) {
    this.#tokenizer = tokenizer;
    this.#valid = validFromBoundary(tokenizer);
  }

  /** `mask` (a copy) without the ordinary ids that would make the text invalid UTF-8; control ids are left as they are. */
  restrict(mask: TokenMask): TokenMask {
    const out = mask.slice();
    const ranks = this.#tokenizer.rankCount;
    if (this.#state.need === 0) {
      const full = ranks >>> 5;
      for (let w = 0; w < full; w++) out[w] = (out[w] as number) & (this.#valid[w] as number);
      for (let id = full << 5; id < ranks; id++) if (maskHas(out, id) && !maskHas(this.#valid, id)) out[id >>> 5] = (out[id >>> 5] as number) & ~(1 << (id & 31));
      return out;
    }
    for (let w = 0; w < out.length; w++) {
      let bits = out[w] as number;
      while (bits !== 0) {
        const id = (w << 5) + (31 - Math.clz32(bits & -bits));
        bits &= bits - 1;
        if (id < ranks && !advance({ ...this.#state }, this.#tokenizer.tokenBytes(id))) out[w] = (out[w] as number) & ~(1 << (id & 31));
      }
    }
    return out;
  }

  advance(id: number): void {
    if (id < this.#tokenizer.rankCount) advance(this.#state, this.#tokenizer.tokenBytes(id));
  }
}
