/**
 * The tensor table and the binder agree: binding a layer consumes every spec of the layer's
 * trunkTensors exactly once, matrices as matrices and vectors as vectors, and loading the model
 * tables reads every model-level spec exactly once. Covers both attention kinds and both FFN
 * kinds, and a checkpoint with a tied head, no MLA output gate and no shared experts.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadConfig, type ModelConfig } from "../../../src/checkpoint/config.ts";
import { indexCheckpoint, type CheckpointIndex, type TensorEntry } from "../../../src/checkpoint/safetensors.ts";
import {
  attentionKind, ffnKind, modelTensors, tensorList, trunkTensors, type TensorSpec,
} from "../../../src/checkpoint/tensor-names.ts";
import { bindLayer, checkBindable, isMatrixSpec, vectorBytes } from "../../../src/weights/bind.ts";
import { loadModelTables } from "../../../src/weights/model-tables.ts";
import { readLayerFromShards } from "../../../src/weights/resident-trunk.ts";
import { TensorReader } from "../../../src/weights/tensor-reader.ts";
import { layerLayout } from "../../../src/weights/trunk-layout.ts";
import type { Matrix, Vector } from "../../../src/weights/types.ts";
import { VectorArena } from "../../../src/weights/vector-arena.ts";
import { writeCheckpoint } from "../../../tools/checkpoint/writer.ts";
import { tinyConfig } from "../../support/configs.ts";
import { modelDir } from "../../support/fixtures.ts";
import { tempDir } from "../../support/tmp.ts";

type Bound = { tensor: Matrix | Vector; matrix: boolean };

/** Every matrix and vector in a bound structure, however deep. */
function boundTensors(value: unknown): Bound[] {
  if (typeof value !== "object" || value === null) return [];
  if ("ptr" in value && "name" in value) return [{ tensor: value as Matrix | Vector, matrix: "rows" in value }];
  return Object.values(value).flatMap(boundTensors);
}

/** The checkpoint names a bound tensor came from (an AttnRes fold names its two inputs). */
const sourceNames = (tensor: Matrix | Vector) => tensor.name.split(" * ");

const sorted = (names: string[]) => [...names].sort();

/** A reader that records the name of every tensor it reads. */
class RecordingReader extends TensorReader {
  readonly names: string[] = [];

  override readRaw(entry: TensorEntry): Uint8Array {
    this.names.push(entry.name);
    return super.readRaw(entry);
  }

  override readToNative(entry: TensorEntry): ReturnType<TensorReader["readToNative"]> {
    this.names.push(entry.name);
    return super.readToNative(entry);
  }
}

function checkLayer(index: CheckpointIndex, reader: TensorReader, config: ModelConfig, layer: number): void {
  const layout = layerLayout(index, config, layer);
  const { buffer, base } = readLayerFromShards(reader, index, layout);
  const arena = new VectorArena(vectorBytes(layout), `vectors of layer ${layer}`);
  try {
    const bound = boundTensors(bindLayer(config, { layout, base }, arena, []));
    const specs = new Map<string, TensorSpec>(trunkTensors(config, layer).map((s) => [s.name, s]));
    expect(sorted(bound.flatMap((b) => sourceNames(b.tensor)))).toEqual(sorted([...specs.keys()]));
    for (const { tensor, matrix } of bound) {
      for (const name of sourceNames(tensor)) expect(`${name}: ${isMatrixSpec(specs.get(name)!)}`).toBe(`${name}: ${matrix}`);
    }
  } finally {
    arena.free();
    buffer.free();
  }
}

function checkCheckpoint(dir: string, config: ModelConfig): string[] {
  const index = indexCheckpoint(dir);
  checkBindable(index, config, config.numLayers);
  const reader = new RecordingReader(index);
  try {
    for (let layer = 0; layer < config.numLayers; layer++) checkLayer(index, reader, config, layer);
    reader.names.length = 0;
    const tables = loadModelTables(index, reader, config);
    tables.close();
    expect(sorted(reader.names)).toEqual(sorted(tensorList(modelTensors(config)).map((s) => s.name)));
  } finally {
    reader.close();
  }
  const layers = Array.from({ length: config.numLayers }, (_, l) => l);
  return [...new Set(layers.flatMap((l) => [attentionKind(config, l), ffnKind(config, l)]))].sort();
}

describe("the binder consumes the tensor table exactly", () => {
  for (const name of ["tiny13", "nested14"]) {
    test(`${name}: every layer and the model level`, () => {
      const { config } = loadConfig(join(modelDir(name), "config.json"));
      expect(checkCheckpoint(modelDir(name), config)).toEqual(["dense", "kda", "mla", "moe"]);
    });
  }

  test("tied head, no MLA output gate, no shared experts, layers across shards", () => {
    const config: ModelConfig = {
      ...tinyConfig(), numLayers: 5, fullAttnLayers: [4], tieWordEmbeddings: true, mlaUseOutputGate: false, numSharedExperts: 0,
    };
    const dir = tempDir("bind-table");
    writeCheckpoint(dir, config, { shape: "nested", shards: 3 });
    expect(checkCheckpoint(dir, config)).toEqual(["dense", "kda", "mla", "moe"]);
  });
});
