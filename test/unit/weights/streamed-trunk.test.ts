/**
 * The streamed trunk (src/weights/streamed-trunk.ts) opened directly, on tiny13's packed trunk:
 * under plans that pin a prefix and ring the rest (two slots, one slot) or pin everything, every
 * tensor of every layer it hands out holds the resident trunk's bytes (matrices: the checkpoint's
 * own); pinned layers are read once and kept where they are, ringed ones read again each pass
 * inside the ring's memory; the read counters follow from trunk.json's layer sizes; a trunk.json
 * whose recorded run, layout or source does not fit the checkpoint is refused with one line when
 * opened, and a changed byte of trunk.bin when its layer is first read; close() frees every
 * buffer it allocated and closes trunk.bin.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { cpSync, existsSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { dtypeBytes, indexCheckpoint } from "../../../src/checkpoint/safetensors.ts";
import { ExitCode, K3Error } from "../../../src/errors.ts";
import { allocAlignment, NativeBuffer, u8View } from "../../../src/native/memory.ts";
import { ResidentTrunk } from "../../../src/weights/resident-trunk.ts";
import { openPackedTrunk, StreamedTrunk, type PackedTrunk } from "../../../src/weights/streamed-trunk.ts";
import type { RingPlan } from "../../../src/weights/trunk.ts";
import { TensorReader } from "../../../src/weights/tensor-reader.ts";
import { trunkBinName, trunkJsonName, type TrunkManifest } from "../../../src/weights/trunk-file.ts";
import { layerLayout, type LayerLayout } from "../../../src/weights/trunk-layout.ts";
import type { LayerWeights } from "../../../src/weights/types.ts";
import { modelDir, packedFixtureTrunk } from "../../support/fixtures.ts";
import { tempDir } from "../../support/tmp.ts";

const name = "tiny13";
const dir = modelDir(name);
const { config } = loadConfig(join(dir, "config.json"));
const L = config.numLayers;
const P = 4;

/** What is open and must be closed when a test ends, whatever it asserted. */
const opened: { close(): void }[] = [];
afterEach(() => {
  for (const item of opened.splice(0).reverse()) item.close();
});

function checkpoint(modelDirectory = dir) {
  const index = indexCheckpoint(modelDirectory);
  const reader = new TensorReader(index);
  opened.push(reader);
  const layouts: LayerLayout[] = Array.from({ length: L }, (_, l) => layerLayout(index, config, l));
  return { index, reader, layouts };
}

/** One tensor as a layer hands it out: where it is and a copy of its bytes. */
interface Held {
  ptr: number;
  bytes: Uint8Array;
  matrix: boolean;
}

/** Every matrix and vector of a bound layer by name, copied out of native memory. */
function tensorsOf(weights: LayerWeights): Map<string, Held> {
  const out = new Map<string, Held>();
  const visit = (value: unknown) => {
    if (value === null || typeof value !== "object") return;
    const o = value as Record<string, unknown>;
    if (typeof o.name === "string" && typeof o.ptr === "number") {
      const matrix = typeof o.rows === "number";
      const length = matrix ? (o.rows as number) * (o.cols as number) * dtypeBytes[o.dtype as "BF16" | "F32"] : (o.length as number) * 4;
      out.set(o.name, { ptr: o.ptr, bytes: u8View(o.ptr as never, 0, length).slice(), matrix });
      return;
    }
    for (const v of Object.values(o)) visit(v);
  };
  visit(weights);
  return out;
}

