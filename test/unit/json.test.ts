/**
 * The one strict JSON reader (src/json.ts) as the file readers use it, the capped read every
 * file goes through (src/fs.ts), and the excerpt a message quotes (src/errors.ts).
 */
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseJson } from "../../src/chat/json-parse.ts";
import { excerpt, K3Error } from "../../src/errors.ts";
import { readCapped } from "../../src/fs.ts";
import { inputLimits } from "../../src/input-limits.ts";
import { JsonSyntaxError, parseJsonData, parseJsonValue, type JsonErrorKind } from "../../src/json.ts";
import { parseTextRequest } from "../../src/serve/text-completion.ts";
import { loadTokenizer } from "../../src/tokenizer/index.ts";
import { fixturesDir } from "../support/fixtures.ts";
import { tempDir } from "../support/tmp.ts";

function failure(read: () => unknown): { kind: JsonErrorKind; where: string; reason: string } {
  try {
    read();
  } catch (error) {
    if (!(error instanceof JsonSyntaxError)) throw error;
    return { kind: error.kind, where: `${error.line}:${error.column}`, reason: error.reason };
  }
  throw new Error("parsed");
}

describe("duplicate keys", () => {
  const spellings: [string, string][] = [
    ["plain", '{"a": 1, "a": 2}'],
    ["escaped", '{"a": 1, "\\u0061": 2}'],
    ["escaped upper-case hex", '{"\\u00E9": 1, "\\u00e9": 2}'],
    ["raw and escaped", '{"é": 1, "\\u00e9": 2}'],
    ["a surrogate pair", '{"\\ud83d\\ude00": 1, "\u{1F600}": 2}'],
    ["nested deep inside an array", '[{"x": [{"k": 1, "k": 1}]}]'],
  ];
  for (const [what, text] of spellings) {
    test(`refused, ${what}: by both readers, at the second key`, () => {
      const data = failure(() => parseJsonData(text));
      expect(data.kind).toBe("duplicate");
      expect(data.reason).toMatch(/^the key ".+" appears twice in one object$/);
      expect(failure(() => parseJsonValue(text))).toEqual(data);
    });
  }

  test("the chat reading keeps Python's: the last value at the first key's place (chat.md 2.4)", () => {
    const value = parseJson('{"a": 1, "b": 2, "\\u0061": 3}') as ReadonlyMap<string, unknown>;
    expect([...value.keys()]).toEqual(["a", "b"]);
  });

  test("the same key in different objects is not a duplicate", () => {
    expect(parseJsonData('{"a": {"a": 1}, "b": [{"a": 2}, {"a": 3}]}')).toEqual({ a: { a: 1 }, b: [{ a: 2 }, { a: 3 }] });
  });

  test("a key long enough to flood a message is quoted short", () => {
    const key = "k".repeat(1_000_000);
    const { reason } = failure(() => parseJsonData(`{"${key}": 1, "${key}": 2}`));
    expect(reason.length).toBeLessThan(100);
  });
});

