/**
 * A compressed pack's trunk.bin (src/weights/compressed-trunk.ts, zig/codec/bf16_planes.zig): in
 * process, every layer's block table checked as the trunk is opened, then every block decoded
 * with its checksum and the decoded layer's hash checked, as the first read of each layer does;
 * through dist/k3, a streamed run from the mutated file.
 */
import { join } from "node:path";
import { NativeBuffer } from "../../../src/native/memory.ts";
import { trunkEntryBytes } from "../../../src/native/trunk-code.ts";
import { decodeRun, readTables } from "../../../src/weights/compressed-trunk.ts";
import { checkLayerBytes, readTrunkManifest, trunkBinName } from "../../../src/weights/trunk-file.ts";
import { packTrunkOf } from "../../support/fixtures.ts";
import { dirWith, read, runIds, tinyModel, trunkBinRun } from "../fixtures.ts";
import { existsSync, mkdirSync } from "node:fs";
import type { FuzzContext, FuzzTarget, Seed } from "../harness.ts";
import { mutateBytes } from "../mutate.ts";

interface PackSeed extends Seed {
  pack: string;
}

/** tiny13 packed compressed into the run's work directory, once (blocks of 16 KB: many per layer). */
function compressedPack(ctx: FuzzContext): string {
  const dir = join(ctx.work, "tiny13-pack-compressed");
  if (existsSync(join(dir, "trunk.json"))) return dir;
  mkdirSync(dir, { recursive: true });
  packTrunkOf(tinyModel, dir, true);
  return dir;
}

export const trunkCompressedTarget: FuzzTarget<PackSeed> = {
  name: "trunk-compressed",
  about: "a compressed trunk.bin: block tables, block headers, planes and escapes, checksums, and each decoded layer's hash",
  seeds: (ctx) => {
    const pack = compressedPack(ctx);
    return [{ label: join(pack, trunkBinName), bytes: read(join(pack, trunkBinName)), pack }];
  },
  mutate: (input, rng) => mutateBytes(input, rng),
  parse(input, seed, scratch) {
    const dir = join(scratch, "trunk-compressed");
    const bin = dirWith(dir, seed.pack, trunkBinName, input);
    const manifest = readTrunkManifest(dir);
    const codec = manifest.codec!;
    const tables = readTables(dir, manifest.layers, codec, 1 << 20);
    for (const stored of tables) {
      const layer = stored.packed;
      const src = NativeBuffer.allocate(layer.nbytes, "fuzz: a stored layer", "zeroed");
      const dst = NativeBuffer.allocate(layer.payload_bytes, "fuzz: a decoded layer", "zeroed");
      try {
        src.u8().set(input.subarray(layer.file_off, layer.file_off + layer.nbytes));
        const tableBytes = stored.blocks * trunkEntryBytes;
        decodeRun(bin, stored, codec, { first: 0, count: stored.blocks, src, srcAt: tableBytes, srcBytes: layer.stored_bytes! - tableBytes, srcBase: tableBytes }, dst, 0, true);
        checkLayerBytes(bin, layer, dst.u8(0, layer.payload_bytes));
      } finally {
        src.free();
        dst.free();
      }
    }
    return "every layer as packed";
  },
  command: (input, seed, dir) => trunkBinRun(input, seed.pack, dir),
  output: runIds,
  testCount: 100,
};
