/**
 * Loading the tokenizer files (runtime.md 10.1): strict, and every refusal is a K3Error with exit
 * code 1 and a one-line message naming the file (and the line, where there is one).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { K3Error } from "../../../src/errors.ts";
import { loadTokenizer } from "../../../src/tokenizer/index.ts";
import {
  emptyTokenizerDir, KIMI_DIR, modelText, REAL, removeTokenizerDirs, syntheticConfig, writeTokenizerDir,
} from "../../fixtures/tokenizer/support.ts";

afterAll(removeTokenizerDirs);

/** A valid 300-rank model: the 256 bytes, then 44 two-byte tokens. */
function validTokens(): Uint8Array[] {
  const tokens = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
  for (let i = 0; i < 44; i++) tokens.push(Uint8Array.of(0x61 + (i % 26), 0x61 + Math.floor(i / 26)));
  return tokens;
}
const VALID_MODEL = modelText(validTokens());
const RANKS = validTokens().length;

function refusal(model: string | Uint8Array, config: string | Uint8Array = syntheticConfig(RANKS)): { message: string; exitCode: number; dir: string } {
  const dir = writeTokenizerDir("bad", model, config);
  try {
    loadTokenizer(dir);
  } catch (error) {
    if (error instanceof K3Error) return { message: error.message, exitCode: error.exitCode, dir };
    throw error;
  }
  throw new Error("the tokenizer files were accepted");
}

/** The valid model with line `line` (1-based) replaced. */
function withLine(line: number, text: string): string {
  const lines = VALID_MODEL.split("\n");
  lines[line - 1] = text;
  return lines.join("\n");
}

describe("tiktoken.model", () => {
  test("a valid synthetic table loads; CRLF, blank lines and ranks out of order are tolerated", () => {
    const lines = VALID_MODEL.trimEnd().split("\n");
    const shuffled = [lines[5], "", ...lines.slice(0, 5), ...lines.slice(6), "", ""].join("\r\n");
    const tokenizer = loadTokenizer(writeTokenizerDir("ok", shuffled, syntheticConfig(RANKS)));
    expect(tokenizer.rankCount).toBe(RANKS);
    expect(tokenizer.vocabSize).toBe(RANKS + 256);
    expect(tokenizer.encode("ab ba")).toEqual([282, 32, 257]);
  });

  const lineCases: [string, number, string, string][] = [
    ["no rank", 3, "Ag==", "no rank (expected \"<base64 bytes> <rank>\")"],
    ["nothing after the space", 3, "Ag== ", "no rank (expected \"<base64 bytes> <rank>\")"],
    ["a rank that is not a number", 3, "Ag== two", "rank \"two\" is not a whole number in [0, 163840)"],
    ["a negative rank", 3, "Ag== -2", "rank \"-2\" is not a whole number in [0, 163840)"],
    ["two spaces", 3, "Ag==  2", "rank \" 2\" is not a whole number in [0, 163840)"],
    ["a rank past the vocabulary", 3, "Ag== 163840", "rank \"163840\" is outside [0, 163840)"],
    ["a character outside base64", 3, "A*== 2", "bad base64 \"A*==\""],
    ["base64 of the wrong length", 3, "Ag= 2", "bad base64 (length 3 is not a multiple of 4)"],
    ["base64 with stray bits", 3, "Ah== 2", "bad base64 \"Ah==\""],
    ["an empty token", 3, " 2", "empty token (no base64 before the rank)"],
    ["a duplicate rank", 3, "Ag== 1", "rank 1 is already given on line 2"],
    ["an implausibly long token", 300, `${Buffer.alloc(1100, 0x61).toString("base64")} 299`, "implausibly long token (1100 bytes; the limit is 1024)"],
  ];
  for (const [what, line, text, reason] of lineCases) {
    test(`refused: ${what}`, () => {
      const { message, exitCode, dir } = refusal(withLine(line, text));
      expect(message).toBe(`${join(dir, "tiktoken.model")}:${line}: ${reason}`);
      expect(exitCode).toBe(1);
    });
  }

  test("refused: two ranks with the same bytes, naming both lines", () => {
    const { message, dir } = refusal(withLine(258, `${Buffer.from("aa").toString("base64")} 257`));
    expect(message).toBe(`${join(dir, "tiktoken.model")}:258: token of rank 257 has the same bytes as rank 256 (line 257)`);
  });

  test("refused: a gap in the ranks (special ids would shift)", () => {
    const { message, dir } = refusal(withLine(300, `${Buffer.from("zz").toString("base64")} 301`));
    expect(message).toBe(`${join(dir, "tiktoken.model")}:300: rank 301 leaves a gap: 300 lines but rank 299 is missing (ranks must be 0..299)`);
  });

  test("refused: a byte with no rank", () => {
    const { message, dir } = refusal(withLine(0x42 + 1, `${Buffer.from("qq").toString("base64")} ${0x42}`));
    expect(message).toBe(`${join(dir, "tiktoken.model")}: byte 0x42 has no rank (byte-level BPE needs all 256 single bytes)`);
  });

  test("refused: an empty file, and one with only blank lines", () => {
    for (const model of ["", "\n\r\n\n"]) {
      const { message, dir } = refusal(model);
      expect(message).toBe(`${join(dir, "tiktoken.model")}: empty rank file (no "<base64 bytes> <rank>" lines)`);
    }
  });

  test("refused: the file is missing", () => {
    const dir = emptyTokenizerDir("missing");
    let message = "";
    try {
      loadTokenizer(dir);
    } catch (error) {
      message = (error as K3Error).message;
      expect((error as K3Error).exitCode).toBe(1);
    }
    expect(message).toBe(`${join(dir, "tiktoken.model")}: missing (the tokenizer directory ${dir} must hold tiktoken.model and tokenizer_config.json)`);
  });
});

