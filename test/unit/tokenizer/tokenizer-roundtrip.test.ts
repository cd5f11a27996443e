/**
 * Round trips (runtime.md 10.6): encode then decode gives the input back byte for byte, for large
 * real files, invalid UTF-8 and special-token text; plus decoding's own rules (10.4).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { K3Error } from "../../../src/errors.ts";
import { loadTokenizer } from "../../../src/tokenizer/index.ts";
import { PreTokenizer } from "../../../src/tokenizer/pretokenize.ts";
import type { Tokenizer } from "../../../src/tokenizer/tokenizer.ts";
import {
  concatBytes, concatSources, frequencyTable, KIMI_DIR, modelText, readCases, readMultilingual, REAL, REPO_ROOT,
  removeTokenizerDirs, syntheticConfig, trainedTable, writeTokenizerDir,
} from "../../fixtures/tokenizer/support.ts";

afterAll(removeTokenizerDirs);
// Whole sources through both encoders take seconds, more on a busy machine (the run starts the
// gates' child processes beside the unit tests): the 5 s default is too close.
setDefaultTimeout(60_000);

/** Inputs over 20 KB each, from this repository and the fixtures (nothing is stored twice). */
function largeInputs(): [string, Uint8Array][] {
  return [
    ["src/**/*.ts concatenated", concatSources(join(REPO_ROOT, "src"), [".ts"])],
    ["test/**/*.ts concatenated", concatSources(join(REPO_ROOT, "test"), [".ts"])],
    ["zig/**/*.zig concatenated", concatSources(join(REPO_ROOT, "zig"), [".zig"])],
    ["README.md + every fixture case + the multilingual text", concatBytes([
      new Uint8Array(readFileSync(join(REPO_ROOT, "README.md"))), ...readCases().map((c) => c.bytes), readMultilingual(),
    ])],
    ["test/fixtures/tokenizer/multilingual.txt", readMultilingual()],
  ];
}

/** Byte strings that are not valid UTF-8, each next to text it could wrongly merge with. */
function invalidUtf8(): Uint8Array[] {
  const bytes = (...parts: (number[] | string)[]): Uint8Array =>
    concatBytes(parts.map((p) => (typeof p === "string" ? new TextEncoder().encode(p) : Uint8Array.from(p))));
  let state = 12345;
  const random = new Uint8Array(64 * 1024).map(() => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) >>> 24);
  return [
    bytes("a", [0x80], "b"), // lone continuation byte
    bytes("abc", [0xe4, 0xb8], "def"), // truncated 3-byte sequence
    bytes([0xc0, 0xaf], " x"), // overlong '/'
    bytes([0xed, 0xa0, 0x80], "y"), // UTF-8-encoded surrogate
    bytes([0xf4, 0x90, 0x80, 0x80]), // above U+10FFFF
    bytes([0xf5, 0xff, 0xfe], "\n\n", [0xe2, 0x82]), // never-valid bytes, then a truncated tail
    bytes(" ", [0x80, 0x80], "'s", [0xff], "中文", [0xe4], "中"),
    bytes("<|open|>", [0xff], "<|close|>", [0xe4, 0xb8], "[EOS]"),
    random,
  ];
}

function expectRoundTrip(tokenizer: Tokenizer, bytes: Uint8Array, ordinary: boolean): void {
  const ids = tokenizer.encode(bytes, { ordinary });
  const back = tokenizer.decode(ids);
  // Comparing Buffers keeps a failure message short (first differing region) for 100 KB inputs.
  expect(Buffer.from(back).equals(Buffer.from(bytes))).toBe(true);
  expect(ids.every((id) => Number.isInteger(id) && id >= 0 && id < tokenizer.vocabSize)).toBe(true);
}

