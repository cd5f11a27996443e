/**
 * JSON values as the chat renderer holds them. Python renders the request's numbers by their
 * kind and digits (chat.md 2.4: `1.0` stays `1.0`), so a number keeps the lexeme it was written
 * with; objects are Maps so key order is the request's and a repeated key keeps its first
 * position with its last value, as a Python dict built by `json.loads` does.
 */
import { fieldError } from "../errors.ts";
import { JsonNumber, type JsonArray, type JsonObject, type JsonValue } from "../json.ts";

export { JsonNumber, type JsonArray, type JsonObject, type JsonValue } from "../json.ts";

export function isJsonObject(value: JsonValue | undefined): value is JsonObject {
  return value instanceof Map;
}

export function isJsonArray(value: JsonValue | undefined): value is JsonArray {
  return Array.isArray(value);
}

/**
 * Python's `str` ordering: by code point. JavaScript's `<` compares UTF-16 units, which puts
 * U+E000..U+FFFF after the surrogate-encoded characters above U+FFFF.
 */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && x <= 0xdfff && (y < 0xd800 || y >= 0xe000)) return y >= 0xe000 ? 1 : x - y;
    if (y >= 0xd800 && y <= 0xdfff && (x < 0xd800 || x >= 0xe000)) return x >= 0xe000 ? -1 : x - y;
    return x - y;
  }
  return a.length - b.length;
}

/** Every object's keys sorted by code point, recursively; arrays keep their order (chat.md 2.3). */
export function sortKeysDeep(value: JsonValue): JsonValue {
  if (isJsonArray(value)) return value.map(sortKeysDeep);
  if (isJsonObject(value)) {
    const keys = [...value.keys()].sort(compareCodePoints);
    return new Map(keys.map((key) => [key, sortKeysDeep(value.get(key) as JsonValue)]));
  }
  return value;
}

/**
 * A value already parsed: a JsonValue passes through; plain JavaScript data (a server that used
 * JSON.parse) has lost its number lexemes, so a whole number reads as an int and `1.0` renders
 * as `1`. Text through `parseJson` is faithful.
 */
export function fromPlainValue(value: unknown, path = "request"): JsonValue {
  if (value === null || typeof value === "boolean" || value instanceof JsonNumber) return value;
  if (typeof value === "string") {
    if (!value.isWellFormed()) throw fieldError(path, "a string with a lone surrogate (not a Unicode character)");
    return value;
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw fieldError(path, `${value} is not a JSON number`);
    return new JsonNumber(Number.isInteger(value) && Math.abs(value) < 1e21 ? BigInt(value).toString() : String(value));
  }
  if (Array.isArray(value)) return value.map((item, i) => fromPlainValue(item, `${path}[${i}]`));
  if (value instanceof Map) {
    return new Map([...value].map(([key, item]) => [String(key), fromPlainValue(item, `${path}.${String(key)}`)]));
  }
  if (typeof value === "object") {
    return new Map(Object.entries(value).map(([key, item]) => [key, fromPlainValue(item, `${path}.${key}`)]));
  }
  throw fieldError(path, `a ${typeof value} is not a JSON value`);
}
