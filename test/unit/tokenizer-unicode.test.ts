/**
 * The pre-tokenizer's Unicode classes against tiktoken (regex-syntax 0.8.5, Unicode 16.0), code
 * point by code point, and the embedded data against the spec and the JavaScript engine.
 *
 * How a sweep sees classes through an encoder: for each code point c, short contexts ("a"+c,
 * c+"!", " "+c, "一"+c, "a'"+c, ...) are whole tokens of a throwaway rank table. A context comes
 * out as one id only if the pattern kept it in one piece, so both encoders agree on every id only
 * if they agree on where every context splits. Contexts are joined by a special token, which
 * splits them into separate segments exactly as the end of a string would.
 *
 * By default: every BMP code point, plus every 16th astral one, every run boundary of the
 * embedded data and every code point that Unicode 17 added (which both must leave unclassed).
 * `K3_TOKENIZER_FULL_SWEEP=1` sweeps all 1,112,064 (about a minute).
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAddedTokens } from "../../src/tokenizer/added-tokens.ts";
import { parseRankFile } from "../../src/tokenizer/rank-file.ts";
import { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import { CODE_POINT_CLASS, HAN, LETTER, LOWERISH, NUMBER, SPACE, UPPERISH } from "../../src/tokenizer/unicode-classes.ts";
import { CATEGORY_RUNS, HAN_RANGES } from "../../src/tokenizer/unicode-data.ts";
import { oracle, REPO_ROOT } from "../fixtures/tokenizer/support.ts";
import { envValue } from "../../src/env.ts";

const MAX = 0x10ffff;
const isSurrogate = (c: number) => c >= 0xd800 && c <= 0xdfff;
const hex = (c: number) => `U+${c.toString(16).toUpperCase().padStart(4, "0")}`;

/** Code points whose contexts disagree between k3 and tiktoken. */
function sweep(codePoints: readonly number[]): number[] {
  const before = ["一", "a", "A", "1", "!", " ", "\n", "a'", "'"];
  const after = ["a", "A", "1", "!", " ", "\n", "一"];
  const encoder = new TextEncoder();
  const bad = new Set<number>();
  const batch = 8192; // about 140,000 context tokens: under the 163,840-rank limit
  for (let from = 0; from < codePoints.length; from += batch) {
    const texts: string[] = [];
    const owner: number[] = [];
    const tokens = new Set<string>(["a'"]);
    for (const c of codePoints.slice(from, from + batch)) {
      const s = String.fromCodePoint(c);
      for (const text of [...before.map((x) => x + s), ...after.map((y) => s + y), s + s]) {
        tokens.add(text);
        texts.push(text);
        owner.push(c);
      }
    }
    const lines: string[] = [];
    for (let b = 0; b < 256; b++) lines.push(`${Buffer.from([b]).toString("base64")} ${b}`);
    for (const token of tokens) {
      const bytes = encoder.encode(token);
      if (bytes.length > 1) lines.push(`${Buffer.from(bytes).toString("base64")} ${lines.length}`);
    }
    const model = lines.join("\n");
    const separator = "<|sep|>";
    const config = JSON.stringify({ added_tokens_decoder: { [lines.length]: { content: separator, special: true } } });
    const mine = new Tokenizer(parseRankFile(encoder.encode(model), "sweep.model"), parseAddedTokens(config, "sweep.json", lines.length));
    const theirs = oracle(model, { [separator]: lines.length });
    try {
      const chunk = 256;
      for (let i = 0; i < texts.length; i += chunk) {
        const joined = texts.slice(i, i + chunk).join(separator);
        const a = mine.encode(joined);
        const b = theirs.encode(joined, "all");
        if (a.length === b.length && a.every((id, k) => id === b[k])) continue;
        for (let k = i; k < Math.min(i + chunk, texts.length); k++) {
          const x = mine.encode(texts[k] as string);
          const y = theirs.encode(texts[k] as string, "all");
          if (x.length !== y.length || !x.every((id, j) => id === y[j])) bad.add(owner[k] as number);
        }
      }
    } finally {
      theirs.free();
    }
  }
  return [...bad].sort((x, y) => x - y);
}

/** Start of every run in the embedded category data, and the code point before it. */
function runBoundaries(): number[] {
  const out: number[] = [];
  let start = 0;
  for (const run of CATEGORY_RUNS.split(",")) {
    start += parseInt(run.slice(0, -1), 36);
    out.push(start - 1, start);
  }
  for (const [lo, hi] of HAN_RANGES) out.push(lo - 1, lo, hi, hi + 1);
  return out;
}