function roundTripSuite(name: string, make: () => Tokenizer, skip: boolean): void {
  describe(`round trips: ${name}`, () => {
    let tokenizer: Tokenizer;
    beforeAll(() => {
      if (!skip) tokenizer = make();
    });

    for (const [label, bytes] of largeInputs()) {
      test.skipIf(skip)(`${label} (${bytes.length} bytes), both modes`, () => {
        expect(bytes.length).toBeGreaterThan(20_000);
        expectRoundTrip(tokenizer, bytes, false);
        expectRoundTrip(tokenizer, bytes, true);
      });
    }

    test.skipIf(skip)("every fixture case, both modes", () => {
      for (const c of readCases()) {
        expectRoundTrip(tokenizer, c.bytes, false);
        expectRoundTrip(tokenizer, c.bytes, true);
      }
    });

    test.skipIf(skip)("invalid UTF-8 comes back byte for byte, both modes", () => {
      for (const bytes of invalidUtf8()) {
        expectRoundTrip(tokenizer, bytes, false);
        expectRoundTrip(tokenizer, bytes, true);
      }
    });

    test.skipIf(skip)("a string and its UTF-8 bytes give the same ids", () => {
      const text = new TextDecoder().decode(readMultilingual());
      expect(tokenizer.encode(text)).toEqual(tokenizer.encode(new TextEncoder().encode(text)));
    });

    test.skipIf(skip)("encoding twice gives the same ids (the piece cache changes nothing)", () => {
      const bytes = readMultilingual();
      const first = tokenizer.encode(bytes);
      expect(tokenizer.encode(bytes)).toEqual(first);
    });

    test.skipIf(skip)("special ids decode to their text; every special text encodes back to its id", () => {
      for (const token of tokenizer.specials) {
        expect(new TextDecoder().decode(tokenizer.decode([token.id]))).toBe(token.text);
        expect(tokenizer.encode(token.text)).toEqual([token.id]);
        expect(tokenizer.encode(token.text, { ordinary: true })).not.toContain(token.id);
      }
    });

    test.skipIf(skip)("an id outside the vocabulary is an error naming it", () => {
      for (const id of [tokenizer.vocabSize, -1, 1.5, Number.NaN, 2 ** 40]) {
        let error: unknown;
        try {
          tokenizer.decode([0, id]);
        } catch (thrown) {
          error = thrown;
        }
        expect(error).toBeInstanceOf(K3Error);
        expect((error as K3Error).message).toBe(`token id ${id} is outside the vocabulary [0, ${tokenizer.vocabSize})`);
        expect((error as K3Error).exitCode).toBe(2);
      }
    });

    test.skipIf(skip)("empty input and empty id lists", () => {
      expect(tokenizer.encode("")).toEqual([]);
      expect(tokenizer.encode(new Uint8Array(0), { ordinary: true })).toEqual([]);
      expect(tokenizer.decode([])).toEqual(new Uint8Array(0));
    });
  });
}

roundTripSuite(`real table${REAL}`, () => loadTokenizer(KIMI_DIR as string), KIMI_DIR === undefined);
for (const [label, build] of [["trained", () => trainedTable(1000)], ["frequency-ranked", () => frequencyTable(8000)]] as const) {
  roundTripSuite(`synthetic ${label} table`, () => {
    const tokens = build();
    return loadTokenizer(writeTokenizerDir("roundtrip", modelText(tokens), syntheticConfig(tokens.length)));
  }, false);
}

describe("invalid UTF-8 splits like tiktoken splits the same text with one U+FFFD per invalid byte", () => {
  const pre = new PreTokenizer();
  /** Each piece as its number of units (code points, or single invalid bytes). */
  const shape = (bytes: Uint8Array, unitsOf: (piece: Uint8Array) => number): number[] => {
    const { bounds, count } = pre.split(bytes, 0, bytes.length);
    return Array.from({ length: count }, (_, i) => unitsOf(bytes.subarray(bounds[i], bounds[i + 1])));
  };
  const codePoints = (piece: Uint8Array): number => [...new TextDecoder().decode(piece)].length;

  test("same pieces, unit for unit", () => {
    // Inputs where every invalid byte is its own maximal ill-formed subpart, so TextDecoder gives
    // exactly one U+FFFD per byte, as the spec's C matcher counts them.
    const cases = [[0x61, 0x80, 0x62], [0x20, 0xff, 0x61, 0x62], [0xfe, 0x27, 0x73], [0x41, 0xc0, 0x42, 0x20, 0x80, 0x80, 0x0a], [0x31, 0xff, 0x32]];
    for (const raw of cases) {
      const bytes = Uint8Array.from(raw);
      const replaced = new TextEncoder().encode(new TextDecoder().decode(bytes));
      expect(shape(bytes, codePoints)).toEqual(shape(replaced, codePoints));
    }
  });

  test("a truncated sequence is one unit per byte (runtime.md 10.3 step 2), not one U+FFFD", () => {
    // "\xe4\xb8abc": per-byte units make the two bytes a punctuation run, then "abc"; a decoder
    // that made them one U+FFFD would instead give it to "abc" as the letter prefix.
    expect(shape(Uint8Array.from([0xe4, 0xb8, 0x61, 0x62, 0x63]), (piece) => piece.length)).toEqual([2, 3]);
  });
});

