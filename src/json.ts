/**
 * The one strict JSON reader (RFC 8259) every layer uses, for files (config.json, shard headers,
 * trunk.json, tokenizer_config.json) and for chat requests. Strict where JSON.parse is lenient:
 * a key given twice in one object is refused, compared after unescaping (`"a"` and `"\u0061"` are
 * the same key), nesting depth and text length are bounded, and every failure names its
 * line:column. Chat requests keep Python's reading of a repeated key instead (`duplicateKeys:
 * "last"`, chat.md 2.4), and their numbers keep the lexeme they were written with.
 *
 * Two readers share these rules. `parseJsonValue` keeps number lexemes (JsonNumber) and key
 * order (Maps), for the chat renderer. `parseJsonData` gives JSON.parse's plain values: it runs
 * JSON.parse (native speed; shard headers of the released model are 76 MB) after one structural
 * scan that bounds the depth and counts the object members, so a key JSON.parse collapsed shows
 * as a member too few; only then, or when JSON.parse refuses, the strict reader runs to say where.
 * (A lone surrogate escape, which JSON.parse keeps, is kept there too.)
 */
import { excerpt } from "./errors.ts";
import { inputLimits } from "./input-limits.ts";

/** Python's json refuses longer integers (its default int-to-string limit), so the reference could not render one. */
export const MAX_INTEGER_DIGITS = 4300;

/** A number as written in the JSON text, or one of Python's `NaN`, `Infinity`, `-Infinity`. */
export class JsonNumber {
  readonly lexeme: string;

  constructor(lexeme: string) {
    this.lexeme = lexeme;
  }

  /** Python's `json` reads a number with no fraction and no exponent as an int, others as float. */
  get isInteger(): boolean {
    return /^-?\d+$/.test(this.lexeme);
  }

  /** The nearest double (what Python's float holds; an int lexeme may exceed it). */
  get value(): number {
    return this.lexeme === "NaN" ? Number.NaN : Number(this.lexeme);
  }
}

export type JsonArray = readonly JsonValue[];
export type JsonObject = ReadonlyMap<string, JsonValue>;
export type JsonValue = null | boolean | string | JsonNumber | JsonArray | JsonObject;

export interface JsonReadOptions {
  /** Also read `NaN`, `Infinity`, `-Infinity`, as Python's `json.loads` does (tool-call arguments). */
  readonly pythonConstants?: boolean;
  /** Nesting levels (arrays and objects); default `inputLimits.jsonDepth`. */
  readonly maxDepth?: number;
  /** Characters of text; default unbounded (callers bound the bytes they read). */
  readonly maxChars?: number;
  /**
   * "refuse" (the default): a key twice in one object is an error. "last": the last value wins
   * at the first key's position, as in a Python dict built by `json.loads` (chat requests).
   */
  readonly duplicateKeys?: "refuse" | "last";
}

/** `syntax`: not JSON; `limit`: beyond a bound above; `unicode`: a lone surrogate; `duplicate`: a key twice. */
export type JsonErrorKind = "syntax" | "limit" | "unicode" | "duplicate";

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

/**
 * The error as a file reader's message says it: "not valid JSON (3:8: ...)" for text that is not
 * JSON, "3:8: the key ... appears twice ..." for JSON k3 refuses (a duplicate, a limit).
 */
export function jsonRefusal(error: JsonSyntaxError): string {
  return error.kind === "syntax" || error.kind === "unicode" ? `not valid JSON (${error.message})` : error.message;
}

/** 1-based line and column of `offset` in `text`. */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  let line = 1;
  let lineStart = 0;
  for (let i = text.indexOf("\n"); i >= 0 && i < offset; i = text.indexOf("\n", i + 1)) {
    line++;
    lineStart = i + 1;
  }
  return { line, column: offset - lineStart + 1 };
}

