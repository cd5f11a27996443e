/**
 * Reads `tiktoken.model` (runtime.md 10.1): one `base64(token bytes) rank` pair per line.
 * Strict: every problem is a K3Error (exit 1) naming the file and the line, because a table that
 * loads "mostly" gives a tokenizer that is right on ASCII and silently wrong elsewhere.
 *
 * The file is parsed as bytes in one pass (no per-line strings, no atob), because load time is a
 * budget (under 300 ms for 163,584 lines) and string splitting alone would eat a good part of it.
 */
import { runtimeError } from "../errors.ts";
import { RankTable } from "./rank-table.ts";

/** Ranks must lie in [0, this): the released vocabulary is 163,840 ids including the specials. */
export const RANK_LIMIT = 163_840;
/**
 * Longest token accepted. The released table's longest token is 256 bytes; anything past four
 * times that is a corrupt line, not a token.
 */
export const MAX_TOKEN_BYTES = 1024;

const BASE64_VALUE = new Int8Array(256).fill(-1);
for (const [i, c] of [..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].entries()) {
  BASE64_VALUE[c.charCodeAt(0)] = i;
}
const SPACE = 0x20;
const NEWLINE = 0x0a;
const RETURN = 0x0d;
const EQUALS = 0x3d;

/** Parses the bytes of a rank file named `file` (used in messages). */
export function parseRankFile(data: Uint8Array, file: string): RankTable {
  // Decoded tokens are shorter than their base64 text, so the file size bounds the pool.
  const pool = new Uint8Array(data.length);
  let poolEnd = 0;
  // Per line, in file order: where its bytes start in the pool, their length, its rank, its line.
  let capacity = 1 << 16;
  let entryStart = new Uint32Array(capacity);
  let entryLength = new Uint16Array(capacity);
  let entryRank = new Int32Array(capacity);
  let entryLine = new Int32Array(capacity);
  let count = 0;
  const lineOfRank = new Int32Array(RANK_LIMIT);

  let lineNumber = 0;
  let p = 0;
  const n = data.length;
  while (p < n) {
    lineNumber++;
    let lineEnd = data.indexOf(NEWLINE, p);
    if (lineEnd < 0) lineEnd = n;
    const next = lineEnd + 1;
    if (lineEnd > p && data[lineEnd - 1] === RETURN) lineEnd--; // a trailing \r is tolerated
    if (lineEnd === p) {
      p = next; // blank lines are skipped
      continue;
    }
    const space = data.indexOf(SPACE, p);
    if (space < 0 || space >= lineEnd) throw runtimeError(`${at(file, lineNumber)}: no rank (expected "<base64 bytes> <rank>")`);

    // Rank: decimal digits only, nothing after them.
    if (space + 1 === lineEnd) throw runtimeError(`${at(file, lineNumber)}: no rank (expected "<base64 bytes> <rank>")`);
    let rank = 0;
    for (let q = space + 1; q < lineEnd; q++) {
      const digit = (data[q] as number) - 0x30;
      if (digit < 0 || digit > 9) {
        throw runtimeError(`${at(file, lineNumber)}: rank ${snippet(data, space + 1, lineEnd)} is not a whole number in [0, ${RANK_LIMIT})`);
      }
      rank = rank * 10 + digit;
      if (rank >= RANK_LIMIT) throw runtimeError(`${at(file, lineNumber)}: rank ${snippet(data, space + 1, lineEnd)} is outside [0, ${RANK_LIMIT})`);
    }

    // Token bytes: standard alphabet, `=` padding, length a multiple of 4, no stray bits.
    const textLength = space - p;
    if (textLength === 0) throw runtimeError(`${at(file, lineNumber)}: empty token (no base64 before the rank)`);
    if (textLength % 4 !== 0) throw runtimeError(`${at(file, lineNumber)}: bad base64 (length ${textLength} is not a multiple of 4)`);
    let padding = 0;
    if (data[space - 1] === EQUALS) padding = data[space - 2] === EQUALS ? 2 : 1;
    const tokenLength = (textLength / 4) * 3 - padding;
    if (tokenLength > MAX_TOKEN_BYTES) {
      throw runtimeError(`${at(file, lineNumber)}: implausibly long token (${tokenLength} bytes; the limit is ${MAX_TOKEN_BYTES})`);
    }
    const decoded = decodeBase64(data, p, space - padding, pool, poolEnd);
    if (decoded < 0) throw runtimeError(`${at(file, lineNumber)}: bad base64 ${snippet(data, p, space)}`);
    if (decoded === 0) throw runtimeError(`${at(file, lineNumber)}: empty token (base64 decodes to no bytes)`);

    if (lineOfRank[rank] !== 0) throw runtimeError(`${at(file, lineNumber)}: rank ${rank} is already given on line ${lineOfRank[rank]}`);
    lineOfRank[rank] = lineNumber;
    if (count === capacity) {
      capacity *= 2;
      entryStart = grow(entryStart, new Uint32Array(capacity));
      entryLength = grow(entryLength, new Uint16Array(capacity));
      entryRank = grow(entryRank, new Int32Array(capacity));
      entryLine = grow(entryLine, new Int32Array(capacity));
    }
    entryStart[count] = poolEnd;
    entryLength[count] = decoded;
    entryRank[count] = rank;
    entryLine[count] = lineNumber;
    count++;
    poolEnd += decoded;
    p = next;
  }

  if (count === 0) throw runtimeError(`${file}: empty rank file (no "<base64 bytes> <rank>" lines)`);
  // Ranks are ids: special ids follow them directly (byte-level rule 3), so a gap would shift
  // every special id. Ranks are unique and below `count` exactly when they are 0..count-1.
  for (let i = 0; i < count; i++) {
    if ((entryRank[i] as number) >= count) {
      let missing = 0;
      while (lineOfRank[missing] !== 0) missing++;
      throw runtimeError(
        `${file}:${entryLine[i]}: rank ${entryRank[i]} leaves a gap: ${count} lines but rank ${missing} is missing (ranks must be 0..${count - 1})`,
      );
    }
  }

  const start = new Uint32Array(count);
  const length = new Uint16Array(count);
  for (let i = 0; i < count; i++) {
    const rank = entryRank[i] as number;
    start[rank] = entryStart[i] as number;
    length[rank] = entryLength[i] as number;
  }
  const table = new RankTable(pool.subarray(0, poolEnd), start, length);
  if (table.duplicate !== undefined) {
    const [first, second] = table.duplicate;
    const [early, late] = lineOfRank[first]! < lineOfRank[second]! ? [first, second] : [second, first];
    throw runtimeError(`${file}:${lineOfRank[late]}: token of rank ${late} has the same bytes as rank ${early} (line ${lineOfRank[early]})`);
  }
  for (let b = 0; b < 256; b++) {
    if (table.byteRank[b] === -1) {
      throw runtimeError(`${file}: byte 0x${b.toString(16).padStart(2, "0")} has no rank (byte-level BPE needs all 256 single bytes)`);
    }
  }
  return table;
}

