/**
 * The rank table: token bytes <-> rank. Merge keys are raw bytes (runtime.md 10.3, byte-level
 * rule 1), never code points or strings, so the table is an open-addressing hash over byte
 * ranges. BPE asks "is bytes[a, b) a token?" for ranges of the input itself; hashing the range in
 * place means no key object is built per question, which is what makes encoding fast.
 */

/** A byte range's hash: FNV-1a, 32-bit. Keys are short (median a few bytes), so byte-at-a-time is fine. */
export function hashBytes(bytes: Uint8Array, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let p = start; p < end; p++) {
    h ^= bytes[p] as number;
    h = Math.imul(h, 0x01000193);
  }
  return h;
}

export class RankTable {
  /** Number of ranks; ranks are exactly 0..size-1. */
  readonly size: number;
  /** Rank of each single byte (every byte has one; the loader refuses a table without). */
  readonly byteRank: Int32Array;
  /** Length in bytes of the longest token: no longer range can be a token. */
  readonly maxTokenBytes: number;
  private readonly pool: Uint8Array;
  private readonly start: Uint32Array;
  private readonly length: Uint16Array;
  /** Hash slots holding rank + 1 (0 = empty), and each occupant's full hash to skip compares. */
  private readonly slots: Int32Array;
  private readonly slotHash: Int32Array;
  private readonly mask: number;

  /**
   * Two ranks with the same bytes, [first inserted, second], if the input had any. The loader
   * refuses such a table; the constructor only reports, since it does not know line numbers.
   */
  readonly duplicate: [number, number] | undefined;

  /**
   * `pool` holds every token's bytes; `start[r]`/`length[r]` locate rank r's. The caller has
   * checked that ranks are exactly 0..size-1.
   */
  constructor(pool: Uint8Array, start: Uint32Array, length: Uint16Array) {
    this.size = start.length;
    this.pool = pool;
    this.start = start;
    this.length = length;
    // Load factor at most 1/2 keeps probe chains short for the misses BPE asks about constantly.
    let capacity = 1024;
    while (capacity < this.size * 2) capacity *= 2;
    this.mask = capacity - 1;
    this.slots = new Int32Array(capacity);
    this.slotHash = new Int32Array(capacity);
    let maxTokenBytes = 0;
    let duplicate: [number, number] | undefined;
    for (let rank = 0; rank < this.size; rank++) {
      const s = start[rank] as number;
      const len = length[rank] as number;
      if (len > maxTokenBytes) maxTokenBytes = len;
      const h = hashBytes(pool, s, s + len);
      let slot = h & this.mask;
      let entry: number;
      while ((entry = this.slots[slot] as number) !== 0) {
        const other = entry - 1;
        if ((this.slotHash[slot] as number) === h && sameBytes(pool, start[other] as number, length[other] as number, s, len)) {
          duplicate ??= [other, rank];
          break;
        }
        slot = (slot + 1) & this.mask;
      }
      if (entry === 0) {
        this.slots[slot] = rank + 1;
        this.slotHash[slot] = h;
      }
    }
    this.maxTokenBytes = maxTokenBytes;
    this.duplicate = duplicate;
    this.byteRank = new Int32Array(256).fill(-1);
    const one = new Uint8Array(1);
    for (let b = 0; b < 256; b++) {
      one[0] = b;
      this.byteRank[b] = this.lookup(one, 0, 1);
    }
  }

  /** Rank of the token whose bytes are exactly `bytes[start, end)`, or -1. */
  lookup(bytes: Uint8Array, start: number, end: number): number {
    const len = end - start;
    if (len > this.maxTokenBytes) return -1;
    const h = hashBytes(bytes, start, end);
    const pool = this.pool;
    let slot = h & this.mask;
    for (;;) {
      const entry = this.slots[slot] as number;
      if (entry === 0) return -1;
      if ((this.slotHash[slot] as number) === h) {
        const rank = entry - 1;
        if ((this.length[rank] as number) === len) {
          const s = this.start[rank] as number;
          let p = 0;
          while (p < len && pool[s + p] === bytes[start + p]) p++;
          if (p === len) return rank;
        }
      }
      slot = (slot + 1) & this.mask;
    }
  }

  /** The bytes of `rank` (a view into the table; do not modify). */
  bytesOf(rank: number): Uint8Array {
    const s = this.start[rank] as number;
    return this.pool.subarray(s, s + (this.length[rank] as number));
  }

  /** Length in bytes of `rank`. */
  lengthOf(rank: number): number {
    return this.length[rank] as number;
  }
}

function sameBytes(pool: Uint8Array, a: number, aLength: number, b: number, bLength: number): boolean {
  if (aLength !== bLength) return false;
  for (let p = 0; p < aLength; p++) if (pool[a + p] !== pool[b + p]) return false;
  return true;
}
