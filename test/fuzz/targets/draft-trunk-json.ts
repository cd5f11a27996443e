/**
 * A draft trunk's trunk.json (`k3 quantize-trunk`'s I8R container, src/weights/trunk-file.ts and
 * draft-trunk.ts), with tiny13's int8 trunk.bin beside it, given to --draft-trunk. Whatever draft
 * trunk is accepted, the exact model verifies every id: the run's ids never change.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { indexCheckpoint } from "../../../src/checkpoint/safetensors.ts";
import { openDraftTrunk } from "../../../src/weights/draft-trunk.ts";
import { TensorReader } from "../../../src/weights/tensor-reader.ts";
import { trunkJsonName } from "../../../src/weights/trunk-file.ts";
import { layerLayout, type LayerLayout } from "../../../src/weights/trunk-layout.ts";
import { quantizeTrunk } from "../../../src/offline/trunk-quantize.ts";
import { dirWith, read, runIds, runTail, tinyModel, tinyPack } from "../fixtures.ts";
import type { FuzzContext, FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

interface DraftSeed extends Seed {
  draft: string;
}

/** tiny13's packed trunk quantised into the run's work directory, once. */
function tinyDraft(ctx: FuzzContext): string {
  const dir = join(ctx.work, "tiny13-int8");
  if (!existsSync(join(dir, trunkJsonName))) quantizeTrunk(tinyPack(ctx), dir, { force: false, onProgress: () => {} });
  return dir;
}

let opened: { layouts: LayerLayout[]; reader: TensorReader } | undefined;

/** tiny13's index, layouts and reader, opened once for every input of the run (the checkpoint never changes). */
function checkpoint(): { layouts: LayerLayout[]; reader: TensorReader } {
  if (!opened) {
    const { config } = loadConfig(join(tinyModel, "config.json"));
    const index = indexCheckpoint(tinyModel);
    opened = { layouts: Array.from({ length: config.numLayers }, (_, l) => layerLayout(index, config, l)), reader: new TensorReader(index) };
  }
  return opened;
}

export const draftTrunkJsonTarget: FuzzTarget<DraftSeed> = {
  name: "draft-trunk-json",
  about: "a quantised trunk.json: readTrunkManifest's I8R tensors and derivation, openDraftTrunk's checks against the checkpoint",
  seeds: (ctx) => {
    const draft = tinyDraft(ctx);
    return [{ label: join(draft, trunkJsonName), bytes: read(join(draft, trunkJsonName)), draft }];
  },
  mutate: (input, rng) => mutateJson(input, rng),
  parse(input, seed, scratch) {
    const dir = join(scratch, "draft");
    dirWith(dir, seed.draft, trunkJsonName, input);
    const { layouts, reader } = checkpoint();
    const draft = openDraftTrunk(dir, layouts, reader);
    return JSON.stringify([draft.layers, draft.layouts]);
  },
  command(input, seed, dir) {
    const draft = join(dir, "draft");
    dirWith(draft, seed.draft, trunkJsonName, input);
    return { args: [tinyModel, "--draft-trunk", draft, ...runTail], names: [draft] };
  },
  output: runIds,
};