/** The resident trunk's layers, the reference every streamed layer must equal. */
function residentTensors(): Map<string, Held>[] {
  const { index, reader, layouts } = checkpoint();
  const resident = new ResidentTrunk(index, reader, config, layouts, []);
  try {
    return layouts.map((_, l) => tensorsOf(resident.layer(l)));
  } finally {
    resident.close();
  }
}
const reference = residentTensors();

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Passes over every layer in order, as the forward pass asks; each layer's tensors taken at the last moment they are valid. */
function passes(trunk: StreamedTrunk, count: number): { tensors: Map<string, Held>[][]; weights: LayerWeights[][]; stats: (typeof trunk.stats)[] } {
  const tensors: Map<string, Held>[][] = [];
  const weights: LayerWeights[][] = [];
  const stats: (typeof trunk.stats)[] = [];
  for (let p = 0; p < count; p++) {
    tensors.push([]);
    weights.push([]);
    for (let l = 0; l < L; l++) {
      const w = trunk.layer(l);
      // Give the read ahead of the next layer time to land before this layer's bytes are taken:
      // one placed over them would show here.
      Bun.sleepSync(1);
      tensors[p]!.push(tensorsOf(w));
      weights[p]!.push(w);
    }
    stats.push({ ...trunk.stats });
  }
  return { tensors, weights, stats };
}

function open(plan: RingPlan, pack = packedFixtureTrunk(name), readFaults?: ReadonlyMap<number, number>): { packed: PackedTrunk; trunk: StreamedTrunk; manifest: TrunkManifest } {
  const { reader, layouts } = checkpoint();
  const packed = openPackedTrunk(pack, layouts, reader);
  const trunk = new StreamedTrunk(packed, config, plan, [], readFaults);
  opened.push(trunk);
  return { packed, trunk, manifest: JSON.parse(readFileSync(join(pack, trunkJsonName), "utf8")) as TrunkManifest };
}

/** The plans the planner makes (src/plan/trunk-plan.ts): a pinned prefix and two slots of the largest unpinned layer, or one. */
function ringPlan(packed: PackedTrunk, pinned: number, slots: 0 | 1 | 2): RingPlan {
  const largest = Math.max(0, ...packed.layerCosts.slice(pinned));
  return { pinned, ringSlots: slots, ringBytes: slots * largest };
}

/** A layer's tensors' [lowest address, highest end). */
function span(tensors: Map<string, Held>, matricesOnly = true): [number, number] {
  const held = [...tensors.values()].filter((t) => t.matrix || !matricesOnly);
  return [Math.min(...held.map((t) => t.ptr)), Math.max(...held.map((t) => t.ptr + t.bytes.length))];
}

function expectSameAsResident(tensors: Map<string, Held>[], label: string): void {
  for (let l = 0; l < L; l++) {
    const want = reference[l]!;
    const got = tensors[l]!;
    expect([...got.keys()].sort(), `${label} layer ${l}`).toEqual([...want.keys()].sort());
    const differing = [...want].filter(([n, t]) => Buffer.compare(got.get(n)!.bytes, t.bytes) !== 0).map(([n]) => n);
    expect(differing, `${label} layer ${l}`).toEqual([]);
  }
}

