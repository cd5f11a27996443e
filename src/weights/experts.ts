/**
 * Routed experts on demand. The forward pass asks an ExpertSource for a layer's selected
 * experts and gets their MXFP4 bytes in native memory; how they are cached and read is the
 * source's business. This one is a simple bounded LRU over the shards.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex, TensorEntry } from "../checkpoint/safetensors.ts";
import { expertTensors } from "../checkpoint/tensor-names.ts";
import { K3Error, ExitCode } from "../errors.ts";
import { NativeBuffer } from "../native/memory.ts";
import type { TensorReader } from "./tensor-reader.ts";
import type { ExpertWeights } from "./types.ts";

export interface ExpertSource {
  /** The experts `experts` of `layer`, in the order asked. Valid until the next call. */
  acquire(layer: number, experts: readonly number[]): ExpertWeights[];
}

export interface ExpertStats {
  requests: number;
  hits: number;
  loads: number;
  bytesRead: number;
}

/** Where each of an expert's six tensors lies on disk. */
function expertEntries(index: CheckpointIndex, config: ModelConfig, layer: number, expert: number): TensorEntry[] {
  return expertTensors(config, layer, expert).map((spec) => {
    const entry = index.get(spec.name);
    if (!entry) throw new K3Error(ExitCode.runtime, `${index.dir}: missing ${spec.name}`);
    return entry;
  });
}

export class LruExpertCache implements ExpertSource {
  readonly #index: CheckpointIndex;
  readonly #reader: TensorReader;
  readonly #config: ModelConfig;
  readonly #capacity: number;
  /** Insertion order is recency order: the first key is the least recently used. */
  readonly #slots = new Map<string, ExpertWeights>();
  readonly stats: ExpertStats = { requests: 0, hits: 0, loads: 0, bytesRead: 0 };

  constructor(index: CheckpointIndex, reader: TensorReader, config: ModelConfig, capacity: number) {
    if (capacity < config.numExpertsPerToken) {
      throw new Error(`expert cache of ${capacity} slots cannot hold the ${config.numExpertsPerToken} experts one token needs`);
    }
    this.#index = index;
    this.#reader = reader;
    this.#config = config;
    this.#capacity = capacity;
  }

  acquire(layer: number, experts: readonly number[]): ExpertWeights[] {
    const needed = new Set(experts.map((e) => `${layer}:${e}`));
    return experts.map((expert) => {
      const key = `${layer}:${expert}`;
      this.stats.requests++;
      const cached = this.#slots.get(key);
      if (cached) {
        this.stats.hits++;
        this.#slots.delete(key);
        this.#slots.set(key, cached);
        return cached;
      }
      this.#evictFor(needed);
      const loaded = this.#load(layer, expert);
      this.#slots.set(key, loaded);
      return loaded;
    });
  }

  #evictFor(needed: Set<string>): void {
    if (this.#slots.size < this.#capacity) return;
    for (const [key, slot] of this.#slots) {
      if (needed.has(key)) continue; // never evict an expert this token still uses
      slot.buffer.free();
      this.#slots.delete(key);
      return;
    }
  }

  #load(layer: number, expert: number): ExpertWeights {
    const entries = expertEntries(this.#index, this.#config, layer, expert);
    const total = entries.reduce((sum, e) => sum + e.nbytes, 0);
    const buffer = NativeBuffer.allocate(total, `expert ${expert} of layer ${layer}`);
    const offsets: number[] = [];
    const start = Math.min(...entries.map((e) => e.offset));
    const end = Math.max(...entries.map((e) => e.offset + e.nbytes));
    const sameShard = entries.every((e) => e.shard === entries[0]!.shard);
    if (sameShard && end - start === total) {
      // The six tensors tile one run on disk: one read fetches the expert.
      buffer.u8(0, total).set(this.#reader.readRange(entries[0]!.shard, start, total));
      for (const e of entries) offsets.push(e.offset - start);
    } else {
      let at = 0;
      for (const e of entries) {
        buffer.u8(at, e.nbytes).set(this.#reader.readRaw(e));
        offsets.push(at);
        at += e.nbytes;
      }
    }
    this.stats.loads++;
    this.stats.bytesRead += total;
    const [w1Packed, w1Scale, w2Packed, w2Scale, w3Packed, w3Scale] = offsets as [number, number, number, number, number, number];
    return { layer, expert, buffer, w1Packed, w1Scale, w2Packed, w2Scale, w3Packed, w3Scale };
  }

  close(): void {
    for (const slot of this.#slots.values()) slot.buffer.free();
    this.#slots.clear();
  }
}
