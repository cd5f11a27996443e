/**
 * Finds special-token text in raw prompt bytes (runtime.md 10.3 step 1): left to right, the
 * longest special token starting at each position. A byte trie makes that one walk per candidate
 * position instead of one comparison per special token (240 of the 256 start with `<|`).
 */

export class SpecialMatcher {
  /** children[node] maps a byte to the next node; node 0 is the root. */
  private readonly children: Map<number, number>[] = [new Map()];
  /** Id ending at each node, or -1. */
  private readonly idAt: number[] = [-1];
  /** Bytes that can start a special token: most positions are rejected by this alone. */
  private readonly canStart = new Uint8Array(256);

  constructor(tokens: readonly { readonly id: number; readonly bytes: Uint8Array }[]) {
    for (const { id, bytes } of tokens) {
      let node = 0;
      for (const b of bytes) {
        const children = this.children[node] as Map<number, number>;
        let next = children.get(b);
        if (next === undefined) {
          next = this.children.length;
          this.children.push(new Map());
          this.idAt.push(-1);
          children.set(b, next);
        }
        node = next;
      }
      this.idAt[node] = id;
      if (bytes.length > 0) this.canStart[bytes[0] as number] = 1;
    }
  }

  /**
   * The first special token in `bytes[from, end)`: its start offset, with the id and the end
   * written to `found`; -1 if there is none.
   */
  find(bytes: Uint8Array, from: number, end: number, found: { id: number; end: number }): number {
    const canStart = this.canStart;
    for (let p = from; p < end; p++) {
      if (canStart[bytes[p] as number] === 0) continue;
      let node = 0;
      let bestId = -1;
      let bestEnd = -1;
      for (let q = p; q < end; q++) {
        const next = (this.children[node] as Map<number, number>).get(bytes[q] as number);
        if (next === undefined) break;
        node = next;
        const id = this.idAt[node] as number;
        if (id >= 0) {
          bestId = id;
          bestEnd = q + 1;
        }
      }
      if (bestId >= 0) {
        found.id = bestId;
        found.end = bestEnd;
        return p;
      }
    }
    return -1;
  }
}
