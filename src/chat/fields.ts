/**
 * Typed access to request fields, each refusal one line naming the field by its path
 * (`messages[2].role: ...`), a usage error (exit 2, HTTP 400). Values the client sent are quoted
 * and shortened so a hostile value cannot make the message long or break it over lines.
 */
import { excerpt, fieldError, type K3Error } from "../errors.ts";
import { isJsonArray, isJsonObject, JsonNumber, type JsonArray, type JsonObject, type JsonValue } from "./json-value.ts";

export function refuse(path: string, reason: string): K3Error {
  return fieldError(path, reason);
}

/** A client's string as it appears in a message: JSON-quoted, at most 40 code points. */
export const quote = excerpt;

export function typeName(value: JsonValue): string {
  if (value === null) return "null";
  if (typeof value === "boolean") return "a boolean";
  if (typeof value === "string") return "a string";
  if (value instanceof JsonNumber) return "a number";
  return isJsonArray(value) ? "an array" : "an object";
}

/** The fields of one JSON object at `path`. Null reads as absent, as OpenAI clients send it. */
export class Fields {
  readonly map: JsonObject;
  readonly path: string;

  constructor(map: JsonObject, path: string) {
    this.map = map;
    this.path = path;
  }

  at(key: string): string {
    return this.path === "" ? key : `${this.path}.${key}`;
  }

  has(key: string): boolean {
    const value = this.map.get(key);
    return value !== undefined && value !== null;
  }

  /** The value, or undefined when absent or null. */
  value(key: string): JsonValue | undefined {
    const value = this.map.get(key);
    return value === null ? undefined : value;
  }

  string(key: string): string | undefined {
    const value = this.value(key);
    if (value === undefined || typeof value === "string") return value;
    throw refuse(this.at(key), `expected a string, got ${typeName(value)}`);
  }

  requiredString(key: string, what: string): string {
    const value = this.string(key);
    if (value === undefined) throw refuse(this.at(key), `missing (${what})`);
    return value;
  }

  boolean(key: string): boolean | undefined {
    const value = this.value(key);
    if (value === undefined || typeof value === "boolean") return value;
    throw refuse(this.at(key), `expected true or false, got ${typeName(value)}`);
  }

  /** A finite number in [min, max] (or (min, max] when `aboveMin`); an unbounded side is Infinity. */
  number(key: string, min: number, max: number, aboveMin = false): number | undefined {
    const value = this.value(key);
    if (value === undefined) return undefined;
    if (!(value instanceof JsonNumber)) throw refuse(this.at(key), `expected a number, got ${typeName(value)}`);
    const x = value.value;
    if (!Number.isFinite(x) || (aboveMin ? x <= min : x < min) || x > max) {
      throw refuse(this.at(key), `${value.lexeme} is out of range (${rangeText(min, max, aboveMin)})`);
    }
    return x;
  }

  /** A whole number in [min, max] (`2.0` counts as whole). */
  integer(key: string, min: number, max: number): number | undefined {
    const x = this.number(key, min, max);
    if (x === undefined || Number.isSafeInteger(x)) return x;
    const lexeme = (this.value(key) as JsonNumber).lexeme;
    throw refuse(this.at(key), Number.isInteger(x) ? `${lexeme} is too large (at most 2^53 - 1 in size)` : `expected a whole number, got ${lexeme}`);
  }

  object(key: string): Fields | undefined {
    const value = this.value(key);
    if (value === undefined) return undefined;
    if (!isJsonObject(value)) throw refuse(this.at(key), `expected an object, got ${typeName(value)}`);
    return new Fields(value, this.at(key));
  }

  array(key: string): JsonArray | undefined {
    const value = this.value(key);
    if (value === undefined || isJsonArray(value)) return value;
    throw refuse(this.at(key), `expected an array, got ${typeName(value)}`);
  }
}

function rangeText(min: number, max: number, aboveMin: boolean): string {
  const low = min === Number.NEGATIVE_INFINITY ? "" : `${aboveMin ? ">" : ">="} ${min}`;
  const high = max === Number.POSITIVE_INFINITY ? "" : `<= ${max}`;
  return [low, high].filter((part) => part !== "").join(" and ") || "any number";
}

/** Item `i` of an array at `path` as Fields, or a refusal if it is not an object. */
export function itemFields(items: JsonArray, i: number, path: string, what: string): Fields {
  const item = items[i] as JsonValue;
  const at = `${path}[${i}]`;
  if (!isJsonObject(item)) throw refuse(at, `expected ${what} object, got ${typeName(item)}`);
  return new Fields(item, at);
}
