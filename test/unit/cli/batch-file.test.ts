/** `--batch FILE`'s lines (src/cli/batch-file.ts), hostile ones included: each refusal names the file and the line. */
import { describe, expect, test } from "bun:test";
import { maxBatchPrompts, parseBatchLines } from "../../../src/cli/batch-file.ts";
import { ExitCode, K3Error } from "../../../src/errors.ts";

const refusal = (text: string): string => {
  try {
    parseBatchLines(text, "p.txt");
  } catch (error) {
    expect(error).toBeInstanceOf(K3Error);
    expect((error as K3Error).exitCode).toBe(ExitCode.usage);
    return (error as Error).message;
  }
  throw new Error(`accepted: ${JSON.stringify(text)}`);
};

describe("--batch lines", () => {
  test("ids as --ids takes them, text as a JSON string; CRLF and a final newline are line ends", () => {
    expect(parseBatchLines('1,2,3\n4 5\n{"ids":[6,7]}\n"Once\\nupon \\u00e9"\r\n8', "p.txt")).toEqual([
      { kind: "ids", ids: [1, 2, 3] }, { kind: "ids", ids: [4, 5] }, { kind: "ids", ids: [6, 7] },
      { kind: "text", text: "Once\nupon é" }, { kind: "ids", ids: [8] },
    ]);
    expect(parseBatchLines("9\n", "p.txt")).toEqual([{ kind: "ids", ids: [9] }]);
  });

  test("every refusal names the file and the line", () => {
    const cases: [string, string][] = [
      ["", "--batch p.txt: no prompts (one per line)"],
      ["\n", "--batch p.txt: line 1: empty (every line is a prompt: ids, or text as a JSON string)"],
      ["1\n\n2", "--batch p.txt: line 2: empty (every line is a prompt: ids, or text as a JSON string)"],
      ["1\n   \t\n", "--batch p.txt: line 2: empty (every line is a prompt: ids, or text as a JSON string)"],
      ["1,x", '--batch p.txt: line 1: "x" is not a token id (ids are whole numbers >= 0)'],
      ["1\n-3", '--batch p.txt: line 2: "-3" is not a token id (ids are whole numbers >= 0)'],
      ["99999999999999999999", '--batch p.txt: line 1: token id "99999999999999999999" is out of range'],
      ['"unterminated', "--batch p.txt: line 1: text must be one JSON string (column 1: a string opened here is not closed)"],
      ['"a" "b"', "--batch p.txt: line 1: text must be one JSON string"],
      ['""', "--batch p.txt: line 1: the text is empty"],
      ['{"ids":[]}', "--batch p.txt: line 1: no prompt ids parsed"],
      ['{"ids":[1.5]}', '--batch p.txt: line 1: expected {"ids":[whole numbers >= 0]}'],
    ];
    for (const [text, message] of cases) expect([text, refusal(text)]).toEqual([text, expect.stringContaining(message)]);
  });

  test("a file of more prompts than allowed is refused by its count, before any line is read", () => {
    expect(refusal("1\n".repeat(maxBatchPrompts + 1))).toBe(`--batch p.txt: ${maxBatchPrompts + 1} lines; at most ${maxBatchPrompts} prompts per file`);
    expect(parseBatchLines("1\n".repeat(maxBatchPrompts), "p.txt")).toHaveLength(maxBatchPrompts);
  });
});
