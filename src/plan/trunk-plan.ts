/**
 * How a trunk budget is spent (runtime.md 5.1): a pinned prefix of whole layers, read once and
 * kept, plus a ring for the rest: one arena that the unpinned layers cycle through, placed at
 * alternate ends, so the next layer is read ahead into whatever the current one leaves free.
 * With two slots (an arena of twice the largest unpinned layer) every layer is read ahead
 * whole; with one, the arena is the largest layer plus what the budget has left (up to a
 * second slot), and each layer is read ahead as far as it fits beside the current one, the
 * rest once that layer is done (the way the original engine let layer 0 use the whole arena
 * and then split it into two slots for the smaller layers, generalised to any sizes). Pinning
 * layer 0 (the largest) shrinks the slot, which frees budget to pin more, so every prefix length
 * is tried with its own slot size. A cyclic scan defeats LRU; a pinned prefix gives a
 * deterministic hit rate of P/L.
 */
export interface TrunkPlan {
  pinned: number;
  ringSlots: number;
  slotBytes: number;
  pinnedBytes: number;
  /** The ring's arena: ringSlots × slotBytes with two slots; with one, at least one slot. */
  ringBytes: number;
  /** Total bytes the plan allocates (pinned + ring). */
  bytes: number;
  /** The budget could not hold one ring slot and was raised to it. */
  raised: boolean;
  /** With one slot, the budget that would grant a second (and read-ahead). */
  twoSlotBudget: number | undefined;
}

/** `layerBytes[l]` is what layer l costs in memory (its run plus its widened vectors). */
export function planTrunk(layerBytes: readonly number[], budgetBytes: number): TrunkPlan {
  const L = layerBytes.length;
  const prefix = [0];
  for (const bytes of layerBytes) prefix.push((prefix.at(-1) as number) + bytes);
  const largestFrom = [0];
  for (let p = L - 1; p >= 0; p--) largestFrom.unshift(Math.max(largestFrom[0] as number, layerBytes[p] as number));
  // The most layers that can be pinned next to `slots` ring slots of the largest unpinned layer.
  const mostPinned = (slots: number) => {
    let best = -1;
    for (let p = 0; p <= L; p++) if (slots * (largestFrom[p] as number) + (prefix[p] as number) <= budgetBytes) best = p;
    return best;
  };
  // The second slot (read-ahead) is granted only when it fits; otherwise one, raised if need be.
  const withTwo = mostPinned(2);
  const withOne = mostPinned(1);
  const pinned = withTwo >= 0 ? withTwo : Math.max(withOne, 0);
  const ringSlots = pinned === L ? 0 : withTwo >= 0 ? 2 : 1;
  const slotBytes = pinned === L ? 0 : (largestFrom[pinned] as number);
  const pinnedBytes = prefix[pinned] as number;
  // One slot: the rest of the budget (never more than a second slot) is room to read ahead.
  const ringBytes = ringSlots === 1 ? Math.min(2 * slotBytes, Math.max(slotBytes, budgetBytes - pinnedBytes)) : ringSlots * slotBytes;
  return {
    pinned, ringSlots, slotBytes, pinnedBytes, ringBytes, bytes: pinnedBytes + ringBytes,
    raised: withOne < 0, twoSlotBudget: ringSlots === 1 ? pinnedBytes + 2 * slotBytes : undefined,
  };
}

/**
 * A compressed trunk's plan: the pinned prefix is held as stored (coded) bytes; every layer,
 * pinned or not, decodes into one slot of the largest decoded layer (`slotBytes`, its vectors
 * included); the streamed layers are read through a staging area of whole pieces, at least
 * `minimumPieces`, at most enough for the largest streamed layer. `ringSlots` is 1 (the decoded
 * slot) and `ringBytes` the slot plus the staging area.
 */
export interface CompressedTrunkPlan extends TrunkPlan {
  stagingBytes: number;
  /** Stored bytes of one piece (a read of whole blocks), and what one staging slot holds. */
  pieceBytes: number;
  stagingSlotBytes: number;
}

export function planCompressedTrunk(
  storedBytes: readonly number[], slotBytes: number, budgetBytes: number, piece: { bytes: number; slotBytes: number; minimum: number },
): CompressedTrunkPlan {
  const L = storedBytes.length;
  const prefix = [0];
  for (const bytes of storedBytes) prefix.push((prefix.at(-1) as number) + bytes);
  const largestFrom = [0];
  for (let p = L - 1; p >= 0; p--) largestFrom.unshift(Math.max(largestFrom[0] as number, storedBytes[p] as number));
  const stagingFor = (p: number) => (p === L ? 0 : piece.minimum * piece.slotBytes);
  let pinned = -1;
  for (let p = 0; p <= L; p++) if ((prefix[p] as number) + slotBytes + stagingFor(p) <= budgetBytes) pinned = p;
  const raised = pinned < 0;
  if (raised) pinned = 0;
  const pinnedBytes = prefix[pinned] as number;
  // Staging beyond the minimum takes what the budget leaves, up to a whole largest streamed layer.
  const wholeLayer = Math.ceil((largestFrom[pinned] as number) / piece.bytes) + 1;
  const spare = Math.floor(Math.max(0, budgetBytes - pinnedBytes - slotBytes) / piece.slotBytes);
  const pieces = pinned === L ? 0 : Math.min(wholeLayer, Math.max(piece.minimum, spare));
  const stagingBytes = pieces * piece.slotBytes;
  const ringBytes = slotBytes + stagingBytes;
  return {
    pinned, ringSlots: 1, slotBytes, pinnedBytes, ringBytes, bytes: pinnedBytes + ringBytes, raised,
    twoSlotBudget: pinned < L && pieces < wholeLayer ? pinnedBytes + slotBytes + wholeLayer * piece.slotBytes : undefined,
    stagingBytes, pieceBytes: piece.bytes, stagingSlotBytes: piece.slotBytes,
  };
}