describe("a pinned prefix and a ring", () => {
  test("the resident reference holds the checkpoint's own matrix bytes (so it is a reference)", () => {
    const { index, reader } = checkpoint();
    let matrices = 0;
    for (const layer of reference) {
      for (const [n, t] of layer) {
        if (!t.matrix) continue;
        matrices++;
        expect(Buffer.compare(t.bytes, reader.readRaw(index.get(n)!)), n).toBe(0);
      }
    }
    expect(matrices).toBeGreaterThan(10 * L);
  });

  for (const slots of [2, 1] as const) {
    test(`${slots} ring slot(s): every layer's bytes, pinned ones kept, ringed ones read each pass, the counters from trunk.json`, () => {
      const { packed, manifest } = open({ pinned: 0, ringSlots: 0, ringBytes: 0 });
      const plan = ringPlan(packed, P, slots);
      const { trunk } = open(plan);
      expect(trunk.layerCount).toBe(L);
      const { tensors, weights, stats } = passes(trunk, 3);
      for (const [p, pass] of tensors.entries()) expectSameAsResident(pass, `pass ${p}`);

      const nbytes = manifest.layers.map((l) => l.nbytes);
      const all = sum(nbytes);
      const unpinned = sum(nbytes.slice(P));
      const [first, second, third] = stats as [typeof trunk.stats, typeof trunk.stats, typeof trunk.stats];
      // First pass: every layer read once, whole. Then only the ring's layers, and the pinned ones are hits.
      expect([first.binds, first.hits, first.reads, first.bytesRead]).toEqual([L, 0, L, all]);
      expect([second.binds, second.hits, second.reads, second.bytesRead]).toEqual([2 * L, P, 2 * L - P, all + unpinned]);
      expect([third.binds - second.binds, third.hits - second.hits, third.reads - second.reads, third.bytesRead - second.bytesRead])
        .toEqual([L, P, L - P, unpinned]);
      expect(first.waitSeconds).toBeGreaterThanOrEqual(0);
      expect(first.readSeconds).toBeGreaterThan(0);
      expect([third.bytesDecoded, third.codecSeconds]).toEqual([0, 0]); // a plain pack decodes nothing

      // Pinned layers: the same bound layer at the same addresses every pass.
      for (let l = 0; l < P; l++) {
        expect(weights[1]![l]).toBe(weights[0]![l]!);
        expect(span(tensors[2]![l]!)).toEqual(span(tensors[0]![l]!));
      }
      // Ringed layers live inside the ring's memory (its planned bytes, plus the reads' window
      // slack), apart from every pinned layer.
      const ring = tensors.flatMap((pass) => pass.slice(P).map((t) => span(t)));
      const ringFrom = Math.min(...ring.map(([a]) => a));
      const ringTo = Math.max(...ring.map(([, b]) => b));
      expect(ringTo - ringFrom).toBeLessThanOrEqual(plan.ringBytes + 4 * allocAlignment());
      for (let l = 0; l < P; l++) {
        const [a, b] = span(tensors[0]![l]!);
        expect(b <= ringFrom || a >= ringTo, `pinned layer ${l} outside the ring`).toBe(true);
      }

      if (slots === 2) {
        // Two slots hold any two layers side by side: every ringed layer is read ahead whole, and
        // two consecutive ones never overlap.
        expect(third.aheadBytes - second.aheadBytes).toBe(unpinned);
        expect(first.aheadBytes).toBeGreaterThanOrEqual(unpinned);
        for (let l = P + 1; l < L; l++) {
          const [a, b] = span(tensors[1]![l]!);
          const [c, d] = span(tensors[1]![l - 1]!);
          expect(b <= c || a >= d, `layers ${l - 1} and ${l} apart`).toBe(true);
        }
      } else {
        // One slot: in the first pass the first ringed layer is read ahead whole (a pinned layer
        // computes beside an idle ring); after that each layer only as far as it fits beside the
        // layer in use, so some, not all, of a pass is read ahead.
        expect(first.aheadBytes).toBeGreaterThanOrEqual(nbytes[P]!);
        const ahead = third.aheadBytes - second.aheadBytes;
        expect(ahead).toBeGreaterThan(0);
        expect(ahead).toBeLessThan(unpinned);
      }
    });
  }

  test("every layer pinned (no ring): one read each, ever; a layer asked for twice in a row is a hit", () => {
    const { trunk, manifest } = open({ pinned: L, ringSlots: 0, ringBytes: 0 });
    const { tensors, stats } = passes(trunk, 2);
    expectSameAsResident(tensors[1]!, "pass 1");
    const all = sum(manifest.layers.map((l) => l.nbytes));
    expect([stats[1]!.binds, stats[1]!.hits, stats[1]!.reads, stats[1]!.bytesRead, stats[1]!.aheadBytes]).toEqual([2 * L, L, L, all, 0]);
  });

  test("a ringed layer asked for again before the next is a hit, not a read; out of order it is read again", () => {
    const { packed } = open({ pinned: 0, ringSlots: 0, ringBytes: 0 });
    const { trunk, manifest } = open(ringPlan(packed, P, 2));
    trunk.layer(P);
    const before = { ...trunk.stats };
    trunk.layer(P);
    expect([trunk.stats.hits - before.hits, trunk.stats.reads - before.reads]).toEqual([1, 0]);
    // Skipping ahead: not the layer read ahead, so it is read now, and its bytes are still its own.
    const skipped = tensorsOf(trunk.layer(P + 3));
    expect([trunk.stats.reads - before.reads, trunk.stats.bytesRead - before.bytesRead]).toEqual([1, manifest.layers[P + 3]!.nbytes]);
    expect([...skipped].filter(([n, t]) => Buffer.compare(t.bytes, reference[P + 3]!.get(n)!.bytes) !== 0)).toEqual([]);
  });
});

