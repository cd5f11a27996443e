/**
 * Id-for-id parity with tiktoken (the official Rust core as WASM), built from the same rank file,
 * the same special tokens and the same released pattern (runtime.md 10.6). Run with the real
 * Kimi table when it is present, and always with two synthetic tables.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { Tiktoken } from "tiktoken";
import { loadTokenizer } from "../../../src/tokenizer/index.ts";
import { KIMI_PATTERN_ALTERNATIVES, kimiPatternForJs } from "../../../src/tokenizer/pattern.ts";
import { PreTokenizer } from "../../../src/tokenizer/pretokenize.ts";
import type { Tokenizer } from "../../../src/tokenizer/tokenizer.ts";
import {
  concatBytes, concatSources, difference, frequencyTable, KIMI_DIR, modelText, oracle, readCases, readMultilingual, REAL,
  REPO_ROOT, removeTokenizerDirs, specialsOf, syntheticConfig, trainedTable, writeTokenizerDir,
} from "../../fixtures/tokenizer/support.ts";

afterAll(removeTokenizerDirs);
// Whole sources through both encoders take seconds, more on a busy machine (the run starts the
// gates' child processes beside the unit tests): the 5 s default is too close.
setDefaultTimeout(60_000);

const cases = readCases();
const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Both sides on one input, in one mode; returns "" or a description of the first divergence. */
function compare(mine: Tokenizer, theirs: Tiktoken, text: string, ordinary: boolean): string {
  const ours = mine.encode(new TextEncoder().encode(text), { ordinary });
  const reference = ordinary ? theirs.encode_ordinary(text) : theirs.encode(text, "all");
  return difference(ours, reference);
}

function expectCasesMatch(mine: () => Tokenizer, theirs: () => Tiktoken, ordinary: boolean): void {
  expect(cases.length).toBeGreaterThanOrEqual(45);
  const failures: string[] = [];
  for (const c of cases) {
    const diff = compare(mine(), theirs(), c.text, ordinary);
    if (diff !== "") failures.push(`${c.name}: ${diff}`);
  }
  expect(failures).toEqual([]);
}

/** Deterministic strings over units chosen to sit on every boundary of the pattern. */
function fuzzStrings(count: number, seed: number): string[] {
  const alphabet = [
    "a", "b", "Z", "Q", "'", "s", "S", "t", "T", "l", "L", "e", "E", "r", "R", "v", "V", "m", "M", "d", "D", "ſ",
    " ", " ", " ", "\t", "\n", "\r", "\r\n", "\u000b", "\u0085", "\u00a0", "\u3000", "\u2028", "\ufeff",
    "0", "1", "9", "٣", "Ⅻ", "²", "一", "中", "々", "〇", "⺀", "、", "。", "ー", "𠀀",
    "!", ".", ",", "-", "_", "/", "\\", "@", "#", "(", ")", "<", ">", "|", "\"",
    "\u0301", "\u0300", "ǅ", "ʰ", "ا", "ñ", "é", "ß", "Σ", "ς", "я", "Я", "ｱ", "ｶ", "か", "カ", "한",
    "😀", "\u200d", "👍", "\u{1F3FB}", "🇯", "\ufffd", "<|open|>", "[EOS]", "<|", "|>",
  ];
  let state = seed;
  const next = (): number => {
    state = (Math.imul(state, 1103515245) + 12345) >>> 0;
    return state / 2 ** 32;
  };
  const out: string[] = [];
  for (let i = 0; i < count; i++) {
    const length = 1 + Math.floor(next() * 24);
    let text = "";
    for (let k = 0; k < length; k++) text += alphabet[Math.floor(next() * alphabet.length)];
    out.push(text);
  }
  return out;
}

/** Long single-class runs and blobs: pieces past the short-merge limit take the heap merge. */
function longPieces(): string[] {
  return [
    "a".repeat(300), " ".repeat(257), "ab".repeat(200), "abc".repeat(111), "!".repeat(500), "😀".repeat(80),
    "中文".repeat(150), "é".repeat(129), "\n".repeat(200), " \t".repeat(90),
    "QWxhZGRpbjpvcGVuIHNlc2FtZQ".repeat(20), "Pneumonoultramicroscopicsilicovolcanoconiosis".repeat(9),
    "x".repeat(64), "x".repeat(65), "yz".repeat(32) + "y", "%".repeat(1999),
  ];
}