/** Code points the JavaScript engine classes but the embedded Unicode 16 data leaves unassigned. */
function newerThanData(): number[] {
  const assigned = /^[\p{L}\p{M}\p{N}\p{Script=Han}]$/u;
  const out: number[] = [];
  for (let c = 0x80; c <= MAX; c++) {
    if (!isSurrogate(c) && CODE_POINT_CLASS[c] === 0 && assigned.test(String.fromCodePoint(c))) out.push(c);
  }
  return out;
}

describe("Unicode classes", () => {
  test("Han is exactly the spec's list of ranges (runtime.md 10.2), read from the spec when present", () => {
    const spec = join(REPO_ROOT, "../shared/spec/runtime.md");
    if (existsSync(spec)) {
      const text = readFileSync(spec, "utf8");
      const paragraph = text.slice(text.indexOf("Unicode 15 Script=Han, as"), text.indexOf("### 10.3"));
      const listed = [...paragraph.matchAll(/([0-9A-F]{4,5})(?:–([0-9A-F]{4,5}))?/g)].map((m) => [parseInt(m[1] as string, 16), parseInt((m[2] ?? m[1]) as string, 16)]);
      expect(listed).toEqual(HAN_RANGES.map(([lo, hi]) => [lo, hi]));
    }
    const han: number[][] = [];
    for (let c = 0; c <= MAX; c++) {
      if ((CODE_POINT_CLASS[c] as number) & HAN) {
        const last = han[han.length - 1];
        if (last !== undefined && last[1] === c - 1) last[1] = c;
        else han.push([c, c]);
      }
    }
    expect(han).toEqual(HAN_RANGES.map(([lo, hi]) => [lo, hi]));
  });

  test("classes are consistent: Han is never upper-ish or lower-ish; letters are one or both", () => {
    for (let c = 0; c <= MAX; c++) {
      const bits = CODE_POINT_CLASS[c] as number;
      if (bits & HAN) expect(bits & (UPPERISH | LOWERISH)).toBe(0);
      else if (bits & LETTER) expect(bits & (UPPERISH | LOWERISH)).not.toBe(0);
      if (bits & NUMBER) expect(bits & (LETTER | UPPERISH | LOWERISH)).toBe(0);
    }
  });

  test("White_Space is the Rust regex crate's \\s, not JavaScript's", () => {
    const whiteSpace = /^\p{White_Space}$/u;
    for (let c = 0; c <= 0xffff; c++) {
      if (isSurrogate(c)) continue;
      expect({ c: hex(c), space: ((CODE_POINT_CLASS[c] as number) & SPACE) !== 0 }).toEqual({ c: hex(c), space: whiteSpace.test(String.fromCharCode(c)) });
    }
    expect((CODE_POINT_CLASS[0x85] as number) & SPACE).toBe(SPACE);
    expect((CODE_POINT_CLASS[0xfeff] as number) & SPACE).toBe(0);
  });

  test("the embedded runs decode to the JavaScript engine's categories, except code points newer than Unicode 16", () => {
    const categories: [number, RegExp][] = [
      [UPPERISH | LETTER, /^[\p{Lu}\p{Lt}]$/u], [LOWERISH | LETTER, /^\p{Ll}$/u], [UPPERISH | LOWERISH | LETTER, /^[\p{Lm}\p{Lo}]$/u],
      [UPPERISH | LOWERISH, /^\p{M}$/u], [NUMBER, /^\p{N}$/u],
    ];
    const newer = new Set(newerThanData());
    const disagreements: string[] = [];
    for (let c = 0; c <= MAX; c += c < 0x10000 ? 1 : 7) {
      if (isSurrogate(c) || newer.has(c)) continue;
      const text = String.fromCodePoint(c);
      const bits = (CODE_POINT_CLASS[c] as number) & ~(HAN | SPACE | 64);
      const han = /^\p{Script=Han}$/u.test(text);
      let expected = categories.find(([, pattern]) => pattern.test(text))?.[0] ?? 0;
      if (han) expected &= ~(UPPERISH | LOWERISH);
      if (bits !== expected) disagreements.push(hex(c));
    }
    expect(disagreements).toEqual([]);
  });

  test("BMP, sampled astral code points, run boundaries and Unicode 17 additions: same splits as tiktoken", () => {
    const full = envValue("K3_TOKENIZER_FULL_SWEEP") === "1";
    const chosen = new Set<number>();
    for (let c = 0; c <= MAX; c++) {
      if (!isSurrogate(c) && (full || c < 0x10000 || c % 16 === 0)) chosen.add(c);
    }
    for (const c of [...runBoundaries(), ...newerThanData()]) if (c >= 0 && c <= MAX && !isSurrogate(c)) chosen.add(c);
    expect(sweep([...chosen].sort((a, b) => a - b)).map(hex)).toEqual([]);
  }, 600_000);
});