describe("refusals", () => {
  /** A copy of the fixture's pack with trunk.json changed by `change`. */
  function changedPack(label: string, change: (m: TrunkManifest) => void): string {
    const pack = join(tempDir(`streamed-${label}`), "pack");
    cpSync(packedFixtureTrunk(name), pack, { recursive: true });
    const manifest = JSON.parse(readFileSync(join(pack, trunkJsonName), "utf8")) as TrunkManifest;
    change(manifest);
    writeFileSync(join(pack, trunkJsonName), JSON.stringify(manifest));
    return pack;
  }

  /** What opening `pack` throws: a K3Error of exit 1 on one line. */
  function refusal(pack: string, modelDirectory = dir): string {
    const { reader, layouts } = checkpoint(modelDirectory);
    let error: unknown;
    try {
      openPackedTrunk(pack, layouts, reader);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(K3Error);
    expect((error as K3Error).exitCode).toBe(ExitCode.runtime);
    expect((error as K3Error).message).not.toContain("\n");
    return (error as K3Error).message;
  }

  const { index, layouts } = checkpoint();
  const run = layouts[3]!.run!;
  const shardName = basename(index.shards[run.shard]!.path);

  test("the unchanged pack opens: the refusals below are the changes'", () => {
    const { reader } = checkpoint();
    const packed = openPackedTrunk(packedFixtureTrunk(name), layouts, reader);
    expect(packed.layers.map((l) => [l.shard, l.run_start])).toEqual(layouts.map((l) => [basename(index.shards[l.run!.shard]!.path), l.run!.start]));
  });

  test("a recorded run in another shard, or at another byte, is refused naming both", () => {
    const pack = changedPack("shard", (m) => { m.layers[3]!.shard = "model-00002-of-00002.safetensors"; });
    expect(refusal(pack)).toBe(
      `${pack}: layer 3 of the packed trunk records its run at model-00002-of-00002.safetensors byte ${run.start}; this checkpoint has it at ${shardName} byte ${run.start}; re-run 'k3 pack-trunk'`,
    );
    const moved = run.start + 2 * allocAlignment();
    const start = changedPack("start", (m) => { m.layers[3]!.run_start = moved; });
    expect(refusal(start)).toBe(
      `${start}: layer 3 of the packed trunk records its run at ${shardName} byte ${moved}; this checkpoint has it at ${shardName} byte ${run.start}; re-run 'k3 pack-trunk'`,
    );
  });

  test("a layer laid out otherwise, or packed from other contents, is refused", () => {
    // Two tensors of layer 5 with their offsets swapped: a valid trunk.json, another layout.
    const pack = changedPack("layout", (m) => {
      const tensors = Object.values(m.layers[5]!.tensors);
      const a = tensors.find((t) => tensors.some((u) => u !== t && u.nbytes === t.nbytes && u.dtype === t.dtype));
      const b = tensors.find((u) => u !== a && u.nbytes === a?.nbytes && u.dtype === a.dtype);
      if (!a || !b) throw new Error("layer 5 has no two tensors of one size and dtype");
      [a.off, b.off] = [b.off, a.off];
    });
    expect(refusal(pack)).toBe(`${pack}: layer 5 of the packed trunk does not match this checkpoint; re-run 'k3 pack-trunk'`);
    // The same shapes with one byte changed at the start of a layer-2 tensor: another source.
    const other = join(tempDir("streamed-other-model"), name);
    cpSync(dir, other, { recursive: true });
    const entry = index.get(layouts[2]!.tensors[0]!.name)!;
    const shard = join(other, basename(index.shards[entry.shard]!.path));
    const bytes = readFileSync(shard);
    bytes[entry.offset]! ^= 0x40;
    writeFileSync(shard, bytes);
    expect(refusal(packedFixtureTrunk(name), other)).toMatch(
      new RegExp(`^${packedFixtureTrunk(name)}: layer 2 of the packed trunk was packed from other contents than ${other} holds \\(source [0-9a-f]{16}, this checkpoint [0-9a-f]{16}\\); re-run 'k3 pack-trunk'$`),
    );
  });

  test("a changed byte of trunk.bin is refused when its layer is first read, pinned or ringed", () => {
    const pack = join(tempDir("streamed-flip"), "pack");
    cpSync(packedFixtureTrunk(name), pack, { recursive: true });
    const manifest = JSON.parse(readFileSync(join(pack, trunkJsonName), "utf8")) as TrunkManifest;
    const bin = readFileSync(join(pack, trunkBinName));
    for (const l of [1, P + 2]) bin[manifest.layers[l]!.file_off + manifest.layers[l]!.payload_bytes - 1]! ^= 1;
    writeFileSync(join(pack, trunkBinName), bin);
    const { packed } = open({ pinned: 0, ringSlots: 0, ringBytes: 0 }, pack);
    const { trunk } = open(ringPlan(packed, P, 2), pack);
    trunk.layer(0); // an unchanged layer is served
    for (const l of [1, P + 2]) {
      expect(() => trunk.layer(l)).toThrow(`${join(pack, trunkBinName)}: layer ${l} does not match its recorded hash (corrupted?); re-run 'k3 pack-trunk'`);
    }
  });

  test("an injected read failure names the file and the layer", () => {
    const { packed } = open({ pinned: 0, ringSlots: 0, ringBytes: 0 });
    const { trunk } = open(ringPlan(packed, P, 2), packedFixtureTrunk(name), new Map([[P + 1, 2]]));
    passes(trunk, 1); // the first read of each layer succeeds
    for (let l = 0; l <= P; l++) trunk.layer(l);
    expect(() => trunk.layer(P + 1)).toThrow(new RegExp(`${join(packedFixtureTrunk(name), trunkBinName)}: layer ${P + 1}.*EIO`));
  });
});

describe("close", () => {
  /** The files this process has open, where /proc says. */
  const openFiles = () => readdirSync("/proc/self/fd").flatMap((fd) => {
    try {
      return [readlinkSync(join("/proc/self/fd", fd))];
    } catch {
      return [];
    }
  });

  test("frees every buffer the trunk allocated, pinned and ring, and closes trunk.bin", () => {
    const pack = join(tempDir("streamed-close"), "pack");
    cpSync(packedFixtureTrunk(name), pack, { recursive: true });
    const { reader, layouts } = checkpoint();
    const packed = openPackedTrunk(pack, layouts, reader);
    const allocate = spyOn(NativeBuffer, "allocate");
    try {
      const trunk = new StreamedTrunk(packed, config, ringPlan(packed, P, 2), []);
      opened.push(trunk); // closed again after the test if an assertion stops it first (close is idempotent)
      if (existsSync("/proc/self/fd")) expect(openFiles()).toContain(join(pack, trunkBinName));
      passes(trunk, 2);
      const buffers = allocate.mock.results.map((r) => r.value as NativeBuffer);
      // Pinned layers (a buffer and a vector arena each), the ring (an arena and two vector arenas).
      expect(buffers.length).toBeGreaterThanOrEqual(2 * P + 3);
      trunk.close();
      const live = buffers.filter((b) => {
        try {
          void b.ptr;
          return true;
        } catch {
          return false;
        }
      });
      expect(live.length).toBe(0);
      if (existsSync("/proc/self/fd")) expect(openFiles()).not.toContain(join(pack, trunkBinName));
      // a pinned layer's view would point into freed memory: a closed trunk hands out nothing
      expect(() => trunk.layer(0)).toThrow(/closed trunk/);
      expect(() => trunk.layer(P)).toThrow(/closed trunk/);
    } finally {
      allocate.mockRestore();
    }
  });
});
