/**
 * Deterministic mutations of valid inputs. Every input of a run is derived from (run seed,
 * target, index) alone, so any one of them can be made again (`--index`) without the others.
 * Mutators know the shapes k3's inputs have: JSON text (numbers, strings, keys, nesting), lines
 * (the rank file), raw bytes (shards, trunk.bin, traces) and argv tokens.
 */

/** mulberry32: a small, fast, well-mixed 32-bit generator. */
export class Rng {
  #state: number;

  constructor(seed: number) {
    this.#state = seed >>> 0;
  }

  /** Uniform in [0, 2^32). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }

  /** Uniform in [0, n). */
  below(n: number): number {
    return n <= 0 ? 0 : this.next() % n;
  }

  chance(p: number): boolean {
    return this.next() / 0x1_0000_0000 < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[this.below(items.length)] as T;
  }
}

/** The generator of one input: a hash of the run seed, the target and the input's index. */
export function inputRng(seed: number, target: string, index: number): Rng {
  return new Rng(Number(Bun.hash.wyhash(`${seed}/${target}/${index}`, 0n) & 0xffff_ffffn));
}

/** Numbers that sit on the edges parsers get wrong: zero, signs, powers of two, float limits. */
export const edgeNumbers = [
  "0", "-0", "1", "-1", "2", "3", "7", "8", "13", "16", "31", "32", "255", "256", "4095", "4096", "4097", "65535", "65536",
  "2147483647", "2147483648", "4294967295", "4294967296", "9007199254740991", "9007199254740993", "18446744073709551616",
  "1e6", "1e9", "1e308", "-1e308", "1e400", "-1e400", "1e-400", "5e-324", "0.5", "-0.5", "1.0", "1.5", "0.0001",
  "123456789012345678901234567890", "1E2", "-2147483649",
];

/** Values that replace a JSON value: other types, empties, nesting at and past the depth limit. */
function edgeValues(rng: Rng): string {
  const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;
  switch (rng.below(12)) {
    case 0: return "null";
    case 1: return rng.chance(0.5) ? "true" : "false";
    case 2: return "[]";
    case 3: return "{}";
    case 4: return '""';
    case 5: return `"${rng.pick(edgeNumbers)}"`;
    case 6: return nested(rng.pick([1, 255, 256, 257, 100_000]));
    case 7: return `${'{"a":'.repeat(300)}1${"}".repeat(300)}`;
    case 8: return `"${"x".repeat(rng.pick([1, 100, 100_000]))}"`;
    case 9: return "[1, 2, 3]";
    case 10: return `{"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}`;
    default: return rng.pick(edgeNumbers);
  }
}

const numberPattern = /-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?/g;
const stringPattern = /"(?:[^"\\\n]|\\.)*"/g;

function replaceAt(text: string, at: number, length: number, replacement: string): string {
  return text.slice(0, at) + replacement + text.slice(at + length);
}

/** A string literal's content with one character written as a \u escape: the same string, spelled otherwise. */
function respell(literal: string, rng: Rng): string {
  const inner = literal.slice(1, -1);
  const plain = [...inner.matchAll(/[^\\]/g)].filter((m) => m.index === 0 || inner[m.index - 1] !== "\\");
  if (plain.length === 0) return literal;
  const { index, 0: c } = rng.pick(plain);
  const hex = c.charCodeAt(0).toString(16).padStart(4, "0");
  return `"${inner.slice(0, index)}\\u${rng.chance(0.5) ? hex : hex.toUpperCase()}${inner.slice(index + 1)}"`;
}

/**
 * A match of `pattern` (global) at or after a random place in `text`, wrapping to the start: a
 * pick without listing every match of a 100 KB header.
 */
function someMatch(text: string, pattern: RegExp, rng: Rng, where?: (m: RegExpExecArray) => boolean): { at: number; text: string } | undefined {
  const start = rng.below(text.length + 1);
  for (const from of [start, 0]) {
    pattern.lastIndex = from;
    for (let m = pattern.exec(text); m !== null; m = pattern.exec(text)) {
      if (from === 0 && m.index >= start) break;
      if (!where || where(m)) return { at: m.index, text: m[0] };
    }
  }
  return undefined;
}

const isKey = (text: string) => (m: RegExpExecArray) => /^\s*:/.test(text.slice(m.index + m[0].length, m.index + m[0].length + 4));

