/** A packed trunk's trunk.json (src/weights/trunk-file.ts), with tiny13's own trunk.bin beside it. */
import { join } from "node:path";
import { readTrunkManifest, trunkJsonName } from "../../../src/weights/trunk-file.ts";
import { dirWith, read, runIds, runTail, tinyModel, tinyPack } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

interface PackSeed extends Seed {
  pack: string;
}

export const trunkJsonTarget: FuzzTarget<PackSeed> = {
  name: "trunk-json",
  about: "trunk.json: readTrunkManifest (field types, alignment, layer order, tensors inside, file size)",
  seeds: (ctx) => {
    const pack = tinyPack(ctx);
    return [{ label: join(pack, trunkJsonName), bytes: read(join(pack, trunkJsonName)), pack }];
  },
  mutate: (input, rng) => mutateJson(input, rng),
  parse(input, seed, scratch) {
    dirWith(join(scratch, "trunk"), seed.pack, trunkJsonName, input);
    return JSON.stringify(readTrunkManifest(join(scratch, "trunk")));
  },
  command(input, seed, dir) {
    const trunk = join(dir, "trunk");
    dirWith(trunk, seed.pack, trunkJsonName, input);
    return { args: [tinyModel, "--trunk", trunk, "--trunk-gb", "0", ...runTail], names: [trunk] };
  },
  output: runIds,
};
