import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { prepareReplay, replayAll, replayBelady, replayLru, replayPinLru, reuseCount } from "../../../src/offline/cache-sim.ts";
import {
  decodeTrace, dumpCacheTrace, encodeTrace, ExpertTraceRecorder, readTraceFile, traceIdLimit, traceWrittenLine, writeTraceFile,
} from "../../../src/weights/expert-trace.ts";
import { tempDir } from "../../support/tmp.ts";

/** Deterministic generator, so a failing random case can be replayed. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0;
    return state / 2 ** 32;
  };
}

function randomTrace(next: () => number, length: number, keys: number): number[] {
  // Squaring skews towards low keys, so traces have hot keys like real routing.
  return Array.from({ length }, () => Math.floor(keys * next() ** 2));
}

/** The fewest misses any policy (bypass allowed) can achieve, by search over cache contents. */
function optimalMisses(trace: readonly number[], slots: number): number {
  let states = new Map<number, number>([[0, 0]]); // resident set as a bit mask -> misses so far
  for (const key of trace) {
    const bit = 1 << key;
    const after = new Map<number, number>();
    const keep = (mask: number, misses: number) => {
      if ((after.get(mask) ?? Infinity) > misses) after.set(mask, misses);
    };
    for (const [mask, misses] of states) {
      if (mask & bit) {
        keep(mask, misses);
        continue;
      }
      keep(mask, misses + 1); // bypass
      const resident = mask.toString(2).split("1").length - 1;
      if (resident < slots) keep(mask | bit, misses + 1);
      for (let victim = 0; victim < 31 && resident === slots; victim++) {
        if (mask & (1 << victim)) keep((mask & ~(1 << victim)) | bit, misses + 1);
      }
    }
    states = after;
  }
  return Math.min(...states.values());
}

/** LRU the obvious way: an array in recency order, oldest first. */
function referenceLru(trace: readonly number[], slots: number, pinned = new Set<number>()): number {
  const recency: number[] = [];
  const seenPinned = new Set<number>();
  let hits = 0;
  for (const key of trace) {
    if (pinned.has(key)) {
      if (seenPinned.has(key)) hits++;
      seenPinned.add(key);
      continue;
    }
    const at = recency.indexOf(key);
    if (at >= 0) {
      hits++;
      recency.splice(at, 1);
    } else if (recency.length === slots) {
      recency.shift();
    }
    if (slots > 0) recency.push(key);
  }
  return hits;
}

describe("replay policies on hand-computed traces", () => {
  // The textbook reference string (Silberschatz, 3 frames): LRU faults 12 times; OPT without
  // bypass faults 9 times; with bypass the request for 4 (never used again) is not admitted,
  // which keeps 3 resident and saves one more miss.
  const textbook = [7, 0, 1, 2, 0, 3, 0, 4, 2, 3, 0, 3, 2, 1, 2, 0, 1, 7, 0, 1];

  test("LRU misses 12 of 20 at 3 slots", () => {
    expect(replayLru(prepareReplay(textbook), 3)).toEqual({ hits: 8, misses: 12 });
  });

  test("Belady with bypass misses 8 of 20 at 3 slots", () => {
    expect(replayBelady(prepareReplay(textbook), 3)).toEqual({ hits: 12, misses: 8 });
    expect(optimalMisses(textbook, 3)).toBe(8);
  });

  test("PIN+LRU pins key 0 (6 requests) and runs LRU on 2 slots: 10 misses", () => {
    expect(replayPinLru(prepareReplay(textbook), 3)).toEqual({ hits: 10, misses: 10 });
  });

  test("a cyclic scan one key larger than the cache defeats LRU but not Belady", () => {
    const slots = 64;
    const scan = Array.from({ length: 50 * (slots + 1) }, (_, i) => i % (slots + 1));
    const trace = prepareReplay(scan);
    expect(replayLru(trace, slots).hits).toBe(0);
    const belady = replayBelady(trace, slots);
    // After the first pass Belady misses about once per `slots` requests.
    expect(belady.hits).toBeGreaterThan(0.95 * reuseCount(trace));
    expect(replayPinLru(trace, slots).hits).toBeGreaterThan(0);
  });

  test("A B C repeated at 2 slots: LRU 0 hits, Belady 4", () => {
    const trace = prepareReplay([0, 1, 2, 0, 1, 2, 0, 1, 2]);
    expect(replayLru(trace, 2).hits).toBe(0);
    expect(replayBelady(trace, 2).hits).toBe(4);
    expect(optimalMisses([0, 1, 2, 0, 1, 2, 0, 1, 2], 2)).toBe(5);
  });

  test("zero slots miss everything; enough slots miss once per key", () => {
    const trace = prepareReplay([5, 9, 5, 5, 9, 1]);
    for (const replay of [replayLru, replayBelady, replayPinLru]) {
      expect(replay(trace, 0)).toEqual({ hits: 0, misses: 6 });
      expect(replay(trace, 3)).toEqual({ hits: 3, misses: 3 });
    }
  });

  test("a slot count that is not a whole number is a programming error", () => {
    expect(() => replayLru(prepareReplay([1]), -1)).toThrow("not a slot count");
    expect(() => replayBelady(prepareReplay([1]), 1.5)).toThrow("not a slot count");
  });
});

