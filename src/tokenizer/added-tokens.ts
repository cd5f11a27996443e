/**
 * Reads the special tokens from `tokenizer_config.json` (runtime.md 10.1, chat.md 1.1).
 *
 * Only `added_tokens_decoder` is read: keys are decimal ids, values `{"content", "special", ...}`.
 * The 256 ids after the ranks are reserved for special tokens (byte-level rule 3: an added
 * token's id is rank count + its index, never a position in some merged table). Ids the file
 * does not list are named `<|reserved_token_<id>|>`, as the released Python tokenizer names
 * them, so every id in the vocabulary decodes to something visible and can be typed back.
 * Strict: anything else in that object is a K3Error (exit 1) naming the file and line, and so is
 * a key given twice anywhere in the file, however it is spelled (`"300"` and `"\u0033\u0030\u0030"`
 * are one id: the strict reader compares keys after unescaping).
 */
import { excerpt, runtimeError } from "../errors.ts";
import { JsonSyntaxError, lineColumn, parseJsonData } from "../json.ts";

/** How many ids follow the ranks for special tokens (163,584..163,839 for Kimi). */
export const SPECIAL_ID_COUNT = 256;

export interface SpecialToken {
  readonly id: number;
  /** The literal text: encoded to this id in raw-prompt mode, emitted for it when decoding. */
  readonly text: string;
  /** The file's `special` flag (false for `<|open|>`, `<|close|>`, `<|sep|>`); k3 decodes by id. */
  readonly special: boolean;
  /** True if `tokenizer_config.json` lists the id; false for a `<|reserved_token_<id>|>` name. */
  readonly listed: boolean;
}

/** Name the released Python tokenizer gives a reserved id the file does not list. */
export function reservedTokenText(id: number): string {
  return `<|reserved_token_${id}|>`;
}

/**
 * Parses `tokenizer_config.json` text for a table of `rankCount` ranks: returns all 256 special
 * tokens, ordered by id (index i is id rankCount + i).
 */
export function parseAddedTokens(text: string, file: string, rankCount: number): SpecialToken[] {
  let root: unknown;
  try {
    root = parseJsonData(text);
  } catch (error) {
    if (!(error instanceof JsonSyntaxError)) throw error;
    throw runtimeError(`${file}:${error.line}:${error.column}: ${error.kind === "syntax" || error.kind === "unicode" ? `not valid JSON (${error.reason})` : error.reason}`);
  }
  if (!isObject(root)) throw runtimeError(`${file}:1: expected a JSON object at the top level`);
  const decoder = root.added_tokens_decoder;
  if (decoder === undefined) {
    throw runtimeError(`${file}: no "added_tokens_decoder" object (the special tokens and their ids are read from it)`);
  }
  if (!isObject(decoder)) throw runtimeError(`${file}:${lineOfKey(text, "added_tokens_decoder")}: "added_tokens_decoder" is not an object`);

  const firstId = rankCount;
  const lastId = rankCount + SPECIAL_ID_COUNT - 1;
  const listed = new Map<number, SpecialToken>();
  for (const [key, entry] of Object.entries(decoder)) {
    const where = `${file}:${lineOfKey(text, key)}`;
    if (!/^(0|[1-9]\d*)$/.test(key)) throw runtimeError(`${where}: added token key ${excerpt(key)} is not a decimal id`);
    const id = Number(key);
    if (id < firstId || id > lastId) {
      throw runtimeError(`${where}: added token id ${id} is outside the special ids ${firstId}..${lastId} (they follow the ${rankCount} ranks)`);
    }
    if (!isObject(entry)) throw runtimeError(`${where}: added token ${id} is not an object`);
    const content = entry.content;
    if (typeof content !== "string" || content.length === 0) {
      throw runtimeError(`${where}: added token ${id} has no "content" text`);
    }
    const special = entry.special;
    if (typeof special !== "boolean") throw runtimeError(`${where}: added token ${id} has no boolean "special" flag`);
    listed.set(id, { id, text: content, special, listed: true });
  }

  const tokens: SpecialToken[] = [];
  const idOfText = new Map<string, number>();
  for (let id = firstId; id <= lastId; id++) {
    const token = listed.get(id) ?? { id, text: reservedTokenText(id), special: true, listed: false };
    const other = idOfText.get(token.text);
    if (other !== undefined) {
      // Name the line of a listed entry: a reserved name has no line of its own.
      const lineId = token.listed ? id : other;
      throw runtimeError(`${file}:${lineOfKey(text, String(lineId))}: added tokens ${other} and ${id} have the same content ${excerpt(token.text)}`);
    }
    idOfText.set(token.text, id);
    tokens.push(token);
  }
  return tokens;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The JSON key `"key":` as a pattern (keys here are ids or plain names, escaped anyway). */
function keyPattern(key: string, flags: string): RegExp {
  return new RegExp(`"${key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}"\\s*:`, flags);
}

/** Line of the first `"key":` in the text (1 if not found, which a parsed key cannot be). */
function lineOfKey(text: string, key: string): number {
  const match = keyPattern(key, "").exec(text);
  return match === null ? 1 : lineColumn(text, match.index).line;
}