/** Parses one JSON text keeping number lexemes and key order; throws JsonSyntaxError. */
export function parseJsonValue(text: string, options: JsonReadOptions = {}): JsonValue {
  return new Reader(text, options).document();
}

/**
 * Parses one JSON text into plain values (objects, arrays, doubles), as JSON.parse does, with the
 * strict rules above; throws JsonSyntaxError.
 */
export function parseJsonData(text: string, options: Omit<JsonReadOptions, "pythonConstants"> = {}): unknown {
  const strict = (): never => {
    new Reader(text, options, true).document();
    // The strict reader accepted what the fast path refused: name it rather than guess.
    throw new JsonSyntaxError("syntax", text, 0, "not read the same by both JSON readers");
  };
  checkLength(text, options.maxChars);
  const shape = scan(text);
  if (shape === undefined || shape.depth > (options.maxDepth ?? inputLimits.jsonDepth)) return strict();
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return strict();
  }
  if (options.duplicateKeys !== "last" && memberCount(value) !== shape.members) return strict();
  return value;
}

function checkLength(text: string, maxChars: number | undefined): void {
  if (maxChars !== undefined && text.length > maxChars) {
    throw new JsonSyntaxError("limit", text, 0, `the text is ${text.length} characters, more than the ${maxChars} allowed`);
  }
}

/**
 * One pass over the structure: the deepest nesting and the object members (a ':' outside a
 * string is one member). Undefined when a string is not closed.
 */
function scan(text: string): { depth: number; members: number } | undefined {
  let members = 0;
  let depth = 0;
  let deepest = 0;
  const n = text.length;
  for (let p = 0; p < n; p++) {
    const c = text.charCodeAt(p);
    if (c === 0x22) {
      let q = text.indexOf('"', p + 1);
      for (;;) {
        if (q < 0) return undefined;
        let backslashes = 0;
        while (text.charCodeAt(q - 1 - backslashes) === 0x5c) backslashes++;
        if (backslashes % 2 === 0) break;
        q = text.indexOf('"', q + 1);
      }
      p = q;
    } else if (c === 0x3a) {
      members++;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return { depth: deepest, members };
}

/** Keys of every object in a parsed value; iterative, so no depth can exhaust the stack. */
function memberCount(value: unknown): number {
  let members = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item !== "object" || item === null) continue;
    if (Array.isArray(item)) {
      for (const element of item) if (typeof element === "object" && element !== null) stack.push(element);
      continue;
    }
    for (const key of Object.keys(item)) {
      members++;
      const element = (item as Record<string, unknown>)[key];
      if (typeof element === "object" && element !== null) stack.push(element);
    }
  }
  return members;
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
  private readonly refuseDuplicates: boolean;

  constructor(
    private readonly text: string,
    private readonly options: JsonReadOptions,
    /** Read a lone surrogate as JSON.parse does (parseJsonData), so both readers agree. */
    private readonly loneSurrogates = false,
  ) {
    this.maxDepth = options.maxDepth ?? inputLimits.jsonDepth;
    this.refuseDuplicates = options.duplicateKeys !== "last";
  }

  document(): JsonValue {
    checkLength(this.text, this.options.maxChars);
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
      const keyAt = this.p;
      const key = this.string();
      if (this.refuseDuplicates && map.has(key)) this.fail("duplicate", `the key ${excerpt(key)} appears twice in one object`, keyAt);
      this.skipSpace();
      if (this.text[this.p] !== ":") this.fail("syntax", `expected ':' after an object key, found ${describe(this.text, this.p)}`);
      this.p++;
      this.skipSpace();
      // With duplicateKeys "last", a repeated key keeps its first position and takes the last value.
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
        const paired = c < 0xdc00 && next >= 0xdc00 && next <= 0xdfff;
        if (!paired && !this.loneSurrogates) this.fail("unicode", "a lone surrogate in a string (not a Unicode character)");
        this.p += paired ? 2 : 1;
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
    if (this.loneSurrogates) return String.fromCharCode(unit);
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