describe("prepareReplay", () => {
  test("numbers keys in order of first request, with counts, next uses and the hottest order", () => {
    const trace = prepareReplay([40, 7, 40, 9, 7, 40]);
    expect([...trace.keys]).toEqual([0, 1, 0, 2, 1, 0]);
    expect([...trace.original]).toEqual([40, 7, 9]);
    expect([...trace.counts]).toEqual([3, 2, 1]);
    expect([...trace.nextUse]).toEqual([2, 4, 5, 6, 6, 6]);
    expect([...trace.hottest]).toEqual([0, 1, 2]);
    expect(reuseCount(trace)).toBe(3);
  });

  test("ties in the hottest order go to the key requested first", () => {
    expect([...prepareReplay([3, 2, 1, 1, 2, 3]).hottest]).toEqual([0, 1, 2]);
  });

  test("sparse keys beyond the lookup table are numbered the same way", () => {
    const trace = prepareReplay([2 ** 40, 5, 2 ** 40, 2 ** 33]);
    expect([...trace.keys]).toEqual([0, 1, 0, 2]);
    expect([...trace.original]).toEqual([2 ** 40, 5, 2 ** 33]);
    expect(replayBelady(trace, 1).hits).toBe(1);
  });

  test("refuses keys that are not non-negative integers", () => {
    expect(() => prepareReplay([1, -2])).toThrow("key -2 at request 1");
    expect(() => prepareReplay([0.5])).toThrow("key 0.5");
  });
});

