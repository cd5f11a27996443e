/**
 * The chat JSON layer: the strict lexeme-keeping reader under hostile input, Python's json.dumps
 * and float repr (expected strings are what CPython 3 prints), request bytes that are not
 * UTF-8, code point ordering, and the released tokenizer's cutting of long segments.
 */
import { describe, expect, test } from "bun:test";
import { parseChatRequest } from "../../../src/chat/index.ts";
import { JsonSyntaxError, MAX_INTEGER_DIGITS, parseJson, type JsonErrorKind } from "../../../src/chat/json-parse.ts";
import { dumpsCompact, dumpsDefault, pythonFloat } from "../../../src/chat/json-text.ts";
import { compareCodePoints, JsonNumber, type JsonValue } from "../../../src/chat/json-value.ts";
import { encodePieces, isPythonSpace } from "../../../src/chat/python-text.ts";
import { firstInvalidUtf8 } from "../../../src/chat/utf8.ts";
import { K3Error } from "../../../src/errors.ts";

function failure(text: string, options?: Parameters<typeof parseJson>[1]): { kind: JsonErrorKind; where: string; reason: string } {
  try {
    parseJson(text, options);
  } catch (error) {
    if (!(error instanceof JsonSyntaxError)) throw error;
    return { kind: error.kind, where: `${error.line}:${error.column}`, reason: error.reason };
  }
  throw new Error(`parsed: ${text.slice(0, 80)}`);
}

describe("strict JSON reader", () => {
  test("numbers keep their lexemes; objects keep key order; a repeated key keeps its first place and its last value", () => {
    const value = parseJson('{"b": 1.0, "a": [1e5, -0, 123456789012345678901], "b": 2.50}') as ReadonlyMap<string, JsonValue>;
    expect([...value.keys()]).toEqual(["b", "a"]);
    expect((value.get("b") as JsonNumber).lexeme).toBe("2.50");
    expect((value.get("a") as JsonNumber[]).map((n) => n.lexeme)).toEqual(["1e5", "-0", "123456789012345678901"]);
    expect(dumpsCompact(value)).toBe('{"b":2.5,"a":[100000.0,0,123456789012345678901]}');
  });

  const syntax: [string, string, string][] = [
    ["", "1:1", "no JSON value (the text is empty)"],
    ["  \n ", "2:2", "no JSON value (the text is empty)"],
    ["\uFEFF{}", "1:1", "a byte order mark (U+FEFF) before the JSON value"],
    ["{} {}", "1:4", 'unexpected "{" after the JSON value'],
    ['{"a": 1,}', "1:9", 'expected a string key, found "}"'],
    ["[1, 2,]", "1:7", 'expected a JSON value, found "]"'],
    ["{'a': 1}", "1:2", `expected a string key, found "'"`],
    ['{"a" 1}', "1:6", "expected ':' after an object key, found \"1\""],
    ["[1 2]", "1:4", "expected ',' or ']' in an array, found \"2\""],
    ['{"a": 1 "b": 2}', "1:9", "expected ',' or '}' in an object, found"],
    ["// c\n{}", "1:1", 'expected a JSON value, found "/"'],
    ["01", "1:2", "a number with a leading zero"],
    ["1.", "1:3", "expected a digit after '.', found the end of the text"],
    [".5", "1:1", 'expected a JSON value, found "."'],
    ["1e", "1:3", "expected a digit in the exponent"],
    ["+1", "1:1", 'expected a JSON value, found "+"'],
    ["-", "1:2", "expected a digit, found the end of the text"],
    ["NaN", "1:1", 'expected a JSON value, found "N"'],
    ["Infinity", "1:1", 'expected a JSON value, found "I"'],
    ["tru", "1:1", 'expected a JSON value, found "t"'],
    ['"a\tb"', "1:3", "a raw control character U+0009 in a string"],
    ['"a\nb"', "1:3", "a raw control character U+000A in a string"],
    ['"\\x41"', "1:2", 'an invalid escape \\"x"'],
    ['"\\u12"', "1:2", "\\u must be followed by four hex digits"],
    ['"abc', "1:1", "a string opened here is not closed"],
    ['{"a": [1, {"b": ', "1:17", "expected a JSON value, found the end of the text"],
    ["[1, [2, 3]", "1:1", "an array opened here is not closed"],
    ['{\n  "a": 1,\n  "b": oops\n}', "3:8", 'expected a JSON value, found "o"'],
  ];
  for (const [text, where, reason] of syntax) {
    test(`refuses ${JSON.stringify(text)} at ${where}`, () => {
      const got = failure(text);
      expect(got.kind).toBe("syntax");
      expect(got.where).toBe(where);
      expect(got.reason).toStartWith(reason);
    });
  }

  test("Python's NaN and Infinity only when asked (tool-call arguments are read as json.loads reads them)", () => {
    const value = parseJson("[NaN, Infinity, -Infinity]", { pythonConstants: true });
    expect(dumpsCompact(value)).toBe("[NaN,Infinity,-Infinity]");
  });

  test("nesting: 256 levels read, 257 refused as a limit; 100,000 open brackets refused without exhausting the stack", () => {
    expect(() => parseJson(`${"[".repeat(256)}${"]".repeat(256)}`)).not.toThrow();
    expect(failure(`${"[".repeat(257)}${"]".repeat(257)}`)).toEqual({ kind: "limit", where: "1:257", reason: "nested deeper than 256 levels" });
    expect(failure(`${'{"a":'.repeat(100_000)}1${"}".repeat(100_000)}`).kind).toBe("limit");
    expect(failure("[".repeat(100_000)).kind).toBe("limit");
    expect(failure("[[[1]]]", { maxDepth: 2 }).reason).toBe("nested deeper than 2 levels");
  });

  test("huge numbers: integers up to Python's 4300 digits, floats of any length (1e400 is Infinity, as in Python)", () => {
    expect(dumpsCompact(parseJson("9".repeat(MAX_INTEGER_DIGITS)))).toBe("9".repeat(MAX_INTEGER_DIGITS));
    expect(failure(`[${"9".repeat(MAX_INTEGER_DIGITS + 1)}]`)).toEqual({ kind: "limit", where: "1:2", reason: "an integer of 4301 digits (at most 4300, as in Python)" });
    expect(dumpsCompact(parseJson(`0.${"1".repeat(10_000)}`))).toBe("0.1111111111111111");
    expect(dumpsCompact(parseJson("[1e400, -1e400, 1e-400]"))).toBe("[Infinity,-Infinity,0.0]");
  });

  test("size: a text longer than the limit is refused before it is read", () => {
    expect(failure("[1, 2, 3]", { maxChars: 8 })).toEqual({ kind: "limit", where: "1:1", reason: "the text is 9 characters, more than the 8 allowed" });
  });

  test("lone surrogates are refused (escaped or raw); a pair is one character", () => {
    expect(failure('"\\ud800"')).toMatchObject({ kind: "unicode", where: "1:2" });
    expect(failure('"\\udc00"').kind).toBe("unicode");
    expect(failure('"\\ud800\\u0041"').kind).toBe("unicode");
    expect(failure('"\\ud800\\ud800"').kind).toBe("unicode");
    expect(failure('"x\ud800"')).toMatchObject({ kind: "unicode", where: "1:3" });
    expect(failure('"\udc00x"').kind).toBe("unicode");
    expect(parseJson('"\\ud83d\\ude00 \ud83d\ude00"')).toBe("\u{1F600} \u{1F600}");
  });

  test("escapes decode; \\/ and \\u0000 included", () => {
    expect(parseJson('"\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\\u00e9"')).toBe('"\\/\b\f\n\r\t\u0000\u00e9');
  });
});