describe("parity with tiktoken" + REAL, () => {
  let mine: Tokenizer;
  let theirs: Tiktoken;
  beforeAll(() => {
    if (KIMI_DIR === undefined) return;
    mine = loadTokenizer(KIMI_DIR);
    theirs = oracle(readFileSync(join(KIMI_DIR, "tiktoken.model"), "utf8"), specialsOf(mine));
  });
  afterAll(() => theirs?.free());

  test.skipIf(KIMI_DIR === undefined)(`${cases.length} fixture cases, special tokens allowed`, () => {
    expectCasesMatch(() => mine, () => theirs, false);
  });

  test.skipIf(KIMI_DIR === undefined)(`${cases.length} fixture cases, ordinary mode`, () => {
    expectCasesMatch(() => mine, () => theirs, true);
  });

  test.skipIf(KIMI_DIR === undefined)("the multilingual text and this repository's sources, both modes", () => {
    const texts = [readMultilingual(), concatSources(join(REPO_ROOT, "src"), [".ts"]), concatSources(join(REPO_ROOT, "test"), [".ts", ".txt"])];
    for (const bytes of texts) {
      const text = utf8.decode(bytes);
      expect(compare(mine, theirs, text, false)).toBe("");
      expect(compare(mine, theirs, text, true)).toBe("");
    }
  });

  test.skipIf(KIMI_DIR === undefined)("fuzz: 3000 strings on the pattern's boundaries, both modes", () => {
    const failures = fuzzStrings(3000, 7).flatMap((text) =>
      [false, true].map((ordinary) => compare(mine, theirs, text, ordinary)).filter((d) => d !== "").map((d) => `${JSON.stringify(text)}: ${d}`));
    expect(failures).toEqual([]);
  });

  test.skipIf(KIMI_DIR === undefined)("long pieces (heap merge)", () => {
    for (const text of longPieces()) expect(compare(mine, theirs, text, true)).toBe("");
  });

  test.skipIf(KIMI_DIR === undefined)("published ids of chat.md 1.2", () => {
    const published: [string, number[]][] = [
      ["message", [2778]], ["think", [39964]], ["response", [12092]], ["system", [14062]], ["user", [2482]],
      ["assistant", [69702]], [" role", [6244]], [" type", [1798]], ["=\"", [878]], ["\"", [1]],
      ["thinking-effort", [130400, 59991, 470]], ["tool-declare", [20960, 120083, 677]], ["tool-choice", [20960, 135230]],
      ["response-format", [12092, 46906]], ["tools", [25385]], ["json", [5534]], [" name", [1530]], ["null", [6562]],
    ];
    for (const [text, ids] of published) expect({ text, ids: mine.encode(text, { ordinary: true }) }).toEqual({ text, ids });
  });

  test.skipIf(KIMI_DIR === undefined)("special tokens: the 16 named ids of chat.md 1.1, reserved names for the rest", () => {
    expect(mine.vocabSize).toBe(163_840);
    expect(mine.rankCount).toBe(163_584);
    expect(mine.specials.length).toBe(256);
    expect(mine.specials.filter((t) => t.listed).map((t) => [t.id, t.text, t.special])).toEqual([
      [163584, "[BOS]", true], [163585, "[EOS]", true], [163586, "<|end_of_msg|>", true], [163587, "<|open|>", false],
      [163588, "<|close|>", false], [163589, "<|sep|>", false], [163590, "[start_header_id]", true],
      [163591, "[end_header_id]", true], [163593, "[EOT]", true], [163602, "<|media_begin|>", true],
      [163603, "<|media_content|>", true], [163604, "<|media_end|>", true], [163605, "<|media_pad|>", true],
      [163649, "<osagent_mode>", true], [163838, "[UNK]", true], [163839, "[PAD]", true],
    ]);
    expect(mine.specialId("<|reserved_token_163592|>")).toBe(163592);
    expect(mine.encode("<|open|>user<|sep|>")).toEqual([163587, 2482, 163589]);
    // Ordinary mode: typed special text stays text (chat.md 2.1); never a special id.
    expect(mine.encode("<|open|>user<|sep|>", { ordinary: true }).every((id) => id < 163_584)).toBe(true);
  });
});

