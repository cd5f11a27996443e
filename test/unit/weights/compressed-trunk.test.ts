/**
 * The compressed trunk (`k3 pack-trunk --compress`, src/weights/compressed-trunk.ts), in-process
 * on both fixtures: every layer decodes back to the checkpoint's bytes, whole or piece by piece;
 * the logits of a pass are the resident trunk's bit for bit with every layer pinned as stored and
 * with none (the second pass too, which skips the checksums); the same budget pins more layers
 * than the plain pack; and a damaged or mismatched pack is refused with a line naming the layer
 * and the block, never decoded into other weights.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { cpSync, readFileSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { indexCheckpoint } from "../../../src/checkpoint/safetensors.ts";
import { openEngine } from "../../../src/engine/open.ts";
import { NativeBuffer } from "../../../src/native/memory.ts";
import { blockCount, decodeBlocks, trunkEntryBytes } from "../../../src/native/trunk-code.ts";
import { budgetRequest } from "../../../src/plan/budget.ts";
import { planCompressedTrunk, planTrunk } from "../../../src/plan/trunk-plan.ts";
import { gbToBytes } from "../../../src/units.ts";
import { piecesOf, readTables, stagingPiece } from "../../../src/weights/compressed-trunk.ts";
import { openPackedTrunk } from "../../../src/weights/streamed-trunk.ts";
import { TensorReader } from "../../../src/weights/tensor-reader.ts";
import { readTrunkManifest, tableHash, trunkBinName, trunkJsonName, type TrunkManifest } from "../../../src/weights/trunk-file.ts";
import { layerLayout } from "../../../src/weights/trunk-layout.ts";
import { expectation, modelDir, oracleModels, packedFixtureTrunk } from "../../support/fixtures.ts";
import { bits, freeTestBuffers } from "../../support/kernels.ts";
import { tempDir } from "../../support/tmp.ts";

setDefaultTimeout(60_000);
afterAll(() => freeTestBuffers());

/** A copy of `from` to damage. */
function copyPack(from: string, label: string): string {
  const dir = join(tempDir(label), "pack");
  cpSync(from, dir, { recursive: true });
  return dir;
}

const manifestOf = (dir: string) => JSON.parse(readFileSync(join(dir, trunkJsonName), "utf8")) as TrunkManifest & Record<string, unknown>;
const writeManifest = (dir: string, manifest: unknown) => writeFileSync(join(dir, trunkJsonName), JSON.stringify(manifest));

