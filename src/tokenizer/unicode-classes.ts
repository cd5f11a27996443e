/**
 * The character classes the released split pattern (runtime.md 10.2) is built from, as bits per
 * code point. The pre-tokenizer works on UTF-8 bytes with a hand-written matcher, so it asks this
 * table instead of running a regex.
 *
 * The table is built from `unicode-data.ts` (Unicode 16.0, the parity oracle's version), never
 * from the JavaScript engine's `\p{...}`: Bun 1.4.5 already ships Unicode 17.0, and ids must not
 * change when the runtime is upgraded. Code points first assigned later have no class, exactly
 * as in tiktoken 1.0.22. `test/unit/tokenizer/unicode-classes.test.ts` checks the table against tiktoken.
 */
import { Category, CATEGORY_RUNS, HAN_RANGES, WHITE_SPACE } from "./unicode-data.ts";

/** `\p{Han}`: Script=Han. */
export const HAN = 1;
/** `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]`: the "upper" run of the letter alternatives. */
export const UPPERISH = 2;
/** `[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]`: the "lower" run of the letter alternatives. */
export const LOWERISH = 4;
/** `\p{L}`. */
export const LETTER = 8;
/** `\p{N}`. */
export const NUMBER = 16;
/**
 * `\s` as the Rust regex crate means it: Unicode White_Space. Not JavaScript's `\s`, which adds
 * U+FEFF and lacks U+0085; using it would split differently from the released tokenizer.
 */
export const SPACE = 32;
/** `\r` or `\n`, which the pattern singles out. */
export const CRLF = 64;

const MAX_CODE_POINT = 0x10ffff;

/** Class bits for each general-category value of `CATEGORY_RUNS`, before Han masking. */
const CATEGORY_BITS: Record<number, number> = {
  [Category.none]: 0,
  [Category.upperOrTitle]: UPPERISH | LETTER,
  [Category.lower]: LOWERISH | LETTER,
  [Category.modifierOrOther]: UPPERISH | LOWERISH | LETTER,
  [Category.mark]: UPPERISH | LOWERISH,
  [Category.number]: NUMBER,
};

function buildTable(): Uint8Array {
  const table = new Uint8Array(MAX_CODE_POINT + 1);
  const runs = CATEGORY_RUNS.split(",");
  let start = 0;
  for (let i = 0; i < runs.length; i++) {
    const run = runs[i] as string;
    start += parseInt(run.slice(0, -1), 36);
    const next = i + 1 < runs.length ? start + parseInt((runs[i + 1] as string).slice(0, -1), 36) : MAX_CODE_POINT + 1;
    const bits = CATEGORY_BITS[Number(run.slice(-1))] as number;
    if (bits !== 0) table.fill(bits, start, next);
  }
  // Han is masked out of both letter runs by the pattern's `&&[^\p{Han}]`; \p{L} and \p{N} keep it.
  for (const [lo, hi] of HAN_RANGES) {
    for (let c = lo; c <= hi; c++) table[c] = ((table[c] as number) & ~(UPPERISH | LOWERISH)) | HAN;
  }
  for (const c of WHITE_SPACE) table[c] = (table[c] as number) | SPACE;
  table[0x0a] = (table[0x0a] as number) | CRLF;
  table[0x0d] = (table[0x0d] as number) | CRLF;
  return table;
}

/** Class bits of every code point (index = code point). Built once, on first import (~1 ms). */
export const CODE_POINT_CLASS: Readonly<Uint8Array> = buildTable();