/**
 * Decodes base64 `data[from, to)` (padding already stripped) into `out` at `at`. Returns the
 * number of bytes written, or -1 for a character outside the alphabet or leftover bits that are
 * not zero (a non-canonical encoding, which the Rust base64 crate tiktoken uses also refuses).
 */
function decodeBase64(data: Uint8Array, from: number, to: number, out: Uint8Array, at: number): number {
  let written = 0;
  let q = from;
  let bad = 0;
  // Whole quads first: 4 characters -> 3 bytes. An invalid character is -1, which sets the
  // sign bit of the OR, so one test after the loop covers them all.
  for (; q + 4 <= to; q += 4) {
    const a = BASE64_VALUE[data[q] as number] as number;
    const b = BASE64_VALUE[data[q + 1] as number] as number;
    const c = BASE64_VALUE[data[q + 2] as number] as number;
    const d = BASE64_VALUE[data[q + 3] as number] as number;
    bad |= a | b | c | d;
    const v = (a << 18) | (b << 12) | (c << 6) | d;
    out[at + written] = v >>> 16;
    out[at + written + 1] = v >>> 8;
    out[at + written + 2] = v;
    written += 3;
  }
  if (bad < 0) return -1;
  // The tail before padding: 2 characters -> 1 byte, 3 -> 2; the unused low bits must be zero.
  const tail = to - q;
  if (tail === 1) return -1;
  if (tail >= 2) {
    const a = BASE64_VALUE[data[q] as number] as number;
    const b = BASE64_VALUE[data[q + 1] as number] as number;
    const c = tail === 3 ? (BASE64_VALUE[data[q + 2] as number] as number) : 0;
    if ((a | b | c) < 0) return -1;
    const v = (a << 18) | (b << 12) | (c << 6);
    if ((v & (tail === 2 ? 0xffff : 0xff)) !== 0) return -1;
    out[at + written++] = v >>> 16;
    if (tail === 3) out[at + written++] = v >>> 8;
  }
  return written;
}

function grow<T extends Uint32Array | Uint16Array | Int32Array>(from: T, to: T): T {
  to.set(from);
  return to;
}

/** "file:line" for a message; built only when a line is refused (a string per line costs more than parsing it). */
function at(file: string, lineNumber: number): string {
  return `${file}:${lineNumber}`;
}

/**
 * A slice of the file quoted for a message: bytes as Latin-1 (nothing can fail to print), at most
 * 40 of them, escaped as a JSON string so a control character cannot break the one-line message.
 */
function snippet(data: Uint8Array, from: number, to: number): string {
  const text = String.fromCharCode(...data.subarray(from, Math.min(to, from + 40)));
  return JSON.stringify(to - from > 40 ? `${text}...` : text);
}
