/**
 * A packed trunk's trunk.bin (src/weights/trunk-file.ts): in process, the manifest's size check
 * and every layer's content hash, as the streamed trunk checks them on first read.
 */
import { truncateSync } from "node:fs";
import { join } from "node:path";
import { checkLayerBytes, readTrunkManifest, trunkBinName } from "../../../src/weights/trunk-file.ts";
import { dirWith, read, runIds, tinyPack, trunkBinRun } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateBytes } from "../mutate.ts";

interface PackSeed extends Seed {
  pack: string;
}

export const trunkBinTarget: FuzzTarget<PackSeed> = {
  name: "trunk-bin",
  about: "trunk.bin: its size against trunk.json and each layer's seeded content hash",
  seeds: (ctx) => {
    const pack = tinyPack(ctx);
    return [{ label: join(pack, trunkBinName), bytes: read(join(pack, trunkBinName)), pack }];
  },
  mutate: (input, rng) => mutateBytes(input, rng),
  parse(input, seed, scratch) {
    // Only trunk.bin's size is read from the file (the hashes are over `input`): a sparse file of that size.
    const bin = dirWith(join(scratch, "trunk"), seed.pack, trunkBinName, new Uint8Array(0));
    truncateSync(bin, input.length);
    const manifest = readTrunkManifest(join(scratch, "trunk"));
    for (const layer of manifest.layers) checkLayerBytes(bin, layer, input.subarray(layer.file_off, layer.file_off + layer.payload_bytes));
    return "every layer as packed";
  },
  command: (input, seed, dir) => trunkBinRun(input, seed.pack, dir),
  output: runIds,
  testCount: 100,
};
