/**
 * Byte-level BPE training, the standard way: every text is cut into pieces by k3's own
 * pre-tokenizer (the Kimi split pattern), identical pieces are counted once with their
 * frequency, and the most frequent adjacent pair of tokens inside a piece is merged, again and
 * again; the new token's rank is the next rank. Ties go to the lowest pair (left rank, then
 * right rank). Merges never cross a piece boundary.
 *
 * Efficient: pair counts are kept and updated incrementally (only the pieces holding the merged
 * pair are touched), each pair knows the pieces it occurs in, and the best pair comes from a
 * max-heap with lazy deletion (an entry whose count is stale is dropped when it surfaces).
 *
 * A merge whose bytes equal an existing token's (the same string reached by a different split)
 * is skipped, since a rank table holds each byte string once; the verification in data.ts then
 * proves that k3's tokenizer reproduces the trained segmentation of every piece.
 */
import { PreTokenizer } from "../../src/tokenizer/pretokenize.ts";

const utf8 = new TextEncoder();

/** Pieces and their counts, keyed by Latin-1 strings (one char per byte, exact for any bytes). */
export class PieceCounter {
  readonly counts = new Map<string, number>();
  private readonly pre = new PreTokenizer();

  /** Adds the pieces of `text` (one encoder input: a document, or one chat text segment), `times` times. */
  add(text: string, times = 1): void {
    if (text.length === 0) return;
    const bytes = utf8.encode(text);
    const { bounds, count } = this.pre.split(bytes, 0, bytes.length);
    for (let i = 0; i < count; i++) {
      const s = bounds[i] as number;
      const e = bounds[i + 1] as number;
      let key = "";
      for (let p = s; p < e; p++) key += String.fromCharCode(bytes[p] as number);
      this.counts.set(key, (this.counts.get(key) ?? 0) + times);
    }
  }
}

export interface TrainedBpe {
  /** Token bytes by rank: 0..255 the single bytes, then one token per merge. */
  readonly tokens: Uint8Array[];
  /** Per merge, the pair merged and its count when merged. */
  readonly merges: { readonly left: number; readonly right: number; readonly count: number }[];
  /** Final segmentation of every piece (Latin-1 key -> rank ids). */
  readonly segmentation: Map<string, number[]>;
  /** Merges skipped because their bytes already were a token. */
  readonly skippedDuplicates: number;
}

const PAIR_SHIFT = 65536;

/** Max-heap of (count desc, key asc) pairs, in two parallel arrays. */
class PairHeap {
  private counts: number[] = [];
  private keys: number[] = [];

  get size(): number {
    return this.keys.length;
  }

  private above(i: number, j: number): boolean {
    const ci = this.counts[i] as number;
    const cj = this.counts[j] as number;
    return ci > cj || (ci === cj && (this.keys[i] as number) < (this.keys[j] as number));
  }

  private swap(i: number, j: number): void {
    [this.counts[i], this.counts[j]] = [this.counts[j] as number, this.counts[i] as number];
    [this.keys[i], this.keys[j]] = [this.keys[j] as number, this.keys[i] as number];
  }

  push(count: number, key: number): void {
    this.counts.push(count);
    this.keys.push(key);
    let i = this.keys.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.above(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  pop(): { count: number; key: number } | undefined {
    const n = this.keys.length;
    if (n === 0) return undefined;
    const top = { count: this.counts[0] as number, key: this.keys[0] as number };
    const lastCount = this.counts.pop() as number;
    const lastKey = this.keys.pop() as number;
    if (n > 1) {
      this.counts[0] = lastCount;
      this.keys[0] = lastKey;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < n - 1 && this.above(l, best)) best = l;
        if (r < n - 1 && this.above(r, best)) best = r;
        if (best === i) break;
        this.swap(i, best);
        i = best;
      }
    }
    return top;
  }
}

/**
 * Trains up to `rankTarget` ranks (256 bytes + merges). Stops early when no pair occurs at
 * least twice.
 */
export function trainBpe(pieceCounts: ReadonlyMap<string, number>, rankTarget: number, onProgress?: (ranks: number) => void): TrainedBpe {
  const keys = [...pieceCounts.keys()].sort();
  const words: number[][] = keys.map((key) => Array.from(key, (c) => c.charCodeAt(0)));
  const weight: number[] = keys.map((key) => pieceCounts.get(key) as number);
  const tokens: Uint8Array[] = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
  const known = new Set<string>(tokens.map((t) => latin1(t)));
  const pairCount = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();

  const addPairs = (w: number, sign: number, touched: Set<number>): void => {
    const ids = words[w] as number[];
    const c = (weight[w] as number) * sign;
    for (let i = 0; i + 1 < ids.length; i++) {
      const key = (ids[i] as number) * PAIR_SHIFT + (ids[i + 1] as number);
      pairCount.set(key, (pairCount.get(key) ?? 0) + c);
      touched.add(key);
      if (sign > 0) {
        let set = pairWords.get(key);
        if (set === undefined) pairWords.set(key, (set = new Set()));
        set.add(w);
      }
    }
  };

  const initial = new Set<number>();
  for (let w = 0; w < words.length; w++) addPairs(w, 1, initial);
  const heap = new PairHeap();
  for (const [key, count] of pairCount) heap.push(count, key);

  const merges: { left: number; right: number; count: number }[] = [];
  const banned = new Set<number>();
  let skippedDuplicates = 0;
  while (tokens.length < rankTarget) {
    const top = heap.pop();
    if (top === undefined) break;
    const current = pairCount.get(top.key) ?? 0;
    if (current !== top.count || banned.has(top.key)) continue; // stale entry
    if (current < 2) break;
    const left = Math.floor(top.key / PAIR_SHIFT);
    const right = top.key % PAIR_SHIFT;
    const bytes = new Uint8Array([...(tokens[left] as Uint8Array), ...(tokens[right] as Uint8Array)]);
    const text = latin1(bytes);
    if (known.has(text)) {
      banned.add(top.key);
      skippedDuplicates++;
      continue;
    }
    const merged = tokens.length;
    tokens.push(bytes);
    known.add(text);
    merges.push({ left, right, count: current });
    const touched = new Set<number>();
    const holders = [...(pairWords.get(top.key) ?? [])].sort((a, b) => a - b);
    for (const w of holders) {
      const ids = words[w] as number[];
      let has = false;
      for (let i = 0; i + 1 < ids.length; i++) if (ids[i] === left && ids[i + 1] === right) has = true;
      if (!has) continue;
      addPairs(w, -1, touched);
      const out: number[] = [];
      for (let i = 0; i < ids.length; i++) {
        if (i + 1 < ids.length && ids[i] === left && ids[i + 1] === right) {
          out.push(merged);
          i++;
        } else out.push(ids[i] as number);
      }
      words[w] = out;
      addPairs(w, 1, touched);
    }
    pairWords.delete(top.key);
    for (const key of touched) {
      const count = pairCount.get(key) ?? 0;
      if (count <= 0) pairCount.delete(key);
      else if (!banned.has(key)) heap.push(count, key);
    }
    if (onProgress !== undefined && merged % 256 === 0) onProgress(tokens.length);
  }
  const segmentation = new Map<string, number[]>();
  keys.forEach((key, w) => segmentation.set(key, words[w] as number[]));
  return { tokens, merges, segmentation, skippedDuplicates };
}

export function latin1(bytes: Uint8Array): string {
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return s;
}
