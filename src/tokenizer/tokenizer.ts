/**
 * The tokenizer: special-token split, pre-tokenisation, byte-level BPE, and decoding
 * (runtime.md 10.3 and 10.4).
 */
import { usageError } from "../errors.ts";
import type { SpecialToken } from "./added-tokens.ts";
import { BytePairEncoder } from "./bpe.ts";
import { PreTokenizer } from "./pretokenize.ts";
import type { RankTable } from "./rank-table.ts";
import { SpecialMatcher } from "./special-matcher.ts";

export interface EncodeOptions {
  /**
   * True: special-token text is ordinary text (`--ordinary`, and every user-supplied segment of
   * a chat, chat.md 2.1, so typed text cannot inject structure). False (the default, `--prompt`
   * and `--prompt-file`): special-token text becomes its id, as tiktoken does with every special
   * allowed.
   */
  readonly ordinary?: boolean;
}

const utf8 = new TextEncoder();

/** Pieces of at most this many bytes have their ids remembered (most words recur). */
const CACHED_PIECE_BYTES = 24;
/** The cache is dropped when it holds this many pieces, so memory stays bounded on any input. */
const CACHE_LIMIT = 100_000;

export class Tokenizer {
  /** Ranks plus the 256 special ids: 163,840 for Kimi. */
  readonly vocabSize: number;
  /** Number of ranks in `tiktoken.model` (163,584 for Kimi); special ids start here. */
  readonly rankCount: number;
  /** All 256 special tokens, by id (index i is id `rankCount + i`). */
  readonly specials: readonly SpecialToken[];
  /**
   * The most bytes one id can stand for (the longest rank or special token's text): a text of
   * n bytes encodes to at least n / maxTokenBytes ids, a bound known before encoding it.
   */
  readonly maxTokenBytes: number;
  private readonly table: RankTable;
  private readonly specialIdOfText: ReadonlyMap<string, number>;
  private readonly specialBytes: readonly Uint8Array[];
  private readonly matcher: SpecialMatcher;
  private readonly pre = new PreTokenizer();
  private readonly bpe: BytePairEncoder;
  private readonly found = { id: 0, end: 0 };
  private readonly pieceCache = new Map<string, number | number[]>();

  constructor(table: RankTable, specials: readonly SpecialToken[]) {
    this.table = table;
    this.rankCount = table.size;
    this.vocabSize = table.size + specials.length;
    this.specials = specials;
    this.specialBytes = specials.map((token) => utf8.encode(token.text));
    this.maxTokenBytes = Math.max(table.maxTokenBytes, ...this.specialBytes.map((bytes) => bytes.length));
    this.specialIdOfText = new Map(specials.map((token) => [token.text, token.id]));
    this.matcher = new SpecialMatcher(specials.map((token, i) => ({ id: token.id, bytes: this.specialBytes[i] as Uint8Array })));
    this.bpe = new BytePairEncoder(table);
  }

  /** Id of a special token's text (`<|end_of_msg|>` -> 163586), or undefined. */
  specialId(text: string): number | undefined {
    return this.specialIdOfText.get(text);
  }

  /**
   * Token ids of `text`. A string is encoded as UTF-8 (a lone surrogate becomes U+FFFD, as in
   * tiktoken); bytes are taken verbatim, invalid UTF-8 included (see `pretokenize.ts`).
   */
  encode(text: string | Uint8Array, options?: EncodeOptions): number[] {
    const bytes = typeof text === "string" ? utf8.encode(text) : text;
    const out: number[] = [];
    if (options?.ordinary === true) {
      this.encodeOrdinary(bytes, 0, bytes.length, out);
      return out;
    }
    let p = 0;
    for (;;) {
      const at = this.matcher.find(bytes, p, bytes.length, this.found);
      if (at < 0) break;
      // Pieces never span a special token: the text before it is split as a segment of its own.
      this.encodeOrdinary(bytes, p, at, out);
      out.push(this.found.id);
      p = this.found.end;
    }
    this.encodeOrdinary(bytes, p, bytes.length, out);
    return out;
  }

  /**
   * The bytes of `ids`: ordinary ids as their token bytes, special ids as their text. An id
   * outside [0, vocabSize) is an error naming it (the original skipped it silently).
   */
  decode(ids: readonly number[]): Uint8Array {
    let total = 0;
    for (const id of ids) total += this.bytesOf(id).length;
    const out = new Uint8Array(total);
    let at = 0;
    for (const id of ids) {
      const bytes = this.bytesOf(id);
      out.set(bytes, at);
      at += bytes.length;
    }
    return out;
  }

  /** The ids as text, decoded once so no UTF-8 sequence is split; a BOM is kept. */
  decodeText(ids: readonly number[]): string {
    return new TextDecoder("utf-8", { ignoreBOM: true }).decode(this.decode(ids));
  }

  /** The load line the original prints on stderr (runtime.md 10.1), for the caller to log. */
  get loadLine(): string {
    const listed = this.specials.filter((token) => token.listed).length;
    return `[TOK] ${this.rankCount} ranks (max id ${this.vocabSize - 1}) + ${listed} added tokens | kimi=1 rankbpe=1`;
  }

  /** The bytes of one id (a grammar engine's view of the vocabulary); a view, not a copy. */
  tokenBytes(id: number): Uint8Array {
    return this.bytesOf(id);
  }

  private bytesOf(id: number): Uint8Array {
    if (!Number.isInteger(id) || id < 0 || id >= this.vocabSize) {
      throw usageError(`token id ${id} is outside the vocabulary [0, ${this.vocabSize})`);
    }
    return id < this.rankCount ? this.table.bytesOf(id) : (this.specialBytes[id - this.rankCount] as Uint8Array);
  }

  private encodeOrdinary(bytes: Uint8Array, start: number, end: number, out: number[]): void {
    if (start >= end) return;
    const { bounds, count } = this.pre.split(bytes, start, end);
    const cache = this.pieceCache;
    for (let i = 0; i < count; i++) {
      const s = bounds[i] as number;
      const e = bounds[i + 1] as number;
      const length = e - s;
      if (length === 1) {
        out.push(this.table.byteRank[bytes[s] as number] as number);
        continue;
      }
      if (length > CACHED_PIECE_BYTES) {
        this.bpe.encodePiece(bytes, s, e, out);
        continue;
      }
      // Latin-1 keys are exact for bytes (one char per byte), unlike UTF-8 decoding.
      const key = latin1Key(bytes, s, e);
      const hit = cache.get(key);
      if (hit !== undefined) {
        if (typeof hit === "number") out.push(hit);
        else for (const id of hit) out.push(id);
        continue;
      }
      const first = out.length;
      this.bpe.encodePiece(bytes, s, e, out);
      if (cache.size >= CACHE_LIMIT) cache.clear();
      cache.set(key, out.length - first === 1 ? (out[first] as number) : out.slice(first));
    }
  }
}

function latin1Key(bytes: Uint8Array, start: number, end: number): string {
  let key = "";
  for (let p = start; p < end; p++) key += String.fromCharCode(bytes[p] as number);
  return key;
}