describe("request bytes that are not UTF-8", () => {
  const refused = (bytes: number[]): string => {
    try {
      parseChatRequest(new Uint8Array(bytes));
    } catch (error) {
      if (error instanceof K3Error) return error.message;
      throw error;
    }
    throw new Error("accepted");
  };
  const head = Buffer.from('{"messages":\n[{"role":"user","content":"');
  const body = (inside: number[]): number[] => [...head, ...inside, ...Buffer.from('"}]}')];
  const at = head.length;

  test("a stray byte, an overlong form, an encoded surrogate, a truncated sequence: line and offset named", () => {
    expect(refused(body([0xff]))).toBe(`request:2: not valid UTF-8 (byte 0xff at offset ${at})`);
    expect(refused(body([0xc0, 0x80]))).toBe(`request:2: not valid UTF-8 (byte 0xc0 at offset ${at})`);
    expect(refused(body([0xed, 0xa0, 0x80]))).toBe(`request:2: not valid UTF-8 (byte 0xed at offset ${at})`);
    expect(refused(body([0x41, 0xe2, 0x82]))).toBe(`request:2: not valid UTF-8 (byte 0xe2 at offset ${at + 1})`);
    expect(refused([0xf4, 0x90, 0x80, 0x80])).toBe("request:1: not valid UTF-8 (byte 0xf4 at offset 0)");
  });

  test("the offset finder agrees with the platform's strict decoder on random bytes", () => {
    let seed = 12345;
    const next = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
    for (let trial = 0; trial < 3000; trial++) {
      const bytes = Uint8Array.from({ length: 1 + (next() % 12) }, () => (next() % 3 === 0 ? next() % 256 : [0x41, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80][next() % 10] as number));
      let valid = true;
      try {
        new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      } catch {
        valid = false;
      }
      expect(`${[...bytes]}: ${firstInvalidUtf8(bytes) === -1}`).toBe(`${[...bytes]}: ${valid}`);
    }
  });
});

