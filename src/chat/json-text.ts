/**
 * Python's `json.dumps(value, ensure_ascii=False)` byte for byte (chat.md 2.4), in the two
 * separator styles prompts use: compact (`,` `:`) for tool declarations and schemas, default
 * (`, ` `: `) for tool-argument values. Numbers are written as Python writes the int or float
 * `json.loads` made of the request's lexeme, not as JavaScript would.
 */
import { isJsonArray, isJsonObject, type JsonNumber, type JsonValue } from "./json-value.ts";

export function dumpsCompact(value: JsonValue): string {
  return dump(value, ",", ":");
}

export function dumpsDefault(value: JsonValue): string {
  return dump(value, ", ", ": ");
}

function dump(value: JsonValue, itemSep: string, keySep: string): string {
  if (value === null) return "null";
  if (value === true) return "true";
  if (value === false) return "false";
  if (typeof value === "string") return pythonString(value);
  if (isJsonArray(value)) return `[${value.map((item) => dump(item, itemSep, keySep)).join(itemSep)}]`;
  if (isJsonObject(value)) {
    const members = [...value].map(([key, item]) => `${pythonString(key)}${keySep}${dump(item, itemSep, keySep)}`);
    return `{${members.join(itemSep)}}`;
  }
  return pythonNumber(value);
}

/** `"`, `\` and the C0 controls are escaped (`\u00XX` in lower case); everything else is raw. */
export function pythonString(text: string): string {
  let out = '"';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x20 && c !== 0x22 && c !== 0x5c) continue;
    out += text.slice(from, i) + escapeOf(c);
    from = i + 1;
  }
  return `${out}${text.slice(from)}"`;
}

function escapeOf(code: number): string {
  switch (code) {
    case 0x22: return '\\"';
    case 0x5c: return "\\\\";
    case 0x0a: return "\\n";
    case 0x0d: return "\\r";
    case 0x09: return "\\t";
    case 0x08: return "\\b";
    case 0x0c: return "\\f";
    default: return `\\u${code.toString(16).padStart(4, "0")}`;
  }
}

/** An int lexeme as Python's `str(int(...))`; anything else as `repr(float(...))`. */
export function pythonNumber(number: JsonNumber): string {
  if (number.isInteger) {
    // JSON forbids leading zeros, so the lexeme is canonical except for the sign of zero.
    return /^-0+$/.test(number.lexeme) ? "0" : number.lexeme;
  }
  return pythonFloat(number.value);
}

/**
 * `repr(x)` of a Python float: the shortest digits that read back as `x` (JavaScript finds the
 * same ones), fixed notation with at least one fractional digit when the decimal exponent is in
 * [-4, 16), else `d.ddde±XX`; json.dumps spells the non-finite values `NaN`, `Infinity`.
 */
export function pythonFloat(x: number): string {
  if (Number.isNaN(x)) return "NaN";
  if (x === Number.POSITIVE_INFINITY) return "Infinity";
  if (x === Number.NEGATIVE_INFINITY) return "-Infinity";
  const sign = x < 0 || Object.is(x, -0) ? "-" : "";
  const [mantissa = "0", exponentText = "0"] = Math.abs(x).toExponential().split("e");
  const digits = mantissa.replace(".", "");
  const exponent = Number(exponentText);
  if (exponent >= -4 && exponent < 16) {
    const point = exponent + 1;
    if (point <= 0) return `${sign}0.${"0".repeat(-point)}${digits}`;
    if (point >= digits.length) return `${sign}${digits}${"0".repeat(point - digits.length)}.0`;
    return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
  }
  const fraction = digits.length > 1 ? `.${digits.slice(1)}` : "";
  const magnitude = String(Math.abs(exponent)).padStart(2, "0");
  return `${sign}${digits[0]}${fraction}e${exponent < 0 ? "-" : "+"}${magnitude}`;
}
