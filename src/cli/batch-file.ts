/**
 * `--batch FILE`: one prompt per line, for shell pipelines. A line is either ids, written as
 * `--ids` takes them (`1,2,3`, `1 2 3`, or the `{"ids":[...]}` that `k3 tokenize --json`
 * prints), or text as a JSON string (`"Once upon a time\n"`, escapes allowed), tokenized with
 * --tok. Every line is a prompt (a blank one is refused, naming it); a final newline ends the
 * last line. A pure function of the text, so hostile files are tested and fuzzed directly.
 */
import { excerpt, usageError } from "../errors.ts";
import { JsonSyntaxError, parseJsonData } from "../json.ts";
import { parseIdsText } from "./prompt.ts";

export type BatchLine = { kind: "ids"; ids: number[] } | { kind: "text"; text: string };

/** The most prompts one file may hold: each becomes a sequence state when its turn comes. */
export const maxBatchPrompts = 65_536;

export function parseBatchLines(text: string, path: string): BatchLine[] {
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop(); // the final newline ends the last line
  if (lines.length === 0) throw usageError(`--batch ${path}: no prompts (one per line)`);
  if (lines.length > maxBatchPrompts) throw usageError(`--batch ${path}: ${lines.length} lines; at most ${maxBatchPrompts} prompts per file`);
  return lines.map((raw, i) => {
    const where = `--batch ${path}: line ${i + 1}`;
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") throw usageError(`${where}: empty (every line is a prompt: ids, or text as a JSON string)`);
    if (!line.trimStart().startsWith('"')) return { kind: "ids", ids: parseIdsText(line, where) };
    let value: unknown;
    try {
      value = parseJsonData(line);
    } catch (error) {
      if (error instanceof JsonSyntaxError) throw usageError(`${where}: text must be one JSON string (column ${error.column}: ${error.reason})`);
      throw error;
    }
    if (typeof value !== "string") throw usageError(`${where}: text must be one JSON string, got ${excerpt(line)}`);
    if (value === "") throw usageError(`${where}: the text is empty`);
    return { kind: "text", text: value };
  });
}
