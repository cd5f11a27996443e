/**
 * Offline replay of an expert request trace at a capacity in slots (runtime.md 6.7). Pure
 * functions over dense keys, so any policy can be compared on the same recorded run:
 *
 * - LRU: the engine's policy. Every request is admitted; a full cache evicts the entry used
 *   least recently.
 * - Belady: the optimal offline policy with bypass. A full cache evicts the entry whose next use
 *   is furthest away, or does not admit the new entry when every resident one is needed sooner.
 *   No demand policy can miss less, which makes it the yardstick for the others.
 * - PIN+LRU: the cap/2 keys this very trace requests most are pinned (each pays its first read)
 *   and LRU runs on the remaining slots. It knows the future counts, so it is a ceiling for
 *   hot-set pinning, not a policy the engine can run as is.
 *
 * Traces run to millions of requests, so each policy is linear (LRU) or O(n log n) (Belady) over
 * typed arrays, with next-use indices computed once per trace and shared by every capacity.
 */

/** Hits and misses of one policy at one capacity; hits + misses = requests. */
export interface PolicyOutcome {
  hits: number;
  misses: number;
}

export interface ReplayRow {
  slots: number;
  lru: PolicyOutcome;
  belady: PolicyOutcome;
  pinLru: PolicyOutcome;
}

/** A trace prepared for replay; build it once with `prepareReplay` and replay it many times. */
export interface ReplayTrace {
  /** Dense key of each request, 0 .. distinct-1, numbered in order of first request. */
  keys: Int32Array;
  distinct: number;
  /** The caller's key for each dense key. */
  original: Float64Array;
  /** Requests per dense key. */
  counts: Int32Array;
  /** Index of the next request for the same key, or `keys.length` if there is none. */
  nextUse: Int32Array;
  /** Dense keys from most to least requested; ties go to the key requested first. */
  hottest: Int32Array;
}

/** Belady's heap encodes "never again" as length + key, so indices must stay well inside int32. */
const maxReplayRequests = 2 ** 30;
/** Keys below this are numbered through a lookup table (64 MB at most) instead of a Map. */
const denseTableLimit = 2 ** 24;

/** Numbers the caller's keys (any non-negative safe integers) densely and precomputes next uses. */
export function prepareReplay(keys: ArrayLike<number>): ReplayTrace {
  const n = keys.length;
  if (n >= maxReplayRequests) throw new Error(`replay: ${n} requests exceed the ${maxReplayRequests} limit`);
  let largest = 0;
  for (let i = 0; i < n; i++) {
    const key = keys[i]!;
    if (!Number.isSafeInteger(key) || key < 0) throw new Error(`replay: key ${key} at request ${i} is not a non-negative integer`);
    if (key > largest) largest = key;
  }
  // K3 keys (layer x 896 + expert) fit a small table, which numbers tens of millions of requests
  // several times faster than a Map; sparse key spaces fall back to the Map.
  const table = largest < denseTableLimit ? new Int32Array(largest + 1).fill(-1) : undefined;
  const numbering = new Map<number, number>();
  const dense = new Int32Array(n);
  const originalList: number[] = [];
  for (let i = 0; i < n; i++) {
    const key = keys[i]!;
    let id = table ? table[key]! : (numbering.get(key) ?? -1);
    if (id < 0) {
      id = originalList.length;
      if (table) table[key] = id;
      else numbering.set(key, id);
      originalList.push(key);
    }
    dense[i] = id;
  }
  const distinct = originalList.length;
  const counts = new Int32Array(distinct);
  const nextUse = new Int32Array(n);
  const upcoming = new Int32Array(distinct).fill(n);
  for (let i = n - 1; i >= 0; i--) {
    const id = dense[i]!;
    nextUse[i] = upcoming[id]!;
    upcoming[id] = i;
    counts[id]!++;
  }
  const hottest = Int32Array.from({ length: distinct }, (_, id) => id).sort((a, b) => counts[b]! - counts[a]! || a - b);
  return { keys: dense, distinct, original: Float64Array.from(originalList), counts, nextUse, hottest };
}

/**
 * LRU over a doubly linked recency list of dense keys. Keys marked in `pinned` never enter it:
 * the first request of each is a miss and every later one a hit, as if it held its own slot.
 */
