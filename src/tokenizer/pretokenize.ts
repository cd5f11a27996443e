/**
 * Pre-tokenisation: the released split pattern (runtime.md 10.2, text in `pattern.ts`) applied to
 * UTF-8 bytes by a hand-written matcher.
 *
 * Why by hand and not with the `v`-flag RegExp (which JavaScriptCore does support): prompts are
 * bytes, read verbatim, and may hold invalid UTF-8; a RegExp needs a string, and the pieces must
 * come back as byte ranges for BPE. Matching the decoded units directly avoids a UTF-16 copy and
 * an index translation per piece. The tests run the RegExp beside this matcher as an oracle.
 *
 * The matcher replays the regex engine's leftmost-first backtracking order: at each position the
 * eight alternatives are tried in order, and inside one alternative the optional prefix is tried
 * taken before skipped, greedy runs before their give-backs.
 *
 * Invalid UTF-8 (the spec's rule for the C matcher): a byte that does not start a valid sequence
 * is a one-byte unit of its own. It has no letter, number or space class, exactly like U+FFFD,
 * so it splits the way tiktoken splits text decoded with one U+FFFD per such byte; the raw byte
 * is kept, so decoding gives the input back byte for byte.
 */
import { CODE_POINT_CLASS, CRLF, HAN, LETTER, LOWERISH, NUMBER, SPACE, UPPERISH } from "./unicode-classes.ts";

/** `[^\r\n\p{L}\p{N}]`: the optional one-unit prefix of the two letter alternatives. */
const NOT_PREFIX = CRLF | LETTER | NUMBER;
/** `[^\s\p{L}\p{N}]`: the punctuation run. */
const NOT_PUNCT = SPACE | LETTER | NUMBER;
const APOSTROPHE = 0x27;
/** `folded` value of a unit that is not ASCII (nor U+017F): equal to no character tested. */
const NOT_ASCII = 0;
/** U+017F LATIN SMALL LETTER LONG S, which Unicode case folding equates with `s`. */
const LONG_S_LEAD = 0xc5;
const LONG_S_TRAIL = 0xbf;

/** Piece boundaries as byte offsets: piece i is `[bounds[i], bounds[i + 1])`. */
export interface Pieces {
  readonly bounds: Int32Array;
  readonly count: number;
}

/**
 * Splits byte ranges into pieces. Holds scratch arrays that grow to the longest segment seen, so
 * one instance serves a whole encode without allocating per call; not safe to share across
 * concurrent callers (there are none: JavaScript runs one encode at a time).
 */
export class PreTokenizer {
  private units = new Uint8Array(0);
  /**
   * Per unit, the ASCII character with letters folded to lower case, U+017F folded to `s`, and
   * anything else NOT_ASCII: all the matcher needs beyond classes (a space, an apostrophe and the
   * case-insensitive contraction letters), in one byte instead of a code point.
   */
  private folded = new Uint8Array(0);
  private unitStart = new Int32Array(0);
  private bounds = new Int32Array(0);

  /** The pieces of `bytes[start, end)`; the returned arrays are reused by the next call. */
  split(bytes: Uint8Array, start: number, end: number): Pieces {
    const unitCount = this.decode(bytes, start, end);
    if (this.bounds.length < unitCount + 1) this.bounds = new Int32Array(unitCount + 1);
    const classes = this.units;
    const folded = this.folded;
    const unitStart = this.unitStart;
    const bounds = this.bounds;
    let count = 0;
    let i = 0;
    while (i < unitCount) {
      const matchEnd = matchAt(classes, folded, i, unitCount);
      // Every unit starts some alternative (Han, an upper- or lower-ish letter or mark, a number,
      // punctuation, or a space), so the pieces tile the input; a gap would silently drop bytes.
      if (matchEnd <= i) throw new Error(`pre-tokenizer invariant broken: no piece starts at byte ${unitStart[i]}`);
      bounds[count++] = unitStart[i] as number;
      i = matchEnd;
      bounds[count] = unitStart[i] as number;
    }
    return { bounds, count };
  }