/** One JSON-aware edit of `text`. */
export function mutateJsonText(text: string, rng: Rng): string {
  const number = () => someMatch(text, numberPattern, rng);
  const string = () => someMatch(text, stringPattern, rng);
  const key = () => someMatch(text, stringPattern, rng, isKey(text));
  switch (rng.below(11)) {
    case 0: { // a number replaced by an edge number
      const n = number();
      if (!n) break;
      return replaceAt(text, n.at, n.text.length, rng.pick(edgeNumbers));
    }
    case 1: { // a value replaced by a value of another kind
      const target = rng.chance(0.5) ? number() ?? string() : string();
      if (!target) break;
      return replaceAt(text, target.at, target.text.length, edgeValues(rng));
    }
    case 2: { // a key given twice in its object, maybe spelled with an escape
      const k = key();
      if (!k) break;
      const spelling = rng.chance(0.6) ? respell(k.text, rng) : k.text;
      return replaceAt(text, k.at, 0, `${spelling}: ${rng.chance(0.5) ? rng.pick(edgeNumbers) : edgeValues(rng)}, `);
    }
    case 3: { // a string spelled with an escape (the same value)
      const s = string();
      if (!s) break;
      return replaceAt(text, s.at, s.text.length, respell(s.text, rng));
    }
    case 4: { // a key renamed by one character
      const k = key();
      if (!k) break;
      const at = k.at + 1 + rng.below(Math.max(1, k.text.length - 2));
      return replaceAt(text, at, 1, rng.pick(["_", "x", "0", ".", " ", "\\u0000", "é"]));
    }
    case 5: { // a structural character inserted
      const at = rng.below(text.length + 1);
      return replaceAt(text, at, 0, rng.pick(["{", "}", "[", "]", ",", ":", '"', "\\", " ", "\n", "0", "-"]));
    }
    case 6: { // a span deleted
      const at = rng.below(text.length);
      return replaceAt(text, at, 1 + rng.below(rng.chance(0.8) ? 8 : 200), "");
    }
    case 7: // cut short
      return text.slice(0, rng.below(text.length));
    case 8: { // two numbers swapped
      const [a, b] = [number(), number()];
      if (!a || !b || a.at === b.at || a.at + a.text.length > b.at && b.at + b.text.length > a.at) break;
      const [first, second] = a.at < b.at ? [a, b] : [b, a];
      return text.slice(0, first.at) + second.text + text.slice(first.at + first.text.length, second.at) + first.text + text.slice(second.at + second.text.length);
    }
    case 9: { // a number nudged by one
      const n = number();
      const value = n ? Number(n.text) : Number.NaN;
      if (!n || !Number.isSafeInteger(value)) break;
      return replaceAt(text, n.at, n.text.length, String(value + (rng.chance(0.5) ? 1 : -1)));
    }
    default: { // whitespace added: the same JSON
      const at = rng.below(text.length + 1);
      return replaceAt(text, at, 0, rng.pick([" ", "\n", "\t", "  \r\n"]));
    }
  }
  return replaceAt(text, rng.below(text.length + 1), 0, rng.pick(["{", "]", ",", '"']));
}

/**
 * One byte-level edit. `bytes` is the input's own copy (makeInput copies the seed), so edits that
 * keep the length are made in place: a large input (trunk.bin) is not copied per edit.
 */
export function mutateBytes(bytes: Uint8Array, rng: Rng, donors: readonly Uint8Array[] = []): Uint8Array {
  const n = bytes.length;
  const at = rng.below(n);
  switch (rng.below(9)) {
    case 0: { // a bit flipped
      if (n > 0) bytes[at] = (bytes[at] as number) ^ (1 << rng.below(8));
      return bytes;
    }
    case 1: { // a byte set to an edge value
      if (n > 0) bytes[at] = rng.pick([0x00, 0xff, 0x7f, 0x80, 0x22, 0x5c, 0x7b, 0x5b, 0x20, 0x0a, 0x30, 0x39, 0xc0, 0xed]);
      return bytes;
    }
    case 2: // a span deleted
      return concat(bytes.subarray(0, at), bytes.subarray(Math.min(n, at + 1 + rng.below(16))));
    case 3: { // random bytes inserted
      const extra = new Uint8Array(1 + rng.below(8)).map(() => rng.below(256));
      return concat(bytes.subarray(0, at), extra, bytes.subarray(at));
    }
    case 4: { // a span repeated
      const length = 1 + rng.below(Math.min(64, Math.max(1, n - at)));
      return concat(bytes.subarray(0, at + length), bytes.subarray(at, at + length), bytes.subarray(at + length));
    }
    case 5: // cut short
      return bytes.subarray(0, at);
    case 6: { // bytes appended
      return concat(bytes, new Uint8Array(1 + rng.below(16)).map(() => rng.below(256)));
    }
    case 7: { // a span overwritten from elsewhere in the input, or from another seed
      const donor = donors.length > 0 && rng.chance(0.5) ? rng.pick(donors) : bytes;
      const from = rng.below(donor.length);
      const length = Math.min(1 + rng.below(32), donor.length - from, n - at);
      if (length > 0) bytes.set(donor.slice(from, from + length), at);
      return bytes;
    }
    default: { // a 32-bit little-endian field overwritten with an edge number
      if (at + 4 <= n) new DataView(bytes.buffer, bytes.byteOffset).setUint32(at, Number(BigInt.asUintN(32, BigInt(Math.trunc(Number(rng.pick(edgeNumbers.slice(0, 24))))))), true);
      return bytes;
    }
  }
}