describe("Python's json.dumps and float repr", () => {
  const floats: [string, string][] = [
    ["1.0", "1.0"], ["1e5", "100000.0"], ["1e-7", "1e-07"], ["1e16", "1e+16"], ["1.5e16", "1.5e+16"], ["1e15", "1000000000000000.0"],
    ["9999999999999999.0", "1e+16"], ["0.0001", "0.0001"], ["0.00001", "1e-05"], ["-0.0", "-0.0"], ["5e-324", "5e-324"],
    ["1.7976931348623157e308", "1.7976931348623157e+308"], ["0.1", "0.1"], ["123456789.123456789", "123456789.12345679"],
    ["2.5e-08", "2.5e-08"], ["1E5", "100000.0"], ["-12.50", "-12.5"], ["0.3e-3", "0.0003"], ["1e22", "1e+22"], ["12345e-2", "123.45"],
  ];
  for (const [lexeme, python] of floats) {
    test(`${lexeme} -> ${python}`, () => {
      expect(dumpsCompact(new JsonNumber(lexeme))).toBe(python);
    });
  }

  test("ints: the lexeme, except that -0 is 0", () => {
    expect(["0", "-0", "7", "-12", "123456789012345678901234567890"].map((l) => dumpsCompact(new JsonNumber(l)))).toEqual(["0", "0", "7", "-12", "123456789012345678901234567890"]);
  });

  test("non-finite floats as json.dumps spells them", () => {
    expect([Number.NaN, Infinity, -Infinity].map(pythonFloat)).toEqual(["NaN", "Infinity", "-Infinity"]);
  });

  test('strings: " \\ and C0 controls escaped (\\u00XX lower case), DEL, U+2028, non-ASCII and emoji raw', () => {
    const value = parseJson('"q\\" b\\\\ \\n\\r\\t\\b\\f \\u0001\\u001f \\u007f \\u2028 é 世 \\ud83d\\ude00"');
    expect(dumpsCompact(value)).toBe('"q\\" b\\\\ \\n\\r\\t\\b\\f \\u0001\\u001f \u007f \u2028 é 世 \u{1F600}"');
  });

  test("compact and default separators; empty containers", () => {
    const value = parseJson('{"a": [1, {"b": null, "c": true}], "d": {}, "e": [], "f": false}');
    expect(dumpsCompact(value)).toBe('{"a":[1,{"b":null,"c":true}],"d":{},"e":[],"f":false}');
    expect(dumpsDefault(value)).toBe('{"a": [1, {"b": null, "c": true}], "d": {}, "e": [], "f": false}');
  });
});

test("keys sort by code point: the same order as sorting arrays of code points", () => {
  const alphabet = ["a", "B", "\u00e9", "\uFFFF", "\uE000", "\u{1F600}", "\u{10000}", "\u{10FFFF}", "z"];
  let seed = 7;
  const next = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
  const keys = Array.from({ length: 300 }, () => Array.from({ length: next() % 4 }, () => alphabet[next() % alphabet.length]).join(""));
  const byPoints = (a: string, b: string): number => {
    const x = Array.from(a, (c) => c.codePointAt(0) as number);
    const y = Array.from(b, (c) => c.codePointAt(0) as number);
    for (let i = 0; i < Math.min(x.length, y.length); i++) if (x[i] !== y[i]) return (x[i] as number) - (y[i] as number);
    return x.length - y.length;
  };
  expect([...keys].sort(compareCodePoints)).toEqual([...keys].sort(byPoints));
  expect(["\u{1F600}", "\uFFFF"].sort(compareCodePoints)).toEqual(["\uFFFF", "\u{1F600}"]);
});

describe("long segments are cut as the released tokenizer cuts them", () => {
  /** The rule spelled out over code points: chunks, then runs longer than maxRun cut. */
  function reference(text: string, chunk: number, maxRun: number): string[] {
    const points = Array.from(text);
    const out: string[] = [];
    for (let c = 0; c < points.length; c += chunk) {
      const s = points.slice(c, c + chunk);
      let start = 0;
      let length = 0;
      let space = s.length > 0 && isPythonSpace((s[0] as string).codePointAt(0) as number);
      for (let i = 0; i < s.length; i++) {
        const now = isPythonSpace((s[i] as string).codePointAt(0) as number);
        if (now !== space) {
          length = 1;
          space = now;
        } else if (++length > maxRun) {
          out.push(s.slice(start, i).join(""));
          start = i;
          length = 1;
        }
      }
      out.push(s.slice(start).join(""));
    }
    return out.filter((piece) => piece.length > 0);
  }

  test("random texts of spaces, letters and astral characters, at small limits", () => {
    const alphabet = ["a", " ", "\n", "\u3000", "\u{1F600}", "b", "\x1c"];
    let seed = 99;
    const next = (): number => (seed = (seed * 1103515245 + 12345) & 0x7fffffff);
    for (let trial = 0; trial < 500; trial++) {
      const text = Array.from({ length: next() % 40 }, () => alphabet[next() % (next() % 2 === 0 ? 2 : alphabet.length)]).join("");
      const chunk = 1 + (next() % 12);
      const maxRun = 1 + (next() % 5);
      expect(encodePieces(text, chunk, maxRun)).toEqual(reference(text, chunk, maxRun));
    }
  });

  test("the released limits: 25,000-character runs, 400,000-character chunks", () => {
    expect(encodePieces("a".repeat(25_000))).toEqual(["a".repeat(25_000)]);
    expect(encodePieces("a".repeat(25_001))).toEqual(["a".repeat(25_000), "a"]);
    expect(encodePieces(`${"a b ".repeat(100_001)}`).map((p) => p.length)).toEqual([400_000, 4]);
  });
});