  /** Decodes UTF-8 into units (class, folded character, first byte); returns the unit count. */
  private decode(bytes: Uint8Array, start: number, end: number): number {
    const length = end - start;
    if (this.units.length < length) {
      const capacity = Math.max(length, this.units.length * 2, 64);
      this.units = new Uint8Array(capacity);
      this.folded = new Uint8Array(capacity);
      this.unitStart = new Int32Array(capacity + 1);
    }
    const classes = this.units;
    const folded = this.folded;
    const unitStart = this.unitStart;
    let n = 0;
    let p = start;
    while (p < end) {
      const b0 = bytes[p] as number;
      unitStart[n] = p;
      if (b0 < 0x80) {
        classes[n] = CODE_POINT_CLASS[b0] as number;
        folded[n] = b0 >= 0x41 && b0 <= 0x5a ? b0 | 0x20 : b0;
        n++;
        p++;
        continue;
      }
      const length = sequenceLength(bytes, p, end, b0);
      if (length === 0) {
        classes[n] = 0;
        folded[n] = NOT_ASCII;
        n++;
        p++;
        continue;
      }
      let codePoint: number;
      if (length === 2) codePoint = ((b0 & 0x1f) << 6) | ((bytes[p + 1] as number) & 0x3f);
      else if (length === 3) {
        codePoint = ((b0 & 0x0f) << 12) | (((bytes[p + 1] as number) & 0x3f) << 6) | ((bytes[p + 2] as number) & 0x3f);
      } else {
        codePoint = ((b0 & 0x07) << 18) | (((bytes[p + 1] as number) & 0x3f) << 12) |
          (((bytes[p + 2] as number) & 0x3f) << 6) | ((bytes[p + 3] as number) & 0x3f);
      }
      classes[n] = CODE_POINT_CLASS[codePoint] as number;
      folded[n] = b0 === LONG_S_LEAD && bytes[p + 1] === LONG_S_TRAIL ? 0x73 : NOT_ASCII;
      n++;
      p += length;
    }
    unitStart[n] = end;
    return n;
  }
}

/**
 * Length of the well-formed UTF-8 sequence starting at `p` (Unicode table 3-7: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 when the lead byte does not start one.
 */
function sequenceLength(bytes: Uint8Array, p: number, end: number, b0: number): number {
  if (b0 < 0xc2 || b0 > 0xf4) return 0;
  const b1 = p + 1 < end ? (bytes[p + 1] as number) : -1;
  if (b0 < 0xe0) return b1 >= 0x80 && b1 <= 0xbf ? 2 : 0;
  let low = 0x80;
  let high = 0xbf;
  if (b0 === 0xe0) low = 0xa0;
  else if (b0 === 0xed) high = 0x9f;
  else if (b0 === 0xf0) low = 0x90;
  else if (b0 === 0xf4) high = 0x8f;
  if (b1 < low || b1 > high) return 0;
  const b2 = p + 2 < end ? (bytes[p + 2] as number) : -1;
  if (b2 < 0x80 || b2 > 0xbf) return 0;
  if (b0 < 0xf0) return 3;
  const b3 = p + 3 < end ? (bytes[p + 3] as number) : -1;
  return b3 >= 0x80 && b3 <= 0xbf ? 4 : 0;
}

