/**
 * A strict JSON reader (RFC 8259) for request bodies that keeps every number's lexeme
 * (`json-value.ts`), because JSON.parse forgets whether a number was written `1` or `1.0` and the
 * prompt shows the difference (chat.md 2.4). Bodies come from the network, so it is bounded:
 * nesting depth, text length and integer digits have limits, and every failure names its
 * line:column.
 */
import { lineColumn } from "../tokenizer/json-location.ts";
import { JsonNumber, type JsonValue } from "./json-value.ts";

/** Nesting levels (arrays and objects); tool schemas use tens, not hundreds. */
export const MAX_JSON_DEPTH = 256;
/** Characters in one JSON text: a million-token conversation is a few MB. */
export const MAX_JSON_CHARS = 64 * 1024 * 1024;
/** Python's json refuses longer integers (its default int-to-string limit), so the reference could not render one. */
export const MAX_INTEGER_DIGITS = 4300;

export interface JsonParseOptions {
  /** Also read `NaN`, `Infinity`, `-Infinity`, as Python's `json.loads` does (tool-call arguments). */
  readonly pythonConstants?: boolean;
  readonly maxDepth?: number;
  readonly maxChars?: number;
}

/** `syntax`: not JSON; `limit`: JSON beyond a bound above; `unicode`: a lone surrogate. */
export type JsonErrorKind = "syntax" | "limit" | "unicode";

export class JsonSyntaxError extends Error {
  readonly kind: JsonErrorKind;
  readonly line: number;
  readonly column: number;
  readonly reason: string;

  constructor(kind: JsonErrorKind, text: string, offset: number, reason: string) {
    const { line, column } = lineColumn(text, offset);
    super(`${line}:${column}: ${reason}`);
    this.name = "JsonSyntaxError";
    this.kind = kind;
    this.line = line;
    this.column = column;
    this.reason = reason;
  }
}

/** Parses one JSON text; throws JsonSyntaxError. */
export function parseJson(text: string, options: JsonParseOptions = {}): JsonValue {
  return new Reader(text, options).document();
}

