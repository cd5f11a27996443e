/**
 * The resident trunk: every bound layer read from the shards once into its own native buffer
 * (one read per layer when its tensors form one run, as in the release) and bound for good.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { NativeBuffer, type Pointer } from "../native/memory.ts";
import { stopIfSignalled } from "../native/signals.ts";
import { bindLayer, vectorBytes } from "./bind.ts";
import type { TensorReader } from "./tensor-reader.ts";
import type { Trunk } from "./trunk.ts";
import type { LayerLayout } from "./trunk-layout.ts";
import type { LayerWeights } from "./types.ts";
import { VectorArena } from "./vector-arena.ts";

/**
 * Reads a layer's bytes from the shards into a buffer of its own: one read straight into it when
 * the layer is one run (as in the release), otherwise tensor by tensor into the packed layout.
 */
export function readLayerFromShards(reader: TensorReader, index: CheckpointIndex, layout: LayerLayout): { buffer: NativeBuffer; base: Pointer } {
  if (layout.run) {
    const { buffer, ptr } = reader.readRangeToNative(layout.run.shard, layout.run.start, layout.bytes, `trunk layer ${layout.layer}`);
    return { buffer, base: ptr };
  }
  const buffer = NativeBuffer.allocate(layout.bytes, `trunk layer ${layout.layer}`, "read-target");
  for (const t of layout.tensors) buffer.u8(t.off, t.nbytes).set(reader.readRaw(index.get(t.name)!));
  return { buffer, base: buffer.ptr };
}

export class ResidentTrunk implements Trunk {
  readonly layerCount: number;
  readonly #layers: LayerWeights[] = [];
  readonly #owned: { buffer: NativeBuffer; arena: VectorArena }[] = [];

  /** `layouts` are the bound layers' layouts, in layer order. */
  constructor(index: CheckpointIndex, reader: TensorReader, config: ModelConfig, layouts: readonly LayerLayout[], warnings: string[],
    onLayer: (loaded: number) => void = () => {}) {
    this.layerCount = layouts.length;
    try {
      for (const layout of layouts) {
        stopIfSignalled(); // loading the real trunk takes minutes
        const { buffer, base } = readLayerFromShards(reader, index, layout);
        const arena = new VectorArena(vectorBytes(layout), `vectors of layer ${layout.layer}`);
        this.#owned.push({ buffer, arena });
        this.#layers.push(bindLayer(config, { layout, base }, arena, warnings));
        onLayer(layout.layer + 1);
      }
    } catch (error) {
      this.close(); // nobody else holds these buffers yet
      throw error;
    }
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