describe("replay properties over random traces", () => {
  test("Belady equals the exhaustive optimum on small traces", () => {
    const next = random(7);
    for (let round = 0; round < 300; round++) {
      const keys = 2 + Math.floor(next() * 5);
      const trace = randomTrace(next, 4 + Math.floor(next() * 12), keys);
      const slots = 1 + Math.floor(next() * 3);
      expect(replayBelady(prepareReplay(trace), slots).misses).toBe(optimalMisses(trace, slots));
    }
  });

  test("LRU and PIN+LRU agree with straightforward reference implementations", () => {
    const next = random(11);
    for (let round = 0; round < 200; round++) {
      const trace = randomTrace(next, 1 + Math.floor(next() * 300), 2 + Math.floor(next() * 40));
      const replay = prepareReplay(trace);
      const slots = Math.floor(next() * 30);
      expect(replayLru(replay, slots).hits).toBe(referenceLru(trace, slots));
      const pinCount = Math.min(Math.floor(slots / 2), replay.distinct);
      const pinned = new Set(Array.from(replay.hottest.subarray(0, pinCount), (id) => replay.original[id]!));
      expect(replayPinLru(replay, slots).hits).toBe(referenceLru(trace, slots - pinCount, pinned));
    }
  });

  test("Belady never misses more than LRU or PIN+LRU, and no policy beats the compulsory misses", () => {
    const next = random(23);
    for (let round = 0; round < 400; round++) {
      const replay = prepareReplay(randomTrace(next, 50 + Math.floor(next() * 2000), 5 + Math.floor(next() * 300)));
      for (const slots of [1, 2, 5, 17, 40, 100, 250]) {
        const row = replayAll(replay, slots);
        expect(row.belady.misses).toBeLessThanOrEqual(row.lru.misses);
        expect(row.belady.misses).toBeLessThanOrEqual(row.pinLru.misses);
        for (const outcome of [row.lru, row.belady, row.pinLru]) {
          expect(outcome.hits + outcome.misses).toBe(replay.keys.length);
          expect(outcome.misses).toBeGreaterThanOrEqual(replay.distinct);
        }
      }
    }
  });

  test("LRU and Belady never lose hits when the cache grows", () => {
    const next = random(31);
    for (let round = 0; round < 50; round++) {
      const replay = prepareReplay(randomTrace(next, 3000, 200));
      let previous = { lru: -1, belady: -1 };
      for (let slots = 0; slots <= 210; slots += 7) {
        const current = { lru: replayLru(replay, slots).hits, belady: replayBelady(replay, slots).hits };
        expect(current.lru).toBeGreaterThanOrEqual(previous.lru);
        expect(current.belady).toBeGreaterThanOrEqual(previous.belady);
        previous = current;
      }
    }
  });

  test("replayAll's shortcut for a cache that holds every key matches a full replay", () => {
    const replay = prepareReplay(randomTrace(random(5), 5000, 100));
    const row = replayAll(replay, replay.distinct);
    expect(row.lru).toEqual(replayLru(replay, replay.distinct));
    expect(row.belady).toEqual(replayBelady(replay, replay.distinct));
    expect(row.pinLru).toEqual(replayPinLru(replay, replay.distinct));
  });

  // Speed is measured by benchmarks, not timed tests; this only checks a large trace's result.
  test("a large trace (200,000 requests) replays with Belady no worse than LRU", () => {
    const keys = randomTrace(random(3), 200_000, 20_000);
    const replay = prepareReplay(keys);
    const row = replayAll(replay, 2_000);
    expect(row.belady.misses).toBeLessThanOrEqual(row.lru.misses);
    expect(row.lru.hits + row.lru.misses).toBe(200_000);
  });
});