/** One line-level edit of a text made of lines (the rank file). */
export function mutateLines(text: string, rng: Rng): string {
  const lines = text.split("\n");
  const i = rng.below(lines.length);
  const line = lines[i] as string;
  switch (rng.below(8)) {
    case 0: lines.splice(i, 1); break; // a line removed
    case 1: lines.splice(i, 0, line); break; // a line repeated
    case 2: { // two lines' last fields swapped (ranks)
      const j = rng.below(lines.length);
      const [a, b] = [line.split(" "), (lines[j] as string).split(" ")];
      if (a.length === 2 && b.length === 2) [lines[i], lines[j]] = [`${a[0]} ${b[1]}`, `${b[0]} ${a[1]}`];
      break;
    }
    case 3: { // the last field replaced by an edge number
      const space = line.lastIndexOf(" ");
      lines[i] = `${line.slice(0, space + 1)}${rng.pick(edgeNumbers)}`;
      break;
    }
    case 4: lines[i] = `${line}\r`; break; // a CRLF line
    case 5: lines.splice(i, 0, ""); break; // a blank line
    case 6: lines[i] = `${"QUFB".repeat(1 + rng.below(400))} ${lines.length}`; break; // a long token
    default: lines[i] = line.replace(/ /, rng.pick(["  ", "\t", "", " -"])); break; // the separator changed
  }
  return lines.join("\n");
}

/** One token-level edit of an argv (a JSON array of strings). */
export function mutateArgv(args: readonly string[], rng: Rng, flags: readonly string[], values: readonly string[]): string[] {
  const out = [...args];
  const at = rng.below(out.length + 1);
  switch (rng.below(7)) {
    case 0: out.splice(at, 0, rng.pick(flags)); break; // a flag inserted
    case 1: out.splice(at, 0, rng.pick(flags), rng.pick(values)); break; // a flag with a value inserted
    case 2: out.splice(at, 1); break; // a token removed
    case 3: if (at < out.length) out[at] = rng.pick(values); break; // a token replaced by a value
    case 4: if (at < out.length) out[at] = `${rng.pick(flags)}=${rng.pick(values)}`; break; // --flag=value
    case 5: if (at < out.length) out[at] = (out[at] as string).slice(0, rng.below((out[at] as string).length + 1)); break; // a token cut
    default: out.push(rng.pick(["--", "-", "-x", "--=", "---ids", "—gen"])); break; // odd tokens
  }
  return out;
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((sum, p) => sum + p.length, 0));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

/** A JSON input: mostly edits that know JSON, sometimes raw bytes (invalid UTF-8 included). */
export function mutateJson(bytes: Uint8Array, rng: Rng, donors: readonly Uint8Array[] = []): Uint8Array {
  if (rng.chance(0.2)) return mutateBytes(bytes, rng, donors);
  return new TextEncoder().encode(mutateJsonText(new TextDecoder().decode(bytes), rng));
}

/** A text made of lines: mostly line edits, sometimes raw bytes. */
export function mutateText(bytes: Uint8Array, rng: Rng, donors: readonly Uint8Array[] = []): Uint8Array {
  if (rng.chance(0.4)) return mutateBytes(bytes, rng, donors);
  return new TextEncoder().encode(mutateLines(new TextDecoder().decode(bytes), rng));
}