const escapes: Readonly<Record<string, string>> = { '"': '"', "\\": "\\", "/": "/", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t" };

/** How a character is named in an error: visible, and never a raw line break. */
function describe(text: string, at: number): string {
  if (at >= text.length) return "the end of the text";
  const code = text.codePointAt(at) as number;
  if (code < 0x20 || code === 0x7f || (code >= 0xd800 && code <= 0xdfff)) return `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  return JSON.stringify(String.fromCodePoint(code));
}

class Reader {
  private p = 0;
  private depth = 0;
  private readonly maxDepth: number;

  constructor(
    private readonly text: string,
    private readonly options: JsonParseOptions,
  ) {
    this.maxDepth = options.maxDepth ?? MAX_JSON_DEPTH;
  }

  document(): JsonValue {
    const max = this.options.maxChars ?? MAX_JSON_CHARS;
    if (this.text.length > max) this.fail("limit", `the text is ${this.text.length} characters, more than the ${max} allowed`, 0);
    if (this.text.charCodeAt(0) === 0xfeff) this.fail("syntax", "a byte order mark (U+FEFF) before the JSON value", 0);
    this.skipSpace();
    if (this.p >= this.text.length) this.fail("syntax", "no JSON value (the text is empty)");
    const value = this.value();
    this.skipSpace();
    if (this.p < this.text.length) this.fail("syntax", `unexpected ${describe(this.text, this.p)} after the JSON value`);
    return value;
  }

  private fail(kind: JsonErrorKind, reason: string, at = this.p): never {
    throw new JsonSyntaxError(kind, this.text, at, reason);
  }

  private skipSpace(): void {
    const t = this.text;
    for (;;) {
      const c = t.charCodeAt(this.p);
      if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) this.p++;
      else return;
    }
  }

  private value(): JsonValue {
    const t = this.text;
    const c = t[this.p];
    if (c === "{") return this.object();
    if (c === "[") return this.array();
    if (c === '"') return this.string();
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) return this.number();
    for (const [word, value] of [["true", true], ["false", false], ["null", null]] as const) {
      if (t.startsWith(word, this.p)) {
        this.p += word.length;
        return value;
      }
    }
    if (this.options.pythonConstants) {
      for (const word of ["NaN", "Infinity"]) {
        if (t.startsWith(word, this.p)) {
          this.p += word.length;
          return new JsonNumber(word);
        }
      }
    }
    return this.fail("syntax", `expected a JSON value, found ${describe(t, this.p)}`);
  }

  private enter(): void {
    if (++this.depth > this.maxDepth) this.fail("limit", `nested deeper than ${this.maxDepth} levels`);
  }

  private object(): JsonValue {
    this.enter();
    const open = this.p++;
    const map = new Map<string, JsonValue>();
    this.skipSpace();
    if (this.text[this.p] === "}") {
      this.p++;
      this.depth--;
      return map;
    }
    for (;;) {
      if (this.p >= this.text.length) this.fail("syntax", "an object opened here is not closed", open);
      if (this.text[this.p] !== '"') this.fail("syntax", `expected a string key, found ${describe(this.text, this.p)}`);
      const key = this.string();
      this.skipSpace();
      if (this.text[this.p] !== ":") this.fail("syntax", `expected ':' after an object key, found ${describe(this.text, this.p)}`);
      this.p++;
      this.skipSpace();
      // A repeated key keeps its first position and takes the last value, as a Python dict does.
      map.set(key, this.value());
      this.skipSpace();
      const c = this.text[this.p];
      if (c === "}") break;
      if (c !== ",") {
        if (this.p >= this.text.length) this.fail("syntax", "an object opened here is not closed", open);
        this.fail("syntax", `expected ',' or '}' in an object, found ${describe(this.text, this.p)}`);
      }
      this.p++;
      this.skipSpace();
    }
    this.p++;
    this.depth--;
    return map;
  }

  private array(): JsonValue {
    this.enter();
    const open = this.p++;
    const items: JsonValue[] = [];
    this.skipSpace();
    if (this.text[this.p] === "]") {
      this.p++;
      this.depth--;
      return items;
    }
    for (;;) {
      if (this.p >= this.text.length) this.fail("syntax", "an array opened here is not closed", open);
      items.push(this.value());
      this.skipSpace();
      const c = this.text[this.p];
      if (c === "]") break;
      if (c !== ",") {
        if (this.p >= this.text.length) this.fail("syntax", "an array opened here is not closed", open);
        this.fail("syntax", `expected ',' or ']' in an array, found ${describe(this.text, this.p)}`);
      }
      this.p++;
      this.skipSpace();
    }
    this.p++;
    this.depth--;
    return items;
  }

  private number(): JsonValue {
    const t = this.text;
    const start = this.p;
    if (t[this.p] === "-") this.p++;
    if (this.options.pythonConstants && t.startsWith("Infinity", this.p)) {
      this.p += "Infinity".length;
      return new JsonNumber(t.slice(start, this.p));
    }
    const intStart = this.p;
    if (t[this.p] === "0") {
      this.p++;
      if (isDigit(t, this.p)) this.fail("syntax", "a number with a leading zero");
    } else if (isDigit(t, this.p)) {
      while (isDigit(t, this.p)) this.p++;
    } else {
      this.fail("syntax", `expected a digit, found ${describe(t, this.p)}`);
    }
    const intDigits = this.p - intStart;
    let integer = true;
    if (t[this.p] === ".") {
      integer = false;
      this.p++;
      if (!isDigit(t, this.p)) this.fail("syntax", `expected a digit after '.', found ${describe(t, this.p)}`);
      while (isDigit(t, this.p)) this.p++;
    }
    if (t[this.p] === "e" || t[this.p] === "E") {
      integer = false;
      this.p++;
      if (t[this.p] === "+" || t[this.p] === "-") this.p++;
      if (!isDigit(t, this.p)) this.fail("syntax", `expected a digit in the exponent, found ${describe(t, this.p)}`);
      while (isDigit(t, this.p)) this.p++;
    }
    if (integer && intDigits > MAX_INTEGER_DIGITS) {
      this.fail("limit", `an integer of ${intDigits} digits (at most ${MAX_INTEGER_DIGITS}, as in Python)`, start);
    }
    return new JsonNumber(t.slice(start, this.p));
  }

  private string(): string {
    const t = this.text;
    const open = this.p++;
    let out = "";
    let from = this.p;
    for (;;) {
      if (this.p >= t.length) this.fail("syntax", "a string opened here is not closed", open);
      const c = t.charCodeAt(this.p);
      if (c === 0x22) {
        out += t.slice(from, this.p);
        this.p++;
        return out;
      }
      if (c === 0x5c) {
        out += t.slice(from, this.p);
        out += this.escape();
        from = this.p;
      } else if (c < 0x20) {
        this.fail("syntax", `a raw control character ${describe(t, this.p)} in a string (write it as an escape)`);
      } else if (c >= 0xd800 && c <= 0xdfff) {
        const next = t.charCodeAt(this.p + 1);
        if (c >= 0xdc00 || !(next >= 0xdc00 && next <= 0xdfff)) this.fail("unicode", "a lone surrogate in a string (not a Unicode character)");
        this.p += 2;
      } else {
        this.p++;
      }
    }
  }

  /** The escape at `p` (a backslash); moves past it. */
  private escape(): string {
    const t = this.text;
    const at = this.p;
    const letter = t[at + 1];
    if (letter !== "u") {
      const plain = letter === undefined ? undefined : escapes[letter];
      if (plain === undefined) this.fail("syntax", `an invalid escape \\${letter === undefined ? "" : describe(t, at + 1)}`);
      this.p += 2;
      return plain;
    }
    const unit = this.hex4(at);
    this.p = at + 6;
    if (unit >= 0xdc00 && unit <= 0xdfff) this.fail("unicode", `\\u${t.slice(at + 2, at + 6)} is a lone surrogate (not a Unicode character)`, at);
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const low = t[this.p] === "\\" && t[this.p + 1] === "u" ? this.hex4(this.p) : -1;
      if (!(low >= 0xdc00 && low <= 0xdfff)) this.fail("unicode", `\\u${t.slice(at + 2, at + 6)} is a lone surrogate (not a Unicode character)`, at);
      this.p += 6;
      return String.fromCharCode(unit, low);
    }
    return String.fromCharCode(unit);
  }

  private hex4(at: number): number {
    const digits = this.text.slice(at + 2, at + 6);
    if (!/^[0-9a-fA-F]{4}$/.test(digits)) this.fail("syntax", "\\u must be followed by four hex digits", at);
    return Number.parseInt(digits, 16);
  }
}

function isDigit(text: string, at: number): boolean {
  const c = text.charCodeAt(at);
  return c >= 0x30 && c <= 0x39;
}