describe("tokenizer_config.json", () => {
  const config = (decoder: unknown): string => JSON.stringify({ added_tokens_decoder: decoder, eos_token: "[EOS]" }, null, 2);
  const entry = (content: unknown, special: unknown = true) => ({ content, lstrip: false, special });

  const cases: [string, string, string][] = [
    ["invalid JSON", "{\n  \"added_tokens_decoder\": {\n    \"300\": {\"content\": \"[BOS]\",}\n  }\n}", ":3:32: not valid JSON (expected a string key, found \"}\")"],
    ["a top-level array", "[1, 2]", ":1: expected a JSON object at the top level"],
    ["no added_tokens_decoder", JSON.stringify({ eos_token: "[EOS]" }), ": no \"added_tokens_decoder\" object (the special tokens and their ids are read from it)"],
    ["added_tokens_decoder not an object", config([1]), ":2: \"added_tokens_decoder\" is not an object"],
    ["a key that is not an id", config({ "300": entry("[BOS]"), bos: entry("[X]") }), ":8: added token key \"bos\" is not a decimal id"],
    ["an id among the ranks", config({ "299": entry("[BOS]") }), ":3: added token id 299 is outside the special ids 300..555 (they follow the 300 ranks)"],
    ["an id past the 256 special ids", config({ "556": entry("[BOS]") }), ":3: added token id 556 is outside the special ids 300..555 (they follow the 300 ranks)"],
    ["no content", config({ "300": { special: true } }), ":3: added token 300 has no \"content\" text"],
    ["empty content", config({ "300": entry("") }), ":3: added token 300 has no \"content\" text"],
    ["no special flag", config({ "300": { content: "[BOS]" } }), ":3: added token 300 has no boolean \"special\" flag"],
    ["two ids with one content", config({ "300": entry("[BOS]"), "301": entry("[BOS]") }), ":8: added tokens 300 and 301 have the same content \"[BOS]\""],
    ["a listed name equal to a reserved name", config({ "300": entry("<|reserved_token_301|>") }), ":3: added tokens 300 and 301 have the same content \"<|reserved_token_301|>\""],
    ["a repeated key", "{\"added_tokens_decoder\": {\n\"300\": {\"content\": \"a\", \"special\": true},\n\"300\": {\"content\": \"b\", \"special\": true}}}", ":3:1: the key \"300\" appears twice in one object"],
    ["a repeated key spelled with escapes", "{\"added_tokens_decoder\": {\n\"300\": {\"content\": \"a\", \"special\": true},\n\"\\u0033\\u0030\\u0030\": {\"content\": \"b\", \"special\": true}}}", ":3:1: the key \"300\" appears twice in one object"],
    ["a repeated key inside an entry", config({ "300": { content: "a", special: true } }).replace('"special": true', '"special": true, "special": false'), ":5:24: the key \"special\" appears twice in one object"],
  ];
  for (const [what, text, reason] of cases) {
    test(`refused: ${what}`, () => {
      const { message, exitCode, dir } = refusal(VALID_MODEL, text);
      expect(message.slice(0, join(dir, "tokenizer_config.json").length + reason.length)).toBe(`${join(dir, "tokenizer_config.json")}${reason}`);
      expect(message).not.toContain("\n");
      expect(exitCode).toBe(1);
    });
  }

  test("refused: not UTF-8", () => {
    const { message, dir } = refusal(VALID_MODEL, Uint8Array.of(0x7b, 0xff, 0x7d));
    expect(message).toBe(`${join(dir, "tokenizer_config.json")}: not valid UTF-8`);
  });

  test("refused: the file is missing", () => {
    const dir = emptyTokenizerDir("noconfig");
    writeFileSync(join(dir, "tiktoken.model"), VALID_MODEL);
    let message = "";
    try {
      loadTokenizer(dir);
    } catch (error) {
      message = (error as K3Error).message;
    }
    expect(message).toBe(`${join(dir, "tokenizer_config.json")}: missing (the tokenizer directory ${dir} must hold tiktoken.model and tokenizer_config.json)`);
  });

  test("unlisted ids get the released Python tokenizer's reserved names", () => {
    const tokenizer = loadTokenizer(writeTokenizerDir("reserved", VALID_MODEL, config({ "301": entry("<|x|>", false) })));
    expect(tokenizer.specials[0]).toEqual({ id: 300, text: "<|reserved_token_300|>", special: true, listed: false });
    expect(tokenizer.specials[1]).toEqual({ id: 301, text: "<|x|>", special: false, listed: true });
    expect(tokenizer.specials.length).toBe(256);
    expect(tokenizer.encode("<|reserved_token_555|><|x|>")).toEqual([555, 301]);
  });
});

describe("the real files" + REAL, () => {
  test.skipIf(KIMI_DIR === undefined)("load with the spec's load line and vocabulary", () => {
    const tokenizer = loadTokenizer(KIMI_DIR as string);
    expect(tokenizer.loadLine).toBe("[TOK] 163584 ranks (max id 163839) + 16 added tokens | kimi=1 rankbpe=1");
    expect(tokenizer.vocabSize).toBe(163_840);
    expect(tokenizer.specialId("<|end_of_msg|>")).toBe(163586);
  });
});