describe("expert trace files", () => {
  test("record, dump and read back: pairs, histogram and the report line", () => {
    const recorder = new ExpertTraceRecorder(93, 896);
    const pairs: [number, number][] = [[1, 5], [1, 895], [92, 0], [1, 5]];
    // Past the initial buffer, so growth is exercised.
    for (let i = 0; i < 40_000; i++) pairs.push([1 + (i % 92), (i * 7) % 896]);
    for (const [layer, expert] of pairs) recorder.append(layer, expert);
    expect(recorder.requests).toBe(pairs.length);
    expect(recorder.count(1, 5)).toBe(2 + pairs.slice(4).filter(([l, e]) => l === 1 && e === 5).length);

    const dir = tempDir("trace");
    const dump = dumpCacheTrace(dir, recorder);
    expect(dump.trace).toEqual({ path: join(dir, "expert_trace.bin"), requests: pairs.length, bytes: 8 * pairs.length });
    expect(traceWrittenLine(dump.trace!)).toBe(`wrote ${dir}/expert_trace.bin: ${pairs.length} requests (${((8 * pairs.length) / 1000).toFixed(1)} KB)`);

    const back = readTraceFile(join(dir, "expert_trace.bin"));
    expect([...back.layers]).toEqual(pairs.map(([l]) => l));
    expect([...back.experts]).toEqual(pairs.map(([, e]) => e));

    const histogram = JSON.parse(readFileSync(dump.histogramPath, "utf8"));
    expect(histogram.n_layers).toBe(93);
    expect(histogram.n_experts).toBe(896);
    expect(histogram.counts["1,5"]).toBe(recorder.count(1, 5));
    expect(histogram.counts["92,0"]).toBe(recorder.count(92, 0));
    expect(histogram.counts["0,0"]).toBeUndefined(); // sparse: layer 0 was never asked
    const total = Object.values(histogram.counts as Record<string, number>).reduce((a, b) => a + b, 0);
    expect(total).toBe(pairs.length);
  });

  test("the file is int32 little-endian (layer, expert) pairs", () => {
    expect([...encodeTrace(Int32Array.of(1, 2, 300, 0))]).toEqual([1, 0, 0, 0, 2, 0, 0, 0, 44, 1, 0, 0, 0, 0, 0, 0]);
    const path = join(tempDir("trace-le"), "t.bin");
    writeTraceFile(path, Int32Array.of(4, 520, 24, 136));
    expect([...readFileSync(path)]).toEqual([4, 0, 0, 0, 8, 2, 0, 0, 24, 0, 0, 0, 136, 0, 0, 0]);
  });

  test("an empty recorder writes the histogram but no trace", () => {
    const dir = tempDir("trace-empty");
    const dump = dumpCacheTrace(dir, new ExpertTraceRecorder(4, 8));
    expect(dump.trace).toBeUndefined();
    expect(existsSync(join(dir, "expert_trace.bin"))).toBe(false);
    expect(JSON.parse(readFileSync(dump.histogramPath, "utf8"))).toEqual({ n_layers: 4, n_experts: 8, counts: {} });
  });

  test("the recorder refuses ids outside its model", () => {
    const recorder = new ExpertTraceRecorder(4, 8);
    expect(() => recorder.append(4, 0)).toThrow("outside 4 x 8");
    expect(() => recorder.append(0, -1)).toThrow("outside 4 x 8");
    expect(() => recorder.append(0, 1.5)).toThrow("outside 4 x 8");
  });

  test("the reader refuses a length that is not whole pairs, naming the file", () => {
    expect(() => decodeTrace(new Uint8Array(12), "/t/odd.bin")).toThrow(
      "/t/odd.bin: 12 bytes is not a whole number of 8-byte (layer, expert) pairs; the trace is truncated or not a trace",
    );
  });

  test("the reader refuses negative and out-of-range ids, naming the request", () => {
    expect(() => decodeTrace(encodeTrace(Int32Array.of(1, 2, -1, 3)), "/t/neg.bin")).toThrow(
      `/t/neg.bin: request 1 is (layer -1, expert 3); ids must be from 0 to ${traceIdLimit - 1}`,
    );
    expect(() => decodeTrace(encodeTrace(Int32Array.of(1, -7)), "/t/neg.bin")).toThrow("request 0 is (layer 1, expert -7)");
    expect(() => decodeTrace(encodeTrace(Int32Array.of(1, traceIdLimit)), "/t/big.bin")).toThrow(`expert ${traceIdLimit})`);
  });

  test("the reader refuses an empty or missing file with exit code 1", () => {
    expect(() => decodeTrace(new Uint8Array(0), "/t/empty.bin")).toThrow("/t/empty.bin: the expert trace is empty");
    const missing = join(tempDir("trace-missing"), "nope.bin");
    try {
      readTraceFile(missing);
      throw new Error("expected a refusal");
    } catch (error) {
      expect((error as { exitCode?: number }).exitCode).toBe(1);
      expect((error as Error).message).toBe(`${missing}: cannot read the expert trace (ENOENT)`);
    }
  });

  test("bytes at an unaligned offset decode correctly", () => {
    const shifted = new Uint8Array(17).subarray(1);
    shifted.set(encodeTrace(Int32Array.of(5, 6, 7, 8)));
    expect([...decodeTrace(shifted, "mem").layers]).toEqual([5, 7]);
  });
});
