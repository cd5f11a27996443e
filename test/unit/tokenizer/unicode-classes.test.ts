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
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAddedTokens } from "../../../src/tokenizer/added-tokens.ts";
import { parseRankFile } from "../../../src/tokenizer/rank-file.ts";
import { Tokenizer } from "../../../src/tokenizer/tokenizer.ts";
import { CODE_POINT_CLASS, HAN, LETTER, LOWERISH, NUMBER, SPACE, UPPERISH } from "../../../src/tokenizer/unicode-classes.ts";
import { CATEGORY_RUNS, HAN_RANGES } from "../../../src/tokenizer/unicode-data.ts";
import { oracle, REPO_ROOT } from "../../fixtures/tokenizer/support.ts";
import { envValue } from "../../../src/env.ts";

// Some tests take seconds, more on a busy machine (a run starts the gates' child processes early):
// bun's 5 s default is too close to be a limit on anything but the machine.
setDefaultTimeout(60_000);

const MAX = 0x10ffff;
const isSurrogate = (c: number) => c >= 0xd800 && c <= 0xdfff;
const hex = (c: number) => `U+${c.toString(16).toUpperCase().padStart(4, "0")}`;

/** One batch of contexts: their texts, the code point each belongs to, and their rank table. */
interface Batch {
  texts: string[];
  owner: number[];
  model: string;
  specials: Record<string, number>;
  config: string;
  /** The texts joined by the separator, `chunk` at a time: what both encoders encode first. */
  joined: string[];
}

const chunk = 256;

function makeBatch(codePoints: readonly number[]): Batch {
  const before = ["一", "a", "A", "1", "!", " ", "\n", "a'", "'"];
  const after = ["a", "A", "1", "!", " ", "\n", "一"];
  const encoder = new TextEncoder();
  const texts: string[] = [];
  const owner: number[] = [];
  const tokens = new Set<string>(["a'"]);
  for (const c of codePoints) {
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
  const joined: string[] = [];
  for (let i = 0; i < texts.length; i += chunk) joined.push(texts.slice(i, i + chunk).join(separator));
  return { texts, owner, model, specials: { [separator]: lines.length }, config, joined };
}

/**
 * Code points whose contexts disagree between k3 and tiktoken. Each batch's tiktoken encodings
 * are made in one of two worker threads (test/fixtures/tokenizer/tiktoken-worker.ts) while this
 * thread makes k3's and the next batches; where a chunk differs, each of its texts is encoded
 * alone by both, here.
 */
async function sweep(codePoints: readonly number[]): Promise<number[]> {
  const encoder = new TextEncoder();
  const bad = new Set<number>();
  const batchSize = 8192; // about 140,000 context tokens: under the 163,840-rank limit
  // Two workers, batches taken in turn: tiktoken is the slower encoder, so it gets two threads.
  const workers = [0, 1].map(() => new Worker(new URL("../../fixtures/tokenizer/tiktoken-worker.ts", import.meta.url).href));
  const answers = new Map<number, { resolve: (ids: Uint32Array[]) => void; reject: (error: Error) => void }>();
  for (const worker of workers) {
    worker.onmessage = (event: MessageEvent<{ batch: number; ids?: Uint32Array[]; error?: string }>) => {
      const { batch, ids, error } = event.data;
      if (ids) answers.get(batch)?.resolve(ids);
      else answers.get(batch)?.reject(new Error(`tiktoken worker, batch ${batch}: ${error}`));
    };
  }
  const ask = (index: number, batch: Batch): Promise<Uint32Array[]> => {
    const answer = new Promise<Uint32Array[]>((resolve, reject) => answers.set(index, { resolve, reject }));
    workers[index % workers.length]!.postMessage({ batch: index, model: batch.model, specials: batch.specials, texts: batch.joined });
    return answer;
  };
  const check = async (batch: Batch, theirsJoined: Promise<Uint32Array[]>) => {
    const mine = new Tokenizer(parseRankFile(encoder.encode(batch.model), "sweep.model"), parseAddedTokens(batch.config, "sweep.json", Object.values(batch.specials)[0]!));
    const mineJoined = batch.joined.map((text) => mine.encode(text));
    const theirs = await theirsJoined;
    let alone: ReturnType<typeof oracle> | undefined;
    try {
      mineJoined.forEach((a, c) => {
        const b = theirs[c]!;
        if (a.length === b.length && a.every((id, k) => id === b[k])) return;
        alone ??= oracle(batch.model, batch.specials);
        for (let k = c * chunk; k < Math.min((c + 1) * chunk, batch.texts.length); k++) {
          const x = mine.encode(batch.texts[k] as string);
          const y = alone.encode(batch.texts[k] as string, "all");
          if (x.length !== y.length || !x.every((id, j) => id === y[j])) bad.add(batch.owner[k] as number);
        }
      });
    } finally {
      alone?.free();
    }
  };
  try {
    // Each worker has a batch in hand while this thread checks the one before.
    const pending: { batch: Batch; theirs: Promise<Uint32Array[]> }[] = [];
    for (let from = 0, index = 0; from < codePoints.length; from += batchSize, index++) {
      const batch = makeBatch(codePoints.slice(from, from + batchSize));
      pending.push({ batch, theirs: ask(index, batch) });
      if (pending.length > workers.length) {
        const done = pending.shift()!;
        await check(done.batch, done.theirs);
      }
    }
    for (const done of pending) await check(done.batch, done.theirs);
  } finally {
    for (const worker of workers) worker.terminate();
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

  test("BMP, sampled astral code points, run boundaries and Unicode 17 additions: same splits as tiktoken", async () => {
    const full = envValue("K3_TOKENIZER_FULL_SWEEP") === "1";
    const chosen = new Set<number>();
    for (let c = 0; c <= MAX; c++) {
      if (!isSurrogate(c) && (full || c < 0x10000 || c % 16 === 0)) chosen.add(c);
    }
    for (const c of [...runBoundaries(), ...newerThanData()]) if (c >= 0 && c <= MAX && !isSurrogate(c)) chosen.add(c);
    expect((await sweep([...chosen].sort((a, b) => a - b))).map(hex)).toEqual([]);
  }, 600_000);
});