for (const name of oracleModels) {
  describe(`${name}: the compressed trunk`, () => {
    const dir = modelDir(name);
    const { config } = loadConfig(join(dir, "config.json"));
    const prompt = expectation(name).tf.ids.slice(0, 12);

    const logits = (trunkDir: string | undefined, trunkGb: number, passes = 1, stagingPieceBytes?: number) => {
      const engine = openEngine({
        modelDir: dir, config, layerCount: config.numLayers, positions: 32, prefillChunk: 32,
        budgets: budgetRequest([...(trunkDir ? [{ kind: "trunk" as const, bytes: gbToBytes(trunkGb) }] : []), { kind: "cache", bytes: gbToBytes(1) }]),
        trunkDir, mode: "incremental", stagingPieceBytes,
      });
      try {
        const out: Float32Array[] = [];
        for (let p = 0; p < passes; p++) {
          const state = engine.model.newState();
          out.push(engine.model.run(state, prompt, "all"));
          engine.model.release(state);
        }
        return { out, plan: engine.plan, stats: engine.streamed?.stats };
      } finally {
        engine.close();
      }
    };

    test("every layer decodes to the checkpoint's bytes, whole and in pieces of one block to many", () => {
      const pack = packedFixtureTrunk(name, true);
      const manifest = readTrunkManifest(pack);
      const codec = manifest.codec!;
      expect(codec.name).toBe("bf16-planes");
      const index = indexCheckpoint(dir);
      const reader = new TensorReader(index);
      const stored = readFileSync(join(pack, trunkBinName));
      try {
        for (const layer of manifest.layers) {
          const layout = layerLayout(index, config, layer.layer);
          const want = reader.readRange(layout.run!.shard, layout.run!.start, layer.payload_bytes).slice();
          const bytes = new Uint8Array(stored.buffer, stored.byteOffset + layer.file_off, layer.stored_bytes!);
          const blocks = blockCount(layer.payload_bytes, codec.block_bytes);
          const table = bytes.slice(0, blocks * trunkEntryBytes);
          expect(layer.stored_bytes!).toBeLessThan(layer.payload_bytes);
          for (const pieceBytes of [1, 4096, 1 << 30]) {
            const decoded = NativeBuffer.allocate(layer.payload_bytes, "test decode", "zeroed");
            try {
              for (const piece of piecesOf(table, blocks, pieceBytes)) {
                const from = piece.first * codec.block_bytes;
                const damaged = decodeBlocks({
                  layer: layer.layer, table, first: piece.first, count: piece.count, src: bytes.subarray(piece.offset, piece.offset + piece.bytes),
                  srcBytes: piece.bytes, srcBase: piece.offset, dst: decoded.u8(from), dstBytes: Math.min(layer.payload_bytes, from + piece.count * codec.block_bytes) - from,
                  blockBytes: codec.block_bytes, verify: true,
                });
                expect(damaged).toBeUndefined();
              }
              expect(Buffer.compare(decoded.u8(0, layer.payload_bytes), want)).toBe(0);
            } finally {
              decoded.free();
            }
          }
        }
      } finally {
        reader.close();
      }
    });

    test("logits equal the resident trunk's bit for bit: every layer pinned as stored, none, and a second pass", () => {
      const resident = logits(undefined, 0).out[0]!;
      const pack = packedFixtureTrunk(name, true);
      const pinned = logits(pack, 100, 2);
      expect(pinned.plan.trunk.mode === "streamed" && pinned.plan.trunk.plan.pinned).toBe(config.numLayers);
      for (const out of pinned.out) expect(bits(out)).toEqual(bits(resident));
      // Pieces of one block's size: every layer read in many pieces through two staging slots in turn.
      const pieces = logits(pack, 0, 2, 16384);
      for (const out of pieces.out) expect(bits(out)).toEqual(bits(resident));
      expect(pieces.stats!.reads).toBe(2 * config.numLayers);
      const none = logits(pack, 0, 2);
      expect(none.plan.trunk.mode === "streamed" && none.plan.trunk.plan.pinned).toBe(0);
      for (const out of none.out) expect(bits(out)).toEqual(bits(resident));
      // Read as stored, decoded to the plain bytes: fewer bytes from disk than are decoded.
      expect(none.stats!.bytesRead).toBeLessThan(none.stats!.bytesDecoded);
      expect(none.stats!.bytesDecoded).toBe(2 * manifestOf(pack).layers.reduce((sum, l) => sum + l.payload_bytes, 0));
    });

    test("the same budget pins more layers compressed than plain", () => {
      const index = indexCheckpoint(dir);
      const layouts = Array.from({ length: config.numLayers }, (_, l) => layerLayout(index, config, l));
      const reader = new TensorReader(index);
      try {
        const plain = openPackedTrunk(packedFixtureTrunk(name), layouts, reader);
        const compressed = openPackedTrunk(packedFixtureTrunk(name, true), layouts, reader);
        const piece = stagingPiece(compressed.compressed!.largestStoredBytes);
        // Budgets from one slot to the whole plain trunk: never fewer, and somewhere more.
        let more = 0;
        const total = plain.layerCosts.reduce((a, b) => a + b, 0);
        for (let f = 0.2; f <= 1; f += 0.05) {
          const budget = f * total;
          const p = planTrunk(plain.layerCosts, budget).pinned;
          const c = planCompressedTrunk(compressed.compressed!.storedCosts, compressed.compressed!.decodedSlotBytes, budget, piece);
          expect(c.bytes <= budget || c.raised).toBe(true);
          if (c.pinned > p) more++;
        }
        expect(more).toBeGreaterThan(0);
      } finally {
        reader.close();
      }
    });

    test("a damaged pack is refused naming the layer and the block; a mismatched one before anything runs", () => {
      const source = packedFixtureTrunk(name, true);
      const manifest = manifestOf(source);
      const layer = manifest.layers[2]!;
      const blocks = blockCount(layer.payload_bytes, manifest.codec!.block_bytes);
      const run = (pack: string) => () => logits(pack, 0);

      // A flipped bit inside a block: its checksum names it.
      const flipped = copyPack(source, "compressed-flip");
      const bin = readFileSync(join(flipped, trunkBinName));
      bin[layer.file_off + blocks * trunkEntryBytes + 20]! ^= 0x10;
      writeFileSync(join(flipped, trunkBinName), bin);
      expect(run(flipped)).toThrow(new RegExp(`layer 2 block 0 \\(bytes \\[0, \\d+\\) of the layer, in language_model\\.model\\.layers\\.2\\.[\\w.]+( and \\d+ more tensors?)?\\) is damaged`));

      // A changed table entry: the table's hash.
      const table = copyPack(source, "compressed-table");
      const tableBin = readFileSync(join(table, trunkBinName));
      tableBin[layer.file_off + 9]! ^= 1;
      writeFileSync(join(table, trunkBinName), tableBin);
      expect(run(table)).toThrow(/layer 2's block table does not match its recorded hash/);

      // Truncated.
      const short = copyPack(source, "compressed-short");
      truncateSync(join(short, trunkBinName), manifest.layers.at(-1)!.file_off + 5);
      expect(run(short)).toThrow(/truncated/);

      // Fields of the manifest that do not fit: each named.
      const cases: [string, (m: TrunkManifest & Record<string, unknown>) => void, RegExp][] = [
        ["no codec", (m) => { delete m.codec; }, /layers\[0\]\.stored_bytes belongs to a compressed trunk/],
        ["another codec", (m) => { m.codec!.name = "zstd" as "bf16-planes"; }, /codec\.name must be "bf16-planes"/],
        ["a field the codec lacks", (m) => { (m.codec as unknown as Record<string, unknown>).level = 3; }, /codec\.level is not a field of the codec/],
        ["an odd block size", (m) => { m.codec!.block_bytes = 1000; }, /codec\.block_bytes must be a multiple of 128/],
        ["another block size", (m) => { m.codec!.block_bytes /= 2; }, /block table does not match its recorded hash/],
        ["stored bytes past the payload's bound", (m) => { m.layers[1]!.stored_bytes = m.layers[1]!.payload_bytes * 2; }, /layers\[1\]\.stored_bytes is \d+, outside/],
        ["a stored length that is not the table's", (m) => { m.layers[1]!.stored_bytes! -= 1; }, /layer 1 block \d+ .*is damaged/],
      ];
      for (const [label, change, refusal] of cases) {
        const pack = copyPack(source, `compressed-${label.replace(/\W+/g, "-")}`);
        const m = manifestOf(pack);
        change(m);
        writeManifest(pack, m);
        expect(run(pack), label).toThrow(refusal);
      }
    });
  });
}

test("a compressed pack of one checkpoint is refused for another with its shapes", () => {
  // tiny13 and nested14 differ in shape; the source binding is what refuses same-shaped packs,
  // and it is the plain pack's (test/unit/weights/streamed-trunk tests cover it): here, the layout check.
  const other = oracleModels.find((n) => n !== "tiny13")!;
  const { config } = loadConfig(join(modelDir(other), "config.json"));
  const index = indexCheckpoint(modelDir(other));
  const layouts = Array.from({ length: config.numLayers }, (_, l) => layerLayout(index, config, l));
  const reader = new TensorReader(index);
  try {
    expect(() => openPackedTrunk(packedFixtureTrunk("tiny13", true), layouts, reader)).toThrow(/does not match this checkpoint|holds \d+ layers/);
  } finally {
    reader.close();
  }
});

test("readTables refuses a table whose blocks do not follow each other", () => {
  const source = packedFixtureTrunk("tiny13", true);
  const pack = copyPack(source, "compressed-chain");
  const manifest = manifestOf(pack);
  const layer = manifest.layers[0]!;
  const bin = readFileSync(join(pack, trunkBinName));
  // Block 1's offset moved by one, and the table's hash recomputed as a careful forger would.
  const view = new DataView(bin.buffer, bin.byteOffset + layer.file_off + trunkEntryBytes, 8);
  view.setBigUint64(0, view.getBigUint64(0, true) + 1n, true);
  const blocks = blockCount(layer.payload_bytes, manifest.codec!.block_bytes);
  layer.table_hash = tableHash(bin.subarray(layer.file_off, layer.file_off + blocks * trunkEntryBytes));
  writeFileSync(join(pack, trunkBinName), bin);
  writeManifest(pack, manifest);
  const checked = readTrunkManifest(pack);
  expect(() => readTables(pack, checked.layers, checked.codec!, 1 << 20)).toThrow(/layer 0 block 1 .*is damaged/);
});
