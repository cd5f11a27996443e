/**
 * The resident trunk: every bound layer read from the shards once into its own native buffer
 * (one read per layer when its tensors form one run, as in the release) and bound for good.
 */
import type { Pointer } from "bun:ffi";
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { NativeBuffer } from "../native/memory.ts";
import { bindLayer, vectorBytes } from "./bind.ts";
import type { TensorReader } from "./tensor-reader.ts";
import type { Trunk } from "./trunk.ts";
import { layerLayout, type LayerLayout } from "./trunk-layout.ts";
import type { LayerWeights } from "./types.ts";
import { VectorArena } from "./vector-arena.ts";

/** Reads a layer's bytes from the shards into `buffer`, laid out as `layout`. */
export function readLayerFromShards(reader: TensorReader, index: CheckpointIndex, layout: LayerLayout, buffer: NativeBuffer): void {
  if (layout.run) {
    buffer.u8(0, layout.bytes).set(reader.readRange(layout.run.shard, layout.run.start, layout.bytes));
    return;
  }
  for (const t of layout.tensors) buffer.u8(t.off, t.nbytes).set(reader.readRaw(index.get(t.name)!));
}

export class ResidentTrunk implements Trunk {
  readonly layerCount: number;
  readonly bytes: number;
  readonly #layers: LayerWeights[] = [];
  readonly #owned: { buffer: NativeBuffer; arena: VectorArena }[] = [];

  constructor(index: CheckpointIndex, reader: TensorReader, config: ModelConfig, layerCount: number, warnings: string[],
    onLayer: (loaded: number) => void = () => {}) {
    this.layerCount = layerCount;
    let bytes = 0;
    for (let layer = 0; layer < layerCount; layer++) {
      const layout = layerLayout(index, config, layer);
      const buffer = NativeBuffer.allocate(layout.bytes, `trunk layer ${layer}`);
      readLayerFromShards(reader, index, layout, buffer);
      const arena = new VectorArena(vectorBytes(layout), `vectors of layer ${layer}`);
      this.#owned.push({ buffer, arena });
      this.#layers.push(bindLayer(config, { layout, base: buffer.ptr as Pointer }, arena, warnings));
      bytes += layout.bytes;
      onLayer(layer + 1);
    }
    this.bytes = bytes;
  }

  layer(layer: number): LayerWeights {
    const bound = this.#layers[layer];
    if (!bound) throw new Error(`layer ${layer} is not bound`);
    return bound;
  }

  close(): void {
    for (const { buffer, arena } of this.#owned) {
      buffer.free();
      arena.free();
    }
    this.#owned.length = 0;
  }
}