function replayLruCore(trace: ReplayTrace, slots: number, pinned: Uint8Array | undefined): PolicyOutcome {
  const { keys, distinct } = trace;
  const none = -1;
  const newer = new Int32Array(distinct).fill(none);
  const older = new Int32Array(distinct).fill(none);
  const resident = new Uint8Array(distinct);
  const pinnedSeen = new Uint8Array(distinct);
  let newest = none;
  let oldest = none;
  let used = 0;
  let hits = 0;

  const unlink = (id: number) => {
    const n = newer[id]!;
    const o = older[id]!;
    if (n === none) newest = o;
    else older[n] = o;
    if (o === none) oldest = n;
    else newer[o] = n;
  };
  const pushNewest = (id: number) => {
    older[id] = newest;
    newer[id] = none;
    if (newest === none) oldest = id;
    else newer[newest] = id;
    newest = id;
  };

  for (let i = 0; i < keys.length; i++) {
    const id = keys[i]!;
    if (pinned?.[id]) {
      if (pinnedSeen[id]) hits++;
      pinnedSeen[id] = 1;
      continue;
    }
    if (resident[id]) {
      hits++;
      if (newest !== id) {
        unlink(id);
        pushNewest(id);
      }
      continue;
    }
    if (slots === 0) continue;
    if (used === slots) {
      const victim = oldest;
      unlink(victim);
      resident[victim] = 0;
      used--;
    }
    pushNewest(id);
    resident[id] = 1;
    used++;
  }
  return { hits, misses: keys.length - hits };
}

export function replayLru(trace: ReplayTrace, slots: number): PolicyOutcome {
  checkSlots(slots);
  return replayLruCore(trace, slots, undefined);
}

/** Pins the floor(slots / 2) hottest keys and runs LRU on the other slots. */
export function replayPinLru(trace: ReplayTrace, slots: number): PolicyOutcome {
  checkSlots(slots);
  const pinCount = Math.min(Math.floor(slots / 2), trace.distinct);
  const pinned = new Uint8Array(trace.distinct);
  for (let rank = 0; rank < pinCount; rank++) pinned[trace.hottest[rank]!] = 1;
  return replayLruCore(trace, slots - pinCount, pinned);
}

/**
 * Belady with bypass. A max-heap holds each resident key's next use; a key's next-use value
 * changes on every hit, so old heap entries are left behind and skipped when they surface
 * (lazy deletion), which keeps the heap at most one entry per request.
 */
export function replayBelady(trace: ReplayTrace, slots: number): PolicyOutcome {
  checkSlots(slots);
  const { keys, distinct, nextUse } = trace;
  const n = keys.length;
  // Next uses are request indices, unique across keys; "never again" becomes n + key so that
  // every value still names exactly one key.
  const keyOf = (use: number) => (use < n ? keys[use]! : use - n);
  const resident = new Uint8Array(distinct);
  const currentUse = new Int32Array(distinct);
  const heap = new Int32Array(n);
  let size = 0;
  let used = 0;
  let hits = 0;

  const push = (value: number) => {
    let at = size++;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      const above = heap[parent]!;
      if (above >= value) break;
      heap[at] = above;
      at = parent;
    }
    heap[at] = value;
  };
  const pop = () => {
    const last = heap[--size]!;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= size) break;
      if (child + 1 < size && heap[child + 1]! > heap[child]!) child++;
      if (heap[child]! <= last) break;
      heap[at] = heap[child]!;
      at = child;
    }
    if (size > 0) heap[at] = last;
  };
  /** The furthest next use among resident keys, after discarding stale entries. */
  const furthest = () => {
    for (;;) {
      const top = heap[0]!;
      const key = keyOf(top);
      if (resident[key] && currentUse[key] === top) return top;
      pop();
    }
  };

  for (let i = 0; i < n; i++) {
    const id = keys[i]!;
    const next = nextUse[i]! < n ? nextUse[i]! : n + id;
    if (resident[id]) {
      hits++;
      currentUse[id] = next;
      push(next);
      continue;
    }
    if (slots === 0) continue;
    if (used === slots) {
      const victimUse = furthest();
      if (next > victimUse) continue; // bypass: every resident key is needed before this one
      pop();
      resident[keyOf(victimUse)] = 0;
      used--;
    }
    resident[id] = 1;
    currentUse[id] = next;
    push(next);
    used++;
  }
  return { hits, misses: n - hits };
}

export function replayAll(trace: ReplayTrace, slots: number): ReplayRow {
  if (slots >= trace.distinct) {
    // Nothing is ever evicted, so every policy misses exactly once per key; the large rows of
    // the default table need no replay.
    const compulsory = { hits: reuseCount(trace), misses: trace.distinct };
    return { slots, lru: compulsory, belady: { ...compulsory }, pinLru: { ...compulsory } };
  }
  return { slots, lru: replayLru(trace, slots), belady: replayBelady(trace, slots), pinLru: replayPinLru(trace, slots) };
}

/** Requests that repeat an earlier key: the hits no policy at any size can exceed. */
export function reuseCount(trace: ReplayTrace): number {
  return trace.keys.length - trace.distinct;
}

function checkSlots(slots: number): void {
  if (!Number.isSafeInteger(slots) || slots < 0) throw new Error(`replay: ${slots} is not a slot count`);
}