describe("parseJsonData: JSON.parse's values, the strict reader's refusals", () => {
  test("the values are JSON.parse's, __proto__ included as a plain key", () => {
    const text = '{"a": [1, 2.5, -0, 1e400, "x\\n"], "__proto__": {"b": null}, "c": true}';
    expect(parseJsonData(text)).toEqual(JSON.parse(text));
  });

  test("syntax errors name line:column as the strict reader finds them", () => {
    expect(failure(() => parseJsonData('{\n  "a": 1,\n  "b": oops\n}'))).toEqual({ kind: "syntax", where: "3:8", reason: 'expected a JSON value, found "o"' });
    expect(failure(() => parseJsonData('{"a": "unclosed'))).toMatchObject({ kind: "syntax", where: "1:7" });
    expect(failure(() => parseJsonData("\uFEFF{}")).kind).toBe("syntax");
  });

  test(`nesting beyond ${inputLimits.jsonDepth} levels is a limit, however deep, without exhausting the stack`, () => {
    const deep = (n: number) => `${"[".repeat(n)}${"]".repeat(n)}`;
    expect(() => parseJsonData(deep(inputLimits.jsonDepth))).not.toThrow();
    expect(failure(() => parseJsonData(deep(inputLimits.jsonDepth + 1)))).toEqual({ kind: "limit", where: `1:${inputLimits.jsonDepth + 1}`, reason: `nested deeper than ${inputLimits.jsonDepth} levels` });
    expect(failure(() => parseJsonData(`{"a": ${deep(1_000_000)}}`)).kind).toBe("limit");
    expect(failure(() => parseJsonData(`{"a": ${'{"b":'.repeat(500_000)}1${"}".repeat(500_000)}}`)).kind).toBe("limit");
  });

  test("brackets, colons and escaped quotes inside strings are not structure", () => {
    expect(parseJsonData('{"a:[{": "\\"}:]", "b\\\\": "[["}')).toEqual({ 'a:[{': '"}:]', "b\\": "[[" });
  });

  test("random mutations of a valid text: both readers accept or refuse alike", () => {
    const base = '{"tensor.\\u0061": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}, "b": [true, null, "\\"x"]}';
    let seed = 99;
    const next = (n: number) => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) % n);
    const alphabet = '{}[]",:\\ a0-.e';
    for (let i = 0; i < 5000; i++) {
      const chars = [...base];
      for (let m = 1 + next(3); m > 0; m--) chars.splice(next(chars.length), next(2), alphabet[next(alphabet.length)] as string);
      const text = chars.join("");
      let fast: string;
      try {
        fast = JSON.stringify(parseJsonData(text));
      } catch (error) {
        expect(error).toBeInstanceOf(JsonSyntaxError);
        fast = "refused";
      }
      let strict: string;
      try {
        parseJsonValue(text, { duplicateKeys: "refuse" });
        strict = fast === "refused" ? "accepted" : fast;
      } catch {
        strict = "refused";
      }
      expect(`${text} -> ${fast}`).toBe(`${text} -> ${strict}`);
    }
  });
});

describe("readCapped", () => {
  const refused = (read: () => unknown): K3Error => {
    try {
      read();
    } catch (error) {
      if (error instanceof K3Error) return error;
      throw error;
    }
    throw new Error("read");
  };

  test("a file within the cap is read whole; one byte over is refused by its size", () => {
    const path = join(tempDir("cap"), "f.json");
    writeFileSync(path, "x".repeat(100));
    expect(readCapped(path, 100, "the thing").length).toBe(100);
    const error = refused(() => readCapped(path, 99, "the thing", 2));
    expect(error.message).toBe(`${path}: cannot read the thing: 100 bytes, more than the 99-byte limit`);
    expect(error.exitCode).toBe(2);
  });

  test("an endless device is refused after the cap, quickly", () => {
    const started = performance.now();
    expect(refused(() => readCapped("/dev/zero", 1 << 20, "the model config")).message).toBe(
      "/dev/zero: cannot read the model config: more than the 1048576-byte limit",
    );
    expect(performance.now() - started).toBeLessThan(2000);
  });

  test("a directory and a missing file are refused by name", () => {
    const dir = join(tempDir("cap"), "d.json");
    mkdirSync(dir);
    expect(refused(() => readCapped(dir, 100, "the request")).message).toBe(`${dir}: cannot read the request: it is a directory`);
    expect(refused(() => readCapped(join(dir, "none"), 100, "the request")).message).toBe(`${join(dir, "none")}: cannot read the request (ENOENT)`);
  });
});

test("excerpts: JSON-escaped, at most 40 code points, marked when cut", () => {
  expect(excerpt("ab\nc")).toBe('"ab\\nc"');
  expect(excerpt("x".repeat(40))).toBe(JSON.stringify("x".repeat(40)));
  expect(excerpt("x".repeat(20_000_000))).toBe(JSON.stringify(`${"x".repeat(40)}...`));
  expect(excerpt("\u{1F600}".repeat(50))).toBe(JSON.stringify(`${"\u{1F600}".repeat(40)}...`));
});

test("a /v1/completions body with a raw line break after a backslash is refused on one line naming line:column (fuzz finding)", () => {
  const tokenizer = loadTokenizer(join(fixturesDir, "chat-tokenizer"));
  let message = "";
  try {
    parseTextRequest(new TextEncoder().encode('{"prompt": "a\\\n"}'), tokenizer, 4096);
  } catch (error) {
    message = (error as K3Error).message;
  }
  expect(message).toBe('request:1:14: an invalid escape \\U+000A');
});