describe("UTF-8 validity decides the units (Unicode table 3-7)", () => {
  const pre = new PreTokenizer();
  const pieceLengths = (raw: number[]): number[] => {
    const bytes = Uint8Array.from(raw);
    const { bounds, count } = pre.split(bytes, 0, bytes.length);
    return Array.from({ length: count }, (_, i) => (bounds[i + 1] as number) - (bounds[i] as number));
  };

  test("ill-formed sequences are single-byte units with no class, never the code point they spell", () => {
    // Each would be "/a" or a letter run if decoded leniently; as classless units they form a
    // punctuation run ending before "a".
    expect(pieceLengths([0xc0, 0xaf, 0x61])).toEqual([2, 1]); // overlong '/'
    expect(pieceLengths([0xe0, 0x80, 0xaf, 0x61])).toEqual([3, 1]); // overlong, 3 bytes
    expect(pieceLengths([0xed, 0xa0, 0x80, 0x61])).toEqual([3, 1]); // surrogate U+D800
    expect(pieceLengths([0xf4, 0x90, 0x80, 0x80, 0x61])).toEqual([4, 1]); // U+110000
    expect(pieceLengths([0xf0, 0x80, 0x80, 0xaf, 0x61])).toEqual([4, 1]); // overlong, 4 bytes
    // A lead byte without its continuation: like U+FFFD, a classless unit may prefix a letter run.
    expect(pieceLengths([0xc3, 0x61])).toEqual([2]);
    expect(pieceLengths([0xc3, 0xc3, 0x61])).toEqual([2, 1]);
  });

  test("well-formed sequences at the edges of each length are one unit", () => {
    expect(pieceLengths([0xc2, 0xaa, 0x61])).toEqual([3]); // U+00AA ª (Lo) + a
    expect(pieceLengths([0xe0, 0xa4, 0x85, 0x61])).toEqual([4]); // U+0905 अ (Lo) + a
    expect(pieceLengths([0xf0, 0x90, 0x80, 0x80, 0x61])).toEqual([5]); // U+10000 𐀀 (Lo) + a
    expect(pieceLengths([0xf4, 0x8f, 0xbf, 0xbf])).toEqual([4]); // U+10FFFF, unassigned: one unit
  });
});

describe("special-token matching (runtime.md 10.3 step 1)", () => {
  const tokens = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
  const config = JSON.stringify({
    added_tokens_decoder: {
      256: { content: "[X]", special: true },
      257: { content: "[X]Y", special: true },
      258: { content: "<|a", special: false },
    },
  });
  const tokenizer = loadTokenizer(writeTokenizerDir("specials", modelText(tokens), config));

  test("the longest special token at a position wins", () => {
    expect(tokenizer.encode("[X]Y[X]Z")).toEqual([257, 256, 0x5a]);
    expect(tokenizer.encode("<|a<|a|>")).toEqual([258, 258, 0x7c, 0x3e]);
  });

  test("ordinary mode never produces a special id", () => {
    expect(tokenizer.encode("[X]Y<|a", { ordinary: true })).toEqual([0x5b, 0x58, 0x5d, 0x59, 0x3c, 0x7c, 0x61]);
  });

  test("pieces never span a special token: text on each side is its own segment", () => {
    // "a   " before a special ends its segment, so `\s+(?!\S)` takes all three spaces.
    expect(tokenizer.encode("a   [X]b")).toEqual([0x61, 0x20, 0x20, 0x20, 256, 0x62]);
  });
});
