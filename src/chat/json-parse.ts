/**
 * The chat side of the strict JSON reader (`src/json.ts`): request bodies keep every number's
 * lexeme, because JSON.parse forgets whether a number was written `1` or `1.0` and the prompt
 * shows the difference (chat.md 2.4), and a repeated key is read as Python's `json.loads` reads
 * it, the last value at the first key's place (chat.md 2.4). Bodies come from the network, so
 * depth and length are bounded and every failure names its line:column.
 */
import { inputLimits } from "../input-limits.ts";
import { parseJsonValue, type JsonReadOptions, type JsonValue } from "../json.ts";

export { JsonSyntaxError, MAX_INTEGER_DIGITS, type JsonErrorKind } from "../json.ts";

/** Nesting levels (arrays and objects); tool schemas use tens, not hundreds. */
export const MAX_JSON_DEPTH = inputLimits.jsonDepth;
/** Characters in one JSON text: a million-token conversation is a few MB. */
export const MAX_JSON_CHARS = inputLimits.requestBytes;

export type JsonParseOptions = Omit<JsonReadOptions, "duplicateKeys">;

/** Parses one JSON text of a chat request; throws JsonSyntaxError. */
export function parseJson(text: string, options: JsonParseOptions = {}): JsonValue {
  return parseJsonValue(text, { maxChars: MAX_JSON_CHARS, ...options, duplicateKeys: "last" });
}