/** End (unit index) of the match starting at unit `i`, or -1 if no alternative matches there (see `split`). */
function matchAt(classes: Uint8Array, folded: Uint8Array, i: number, n: number): number {
  const first = classes[i] as number;

  // 1. [\p{Han}]+
  if (first & HAN) {
    let k = i + 1;
    while (k < n && (classes[k] as number) & HAN) k++;
    return k;
  }

  // 2. P? U* W+ C?  and  3. P? U+ W* C?  (P prefix, U upper-ish run, W lower-ish run,
  // C contraction). Only worth trying when some unit here can start a letter run.
  const canPrefix = (first & NOT_PREFIX) === 0;
  if (first & (UPPERISH | LOWERISH) || (canPrefix && i + 1 < n && (classes[i + 1] as number) & (UPPERISH | LOWERISH))) {
    const lower = lowerFirst(classes, folded, i, n, canPrefix);
    if (lower >= 0) return lower;
    const upper = upperFirst(classes, folded, i, n, canPrefix);
    if (upper >= 0) return upper;
  }

  // 4. \p{N}{1,3}
  if (first & NUMBER) {
    let k = i + 1;
    while (k < n && k < i + 3 && (classes[k] as number) & NUMBER) k++;
    return k;
  }

  // 5. " ?[^\s\p{L}\p{N}]+[\r\n]*": the space is taken only if punctuation follows it (a space
  // is not punctuation, so skipping it cannot help).
  let punct = -1;
  if (folded[i] === 0x20) {
    if (i + 1 < n && ((classes[i + 1] as number) & NOT_PUNCT) === 0) punct = i + 1;
  } else if ((first & NOT_PUNCT) === 0) punct = i;
  if (punct >= 0) {
    let k = punct + 1;
    while (k < n && ((classes[k] as number) & NOT_PUNCT) === 0) k++;
    while (k < n && (classes[k] as number) & CRLF) k++;
    return k;
  }

  if (first & SPACE) {
    let spaceEnd = i + 1;
    while (spaceEnd < n && (classes[spaceEnd] as number) & SPACE) spaceEnd++;
    // 6. \s*[\r\n]+: \s* gives back until [\r\n]+ can start, i.e. at the run's last CR/LF; the
    // units after it are not CR/LF, so the match ends right after it.
    for (let k = spaceEnd - 1; k >= i; k--) {
      if ((classes[k] as number) & CRLF) return k + 1;
    }
    // 7. \s+(?!\S): the whole run at the end of the segment, else all but the last space (which
    // is followed by a space, not \S) when that leaves at least one.
    if (spaceEnd === n) return n;
    if (spaceEnd - 1 > i) return spaceEnd - 1;
    // 8. \s+
    return spaceEnd;
  }
  return -1;
}

/** Alternative 2, `P? U* W+ C?`: the prefix taken first, then skipped. */
function lowerFirst(classes: Uint8Array, folded: Uint8Array, i: number, n: number, canPrefix: boolean): number {
  for (let pass = canPrefix ? 0 : 1; pass < 2; pass++) {
    const j = pass === 0 ? i + 1 : i;
    let upperEnd = j;
    while (upperEnd < n && (classes[upperEnd] as number) & UPPERISH) upperEnd++;
    let lowerEnd: number;
    if (upperEnd < n && (classes[upperEnd] as number) & LOWERISH) {
      lowerEnd = upperEnd + 1;
      while (lowerEnd < n && (classes[lowerEnd] as number) & LOWERISH) lowerEnd++;
    } else {
      // U* gives back one unit at a time until W+ can start: at the run's last lower-ish unit.
      // Everything after that unit inside the run is upper-only, so W+ stops right after it.
      let k = upperEnd - 1;
      while (k >= j && ((classes[k] as number) & LOWERISH) === 0) k--;
      if (k < j) continue;
      lowerEnd = k + 1;
    }
    return lowerEnd + contraction(folded, lowerEnd, n);
  }
  return -1;
}

/** Alternative 3, `P? U+ W* C?`: the prefix taken first, then skipped. */
function upperFirst(classes: Uint8Array, folded: Uint8Array, i: number, n: number, canPrefix: boolean): number {
  for (let pass = canPrefix ? 0 : 1; pass < 2; pass++) {
    const j = pass === 0 ? i + 1 : i;
    let upperEnd = j;
    while (upperEnd < n && (classes[upperEnd] as number) & UPPERISH) upperEnd++;
    if (upperEnd === j) continue;
    let lowerEnd = upperEnd;
    while (lowerEnd < n && (classes[lowerEnd] as number) & LOWERISH) lowerEnd++;
    return lowerEnd + contraction(folded, lowerEnd, n);
  }
  return -1;
}

/**
 * Units taken by `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `k` (0 if none). Case-insensitive matching
 * in the Rust regex crate uses Unicode simple case folding, under which `s` also matches U+017F
 * (LATIN SMALL LETTER LONG S); the other letters fold only to their ASCII pair. `folded` holds
 * exactly that folding.
 */
function contraction(folded: Uint8Array, k: number, n: number): number {
  if (k + 1 >= n || folded[k] !== APOSTROPHE) return 0;
  const c1 = folded[k + 1] as number;
  if (c1 === 0x73 || c1 === 0x74 || c1 === 0x6d || c1 === 0x64) return 2; // s t m d
  if (k + 2 >= n) return 0;
  const c2 = folded[k + 2] as number;
  if ((c1 === 0x72 || c1 === 0x76) && c2 === 0x65) return 3; // re ve
  if (c1 === 0x6c && c2 === 0x6c) return 3; // ll
  return 0;
}
