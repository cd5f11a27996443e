/**
 * docs/serving.md's JSON Schema keyword table is the table in
 * src/chat/schema-keywords.ts, row for row: the docs cannot promise a keyword the code
 * refuses, or leave out one it enforces.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { schemaKeywords } from "../../../src/chat/schema-keywords.ts";

test("the keyword table in docs/serving.md is the code's", () => {
  const doc = readFileSync(resolve(import.meta.dir, "../../../docs/serving.md"), "utf8");
  const block = doc.match(/<!-- schema-keywords begin -->\n([\s\S]*?)<!-- schema-keywords end -->/)?.[1];
  expect(block).toBeDefined();
  const rows = (block as string).trim().split("\n").slice(2);
  const expected = Object.entries(schemaKeywords).map(([k, e]) => `| \`${k}\` | ${e.support === "enforced" ? "yes" : "annotation"} | ${e.note} |`);
  expect(rows).toEqual(expected);
});