/** The synthetic tables: built from the fixture corpus, so these run on every machine. */
for (const [label, build] of [
  ["trained BPE table", () => trainedTable(1000)],
  ["frequency-ranked table", () => frequencyTable(8000)],
] as const) {
  describe(`parity with tiktoken (synthetic ${label})`, () => {
    let mine: Tokenizer;
    let theirs: Tiktoken;
    beforeAll(() => {
      const tokens = build();
      const model = modelText(tokens);
      mine = loadTokenizer(writeTokenizerDir("synthetic", model, syntheticConfig(tokens.length)));
      theirs = oracle(model, specialsOf(mine));
    });
    afterAll(() => theirs.free());

    test(`${cases.length} fixture cases, special tokens allowed`, () => expectCasesMatch(() => mine, () => theirs, false));
    test(`${cases.length} fixture cases, ordinary mode`, () => expectCasesMatch(() => mine, () => theirs, true));

    test("fuzz: 3000 strings on the pattern's boundaries, both modes", () => {
      const failures = fuzzStrings(3000, 11).flatMap((text) =>
        [false, true].map((ordinary) => compare(mine, theirs, text, ordinary)).filter((d) => d !== "").map((d) => `${JSON.stringify(text)}: ${d}`));
      expect(failures).toEqual([]);
    });

    test("long pieces (heap merge)", () => {
      for (const text of longPieces()) expect(compare(mine, theirs, text, true)).toBe("");
    });

    test("the multilingual text and this repository's sources, both modes", () => {
      const text = utf8.decode(concatBytes([readMultilingual(), concatSources(join(REPO_ROOT, "src"), [".ts"])]));
      expect(compare(mine, theirs, text, false)).toBe("");
      expect(compare(mine, theirs, text, true)).toBe("");
    });

    test("a string with a lone surrogate is encoded as tiktoken encodes it (U+FFFD)", () => {
      for (const text of ["a\ud800b", "\udfff", "x \ud83d", "😀\ud83d😀"]) {
        expect(difference(mine.encode(text), theirs.encode(text, "all"))).toBe("");
      }
    });
  });
}

const SPEC = join(REPO_ROOT, "../shared/spec/runtime.md");

test.skipIf(!existsSync(SPEC))("the pattern is the spec's 10.2 block, alternative for alternative", () => {
  const text = readFileSync(SPEC, "utf8");
  const section = text.slice(text.indexOf("### 10.2"), text.indexOf("### 10.3"));
  const block = /```\n([\s\S]*?)\n```/.exec(section)?.[1];
  expect(block?.split("\n")).toEqual([...KIMI_PATTERN_ALTERNATIVES]);
});

describe("pre-tokenizer against JavaScript's own regex engine (v flag, same pattern)", () => {
  const pre = new PreTokenizer();
  const pattern = kimiPatternForJs();
  const pieces = (bytes: Uint8Array): string[] => {
    const { bounds, count } = pre.split(bytes, 0, bytes.length);
    return Array.from({ length: count }, (_, i) => utf8.decode(bytes.subarray(bounds[i], bounds[i + 1])));
  };

  test(`${cases.length} fixture cases and the multilingual text split identically`, () => {
    for (const bytes of [...cases.map((c) => c.bytes), readMultilingual()]) {
      const text = utf8.decode(bytes);
      expect(pieces(bytes)).toEqual(text.match(pattern) ?? []);
    }
  });

  test("fuzz: 20000 strings split identically", () => {
    const encoder = new TextEncoder();
    const failures: string[] = [];
    for (const text of fuzzStrings(20000, 3)) {
      const ours = pieces(encoder.encode(text));
      const theirs = text.match(pattern) ?? [];
      if (JSON.stringify(ours) !== JSON.stringify(theirs)) failures.push(`${JSON.stringify(text)}: ${JSON.stringify(ours)} vs ${JSON.stringify(theirs)}`);
    }
    expect(failures.slice(0, 10)).toEqual([]);
  });
});
