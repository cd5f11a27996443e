/**
 * Byte-level BPE by rank, exactly tiktoken's (runtime.md 10.3 step 3): a piece that is itself a
 * token is emitted whole; otherwise start from single bytes and repeatedly merge the adjacent
 * pair whose concatenated bytes have the lowest rank (the leftmost such pair on a tie), until no
 * adjacent concatenation is a token. There is no merges list: ranks come from the file.
 *
 * Two implementations of the same rule: short pieces (nearly all of them) rescan a small array
 * after each merge like tiktoken does, which beats any heap at that size; long pieces (a run of
 * spaces, a base64 blob, minified code) use a binary heap so they cost n log n instead of n^2.
 */
import type { RankTable } from "./rank-table.ts";

/** Pieces up to this many bytes use the rescanning merge. */
const SHORT_PIECE_BYTES = 64;
const NO_RANK = 0x7fffffff;
/** Heap keys pack rank and part offset in one float: rank * 2^32 + offset is exact below 2^53. */
const RANK_SCALE = 2 ** 32;

export class BytePairEncoder {
  private readonly table: RankTable;
  // Rescanning merge: part start offsets and the rank of merging each part with the next.
  private partStart = new Int32Array(SHORT_PIECE_BYTES + 1);
  private pairRank = new Int32Array(SHORT_PIECE_BYTES + 1);
  // Heap merge, indexed by a part's starting offset within the piece.
  private next = new Int32Array(0);
  private prev = new Int32Array(0);
  private rankAt = new Int32Array(0);
  private heap = new Float64Array(0);

  constructor(table: RankTable) {
    this.table = table;
  }

  /** Appends the ids of `bytes[start, end)` (one pre-tokenised piece) to `out`. */
  encodePiece(bytes: Uint8Array, start: number, end: number, out: number[]): void {
    const length = end - start;
    if (length === 1) {
      out.push(this.table.byteRank[bytes[start] as number] as number);
      return;
    }
    const whole = this.table.lookup(bytes, start, end);
    if (whole >= 0) {
      out.push(whole);
      return;
    }
    if (length <= SHORT_PIECE_BYTES) this.mergeShort(bytes, start, end, out);
    else this.mergeLong(bytes, start, end, out);
  }

  private mergeShort(bytes: Uint8Array, start: number, end: number, out: number[]): void {
    const table = this.table;
    const partStart = this.partStart;
    const pairRank = this.pairRank;
    // parts = number of parts; partStart[parts] = end is the sentinel.
    let parts = end - start;
    let minRank = NO_RANK;
    let minIndex = -1;
    for (let i = 0; i < parts; i++) {
      partStart[i] = start + i;
      if (i + 1 < parts) {
        const rank = table.lookup(bytes, start + i, start + i + 2);
        const value = rank < 0 ? NO_RANK : rank;
        pairRank[i] = value;
        if (value < minRank) {
          minRank = value;
          minIndex = i;
        }
      }
    }
    partStart[parts] = end;
    pairRank[parts - 1] = NO_RANK;

    while (minRank !== NO_RANK) {
      const i = minIndex;
      // Part i absorbs part i + 1: shift the later parts down by one.
      for (let k = i + 1; k < parts; k++) {
        partStart[k] = partStart[k + 1] as number;
        pairRank[k] = pairRank[k + 1] as number;
      }
      parts--;
      pairRank[i] = i + 1 < parts ? rankOrNone(table, bytes, partStart[i] as number, partStart[i + 2] as number) : NO_RANK;
      if (i > 0) pairRank[i - 1] = rankOrNone(table, bytes, partStart[i - 1] as number, partStart[i + 1] as number);
      minRank = NO_RANK;
      for (let k = 0; k + 1 < parts; k++) {
        const value = pairRank[k] as number;
        if (value < minRank) {
          minRank = value;
          minIndex = k;
        }
      }
    }
    for (let i = 0; i < parts; i++) {
      out.push(partRank(table, bytes, partStart[i] as number, partStart[i + 1] as number));
    }
  }

  private mergeLong(bytes: Uint8Array, start: number, end: number, out: number[]): void {
    const table = this.table;
    const length = end - start;
    if (this.next.length < length + 1) {
      const capacity = Math.max(length + 1, this.next.length * 2);
      this.next = new Int32Array(capacity);
      this.prev = new Int32Array(capacity);
      this.rankAt = new Int32Array(capacity);
      this.heap = new Float64Array(capacity);
    }
    // Offsets are relative to `start`; `length` is the end sentinel. rankAt[o] is the rank of
    // merging the part at o with the next part, or NO_RANK; -1 marks a part absorbed by another.
    const next = this.next;
    const prev = this.prev;
    const rankAt = this.rankAt;
    const heap = this.heap;
    let heapSize = 0;
    const push = (key: number): void => {
      let i = heapSize++;
      while (i > 0) {
        const parent = (i - 1) >> 1;
        const above = heap[parent] as number;
        if (above <= key) break;
        heap[i] = above;
        i = parent;
      }
      heap[i] = key;
    };
    const pop = (): number => {
      const top = heap[0] as number;
      const last = heap[--heapSize] as number;
      let i = 0;
      for (;;) {
        let child = 2 * i + 1;
        if (child >= heapSize) break;
        if (child + 1 < heapSize && (heap[child + 1] as number) < (heap[child] as number)) child++;
        if ((heap[child] as number) >= last) break;
        heap[i] = heap[child] as number;
        i = child;
      }
      heap[i] = last;
      return top;
    };

    for (let o = 0; o < length; o++) {
      next[o] = o + 1;
      prev[o] = o - 1;
    }
    for (let o = 0; o < length; o++) {
      const rank = o + 1 < length ? rankOrNone(table, bytes, start + o, start + o + 2) : NO_RANK;
      rankAt[o] = rank;
      if (rank !== NO_RANK) push(rank * RANK_SCALE + o);
    }
    while (heapSize > 0) {
      const key = pop();
      const rank = Math.floor(key / RANK_SCALE);
      const o = key - rank * RANK_SCALE;
      // A stale entry: the part was absorbed, or its pair rank changed since this was pushed.
      if (rankAt[o] !== rank) continue;
      const absorbed = next[o] as number;
      const after = next[absorbed] as number;
      next[o] = after;
      if (after < length) prev[after] = o;
      rankAt[absorbed] = -1;
      const mergedRank = after < length ? rankOrNone(table, bytes, start + o, start + (next[after] as number)) : NO_RANK;
      rankAt[o] = mergedRank;
      if (mergedRank !== NO_RANK) push(mergedRank * RANK_SCALE + o);
      const before = prev[o] as number;
      if (before >= 0) {
        const beforeRank = rankOrNone(table, bytes, start + before, start + after);
        rankAt[before] = beforeRank;
        if (beforeRank !== NO_RANK) push(beforeRank * RANK_SCALE + before);
      }
    }
    for (let o = 0; o < length; o = next[o] as number) {
      out.push(partRank(table, bytes, start + o, start + (next[o] as number)));
    }
  }
}

function rankOrNone(table: RankTable, bytes: Uint8Array, start: number, end: number): number {
  const rank = table.lookup(bytes, start, end);
  return rank < 0 ? NO_RANK : rank;
}

/** Rank of a finished part: a single byte, or a merge result, which is a token by construction. */
function partRank(table: RankTable, bytes: Uint8Array, start: number, end: number): number {
  return end - start === 1 ? (table.byteRank[bytes[start] as number] as number) : table.lookup(bytes, start, end);
}
