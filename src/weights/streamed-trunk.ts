/**
 * The streamed trunk (runtime.md section 5): layers come from a packed trunk.bin. A pinned
 * prefix is read once on first use and kept; the other layers cycle through the ring, one
 * arena in which consecutive layers are placed at opposite ends. While a layer computes, the
 * background reader fetches the part of the next layer that does not overlap it (all of it
 * when the arena holds both, as with two slots), and the rest as soon as the layer is done; so
 * the disk keeps reading whatever the budget allows. Each layer's content hash is checked the
 * first time it is read.
 */
import { join } from "node:path";
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { K3Error, ExitCode } from "../errors.ts";
import { constants as os } from "node:os";
import { describeStatus, DirectFile, readCapacity, type PendingRead } from "../native/file.ts";
import { allocAlignment, NativeBuffer, offsetPointer } from "../native/memory.ts";
import { bindLayer, vectorBytes } from "./bind.ts";
import type { RingPlan, Trunk, TrunkStats } from "./trunk.ts";
import type { TensorReader } from "./tensor-reader.ts";
import { checkLayerBytes, layerSource, layoutOfPacked, readTrunkManifest, recordedRun, trunkBinName, type PackedLayer, type TrunkCodec } from "./trunk-file.ts";
import type { LayerLayout } from "./trunk-layout.ts";
import type { LayerWeights } from "./types.ts";
import { VectorArena } from "./vector-arena.ts";


/** The ring: its arena of `bytes` (plus slack for the reads' windows) and two vector arenas. */
interface Ring {
  buffer: NativeBuffer;
  bytes: number;
  vectors: [VectorArena, VectorArena];
}

/** A layer's place in the ring arena, and the reads bringing it there. */
interface Placed {
  layer: number;
  /** Byte offset in the arena (aligned) and the layer's bytes. */
  offset: number;
  bytes: number;
  /** The part read ahead, [aheadFrom, aheadTo) of the layer; empty when nothing fitted. */
  aheadFrom: number;
  aheadTo: number;
  ahead: PendingRead | undefined;
  vectors: VectorArena;
  weights: LayerWeights | undefined;
}

/** The packed trunk must describe exactly the layers this checkpoint and config imply. */
function checkMatches(packed: PackedLayer, layout: LayerLayout, dir: string, index: CheckpointIndex): void {
  const want = JSON.stringify(layout.tensors.map((t) => [t.name, t.off, t.nbytes, t.dtype, t.shape]));
  const got = JSON.stringify(layoutOfPacked(packed).tensors.sort((a, b) => a.name.localeCompare(b.name)).map((t) => [t.name, t.off, t.nbytes, t.dtype, t.shape]));
  if (want !== got || packed.payload_bytes !== layout.bytes) {
    throw new K3Error(ExitCode.runtime, `${dir}: layer ${packed.layer} of the packed trunk does not match this checkpoint; re-run 'k3 pack-trunk'`);
  }
  // Where the layer's run lies in the checkpoint: recorded by pack-trunk, so checked, not trusted.
  if (layout.run) {
    const here = recordedRun(index, layout.run);
    if (packed.shard !== here.shard || packed.run_start !== here.run_start) {
      throw new K3Error(
        ExitCode.runtime,
        `${dir}: layer ${packed.layer} of the packed trunk records its run at ${packed.shard} byte ${packed.run_start}; this checkpoint has it at ${here.shard} byte ${here.run_start}; re-run 'k3 pack-trunk'`,
      );
    }
  }
}


/** A packed trunk checked against the checkpoint, with what each layer costs in memory. */
export interface PackedTrunk {
  dir: string;
  layers: PackedLayer[];
  /** The layouts as packed (one run per layer, so `run` is unset). */
  layouts: LayerLayout[];
  /** Per layer: its bytes in a slot plus its widened vectors, what the planner spends budget on. */
  layerCosts: number[];
  /** Payload bytes of the bound layers in trunk.bin (their decoded bytes, when compressed). */
  packedBytes: number;
  /** A compressed pack only: what its plan and its trunk need beyond the plain pack's facts. */
  compressed?: CompressedPack;
}

export interface CompressedPack {
  codec: TrunkCodec;
  /** Per layer: the bytes it is read and pinned as (its stored run, with the read's window). */
  storedCosts: number[];
  /** The slot every layer decodes into: the largest layer and its vectors. */
  decodedSlotBytes: number;
  /** What is stored in trunk.bin for the bound layers (the bytes a pass reads). */
  storedBytes: number;
  /** The largest bound layer's stored bytes (what a staging piece need not exceed). */
  largestStoredBytes: number;
}

/**
 * Reads trunk.json and checks it describes exactly the bound layers (`layouts`, in order) of
 * this checkpoint: the same layout, and the same contents as far as each layer's `source`
 * (read through `reader` from the checkpoint) can tell.
 */
export function openPackedTrunk(dir: string, layouts: readonly LayerLayout[], reader: TensorReader): PackedTrunk {
  const layerCount = layouts.length;
  const manifest = readTrunkManifest(dir);
  if (manifest.derived) {
    throw new K3Error(ExitCode.usage, `${dir}: a quantised (${manifest.derived.kind}) draft trunk only drafts; give it to --draft-trunk, and --trunk a trunk 'k3 pack-trunk' wrote`);
  }
  if (manifest.n_layers < layerCount) {
    throw new K3Error(ExitCode.runtime, `${dir}: the packed trunk holds ${manifest.n_layers} layers, ${layerCount} are needed`);
  }
  const layers = manifest.layers.slice(0, layerCount);
  const packedLayouts = layers.map((packed, l) => {
    const layout = layouts[l] as LayerLayout;
    checkMatches(packed, layout, dir, reader.index);
    const source = layerSource(reader, layout);
    if (packed.source !== source) {
      throw new K3Error(
        ExitCode.runtime,
        `${dir}: layer ${l} of the packed trunk was packed from other contents than ${reader.index.dir} holds (source ${packed.source}, this checkpoint ${source}); re-run 'k3 pack-trunk'`,
      );
    }
    return { ...layout, run: undefined };
  });
  const codec = manifest.codec;
  return {
    dir, layers, layouts: packedLayouts,
    layerCosts: layers.map((packed, l) => packed.nbytes + vectorBytes(packedLayouts[l] as LayerLayout)),
    packedBytes: layers.reduce((sum, l) => sum + l.payload_bytes, 0),
    ...(codec && {
      compressed: {
        codec,
        storedCosts: layers.map((packed) => readCapacity(packed.nbytes)),
        decodedSlotBytes: Math.max(...layers.map((packed) => packed.payload_bytes)) + Math.max(...packedLayouts.map((layout) => vectorBytes(layout))),
        storedBytes: layers.reduce((sum, l) => sum + (l.stored_bytes ?? 0), 0),
        largestStoredBytes: Math.max(...layers.map((l) => l.stored_bytes ?? 0)),
      },
    }),
  };
}

export class StreamedTrunk implements Trunk {
  readonly layerCount: number;
  readonly plan: RingPlan;
  readonly stats: TrunkStats = { binds: 0, hits: 0, reads: 0, bytesRead: 0, aheadBytes: 0, readSeconds: 0, waitSeconds: 0, bytesDecoded: 0, codecSeconds: 0 };
  readonly #config: ModelConfig;
  readonly #dir: string;
  readonly #layers: PackedLayer[];
  readonly #layouts: LayerLayout[];
  readonly #file: DirectFile;
  readonly #pinned = new Map<number, { buffer: NativeBuffer; arena: VectorArena; weights: LayerWeights }>();
  /** The ring: its arena and the two vector arenas the current and the next layer use. */
  #ring: Ring | undefined;
  /** The layer last handed out (in use until the next call), and the one being read ahead. */
  #current: Placed | undefined;
  #closed = false;
  #next: Placed | undefined;
  readonly #verified = new Set<number>();
  readonly #warnings: string[];
  /** Fault injection for tests: layer -> the read of it (1 = first) that fails with EIO. */
  readonly #readFaults: ReadonlyMap<number, number>;
  readonly #readsOfLayer = new Map<number, number>();

  /** Opens trunk.bin; nothing is allocated until the first layer is asked for. */
  constructor(packed: PackedTrunk, config: ModelConfig, plan: RingPlan, warnings: string[], readFaults: ReadonlyMap<number, number> = new Map()) {
    if (packed.compressed) throw new Error("a compressed pack streams through CompressedTrunk");
    this.layerCount = packed.layers.length;
    this.plan = plan;
    this.#config = config;
    this.#dir = packed.dir;
    this.#warnings = warnings;
    this.#layers = packed.layers;
    this.#layouts = packed.layouts;
    this.#readFaults = readFaults;
    this.#file = new DirectFile(join(packed.dir, trunkBinName));
  }

  /** The ring, allocated on first use so that opening plans without allocating. */
  #ringArena(): Ring {
    if (this.#ring) return this.#ring;
    const A = allocAlignment();
    const unpinned = this.#layers.slice(this.plan.pinned);
    const largest = Math.max(0, ...unpinned.map((l) => l.nbytes));
    const vectors = Math.max(0, ...this.#layouts.slice(this.plan.pinned).map((layout) => vectorBytes(layout)));
    // The plan's bytes less the two vector arenas, whole alignment units, never under one layer.
    const bytes = Math.max(largest, Math.floor((this.plan.ringBytes - 2 * vectors) / A) * A);
    this.#ring = {
      // slack beyond `bytes` for the reads' aligned windows (DirectFile checks each read's capacity)
      buffer: NativeBuffer.allocate(bytes + 4 * A, "the trunk ring", "read-target"), bytes,
      vectors: [new VectorArena(vectors, "trunk ring vectors 0"), new VectorArena(vectors, "trunk ring vectors 1")],
    };
    return this.#ring;
  }

  #label(layer: number): string {
    return `${this.#file.path}: layer ${layer}`;
  }

  layer(layer: number): LayerWeights {
    if (this.#closed) throw new Error(`${this.#file.path}: layer ${layer} asked of a closed trunk`);
    this.stats.binds++;
    const weights = layer < this.plan.pinned ? this.#pinnedLayer(layer) : this.#ringLayer(layer);
    this.#prefetch(layer);
    return weights;
  }

  #pinnedLayer(layer: number): LayerWeights {
    const held = this.#pinned.get(layer);
    if (held) {
      this.stats.hits++;
      return held.weights;
    }
    const packed = this.#layers[layer]!;
    const buffer = NativeBuffer.allocate(readCapacity(packed.nbytes), `pinned trunk layer ${layer}`, "read-target");
    const arena = new VectorArena(vectorBytes(this.#layouts[layer]!), `pinned layer ${layer} vectors`);
    // Read once into fresh memory: in chunks, so it runs at the disk's speed (DirectFile.readInto).
    const started = performance.now();
    const { seconds } = this.#file.readInto(packed.file_off, packed.nbytes, buffer, 0, undefined, this.#label(layer));
    this.#account(layer, performance.now() - started, seconds, buffer.u8(0, packed.payload_bytes));
    const weights = bindLayer(this.#config, { layout: this.#layouts[layer]!, base: buffer.ptr }, arena, this.#warnings);
    this.#pinned.set(layer, { buffer, arena, weights });
    return weights;
  }

  #ringLayer(layer: number): LayerWeights {
    const ring = this.#ringArena();
    if (this.#current?.layer === layer && this.#current.weights) {
      this.stats.hits++;
      return this.#current.weights;
    }
    let placed = this.#next?.layer === layer ? this.#next : undefined;
    if (placed) {
      this.#next = undefined;
    } else {
      // Not the layer read ahead (a first call, or an order the cycle did not predict): the
      // layer in use before is done, so the whole arena is free.
      this.#abandon();
      placed = this.#place(layer, ring, undefined);
    }
    // The layer in use before this one is done: what was not read ahead can be read now.
    const packed = this.#layers[layer]!;
    const started = performance.now();
    let seconds = 0;
    if (placed.ahead) {
      seconds += placed.ahead.wait().seconds;
    } else {
      placed.aheadFrom = placed.aheadTo = 0; // nothing was read ahead: all of it now
    }
    placed.ahead = undefined;
    for (const [from, to] of [[0, placed.aheadFrom], [placed.aheadTo, placed.bytes]] as const) {
      if (to > from) seconds += this.#file.readInto(packed.file_off + from, to - from, ring.buffer, placed.offset + from, undefined, this.#label(layer)).seconds;
    }
    this.#account(layer, performance.now() - started, seconds, ring.buffer.u8(placed.offset, packed.payload_bytes));
    placed.weights = bindLayer(this.#config, { layout: this.#layouts[layer]!, base: offsetPointer(ring.buffer.ptr, placed.offset) }, placed.vectors, this.#warnings);
    this.#current = placed;
    return placed.weights;
  }

  /**
   * Where `layer` goes in the arena and which part of it [aheadFrom, aheadTo) is free to read
   * now. Beside the layer in use (`beside`) it goes to the opposite end, so that as much of it
   * as possible lies outside that layer: at the start, everything before `beside`; at the end,
   * everything after it. Without one (a pinned layer is in use, or none), all of it is free.
   */
  #place(layer: number, ring: Ring, beside: Placed | undefined): Placed {
    const bytes = this.#layers[layer]!.nbytes;
    const vectors = ring.vectors[beside?.vectors === ring.vectors[0] ? 1 : 0];
    if (!beside) return { layer, offset: 0, bytes, aheadFrom: 0, aheadTo: bytes, ahead: undefined, vectors, weights: undefined };
    const atStart = beside.offset > 0;
    const offset = atStart ? 0 : ring.bytes - bytes;
    const [aheadFrom, aheadTo] = atStart
      ? [0, Math.min(bytes, beside.offset)]
      : [Math.min(bytes, Math.max(0, beside.offset + beside.bytes - offset)), bytes];
    return { layer, offset, bytes, aheadFrom, aheadTo, ahead: undefined, vectors, weights: undefined };
  }

  /** Waits out a read ahead that will not be used (its part of the arena is about to be reused). */
  #abandon(): void {
    const next = this.#next;
    this.#next = undefined;
    if (next?.ahead) {
      try {
        next.ahead.wait();
      } catch {
        // That layer is read again when it is needed; its error surfaces then.
      }
    }
  }

  /** Accounting and the first-read hash check of a layer now whole in memory. */
  #account(layer: number, waitedMs: number, seconds: number, payload: Uint8Array): void {
    const packed = this.#layers[layer]!;
    this.stats.waitSeconds += waitedMs / 1000;
    this.stats.reads++;
    this.stats.readSeconds += seconds;
    this.stats.bytesRead += packed.nbytes;
    const readNumber = (this.#readsOfLayer.get(layer) ?? 0) + 1;
    this.#readsOfLayer.set(layer, readNumber);
    if (this.#readFaults.get(layer) === readNumber) {
      // Injected after the real read was collected, so its buffer is free; from here on the path is a real failure's.
      throw new K3Error(ExitCode.runtime, describeStatus(-os.errno.EIO, this.#label(layer)));
    }
    if (!this.#verified.has(layer)) {
      checkLayerBytes(join(this.#dir, trunkBinName), packed, payload);
      this.#verified.add(layer);
    }
  }

  /**
   * Starts reading ahead the part of the layer after `current` that fits beside it in the ring
   * (all of it when a pinned layer is in use: the ring is then idle).
   */
  #prefetch(current: number): void {
    const P = this.plan.pinned;
    if (this.plan.ringSlots === 0) return;
    const next = current + 1 < this.layerCount ? current + 1 : P;
    if (next < P || next === current || this.#next?.layer === next) return;
    const beside = current < P ? undefined : this.#current;
    if (beside && beside.layer !== current) return;
    this.#abandon();
    const placed = this.#place(next, this.#ringArena(), beside);
    if (placed.aheadTo > placed.aheadFrom) {
      const packed = this.#layers[next]!;
      const length = placed.aheadTo - placed.aheadFrom;
      placed.ahead = this.#file.submit(packed.file_off + placed.aheadFrom, length, this.#ringArena().buffer, placed.offset + placed.aheadFrom, this.#label(next));
      this.stats.aheadBytes += length;
    }
    this.#next = placed;
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#abandon();
    if (this.#ring) {
      this.#ring.buffer.free();
      for (const v of this.#ring.vectors) v.free();
      this.#ring = undefined;
    }
    for (const { buffer, arena } of this.#pinned.values()) {
      buffer.free();
      arena.free();
    }
    // nothing may hand out a view of the memory just freed
    this.#pinned.clear();
    this.#current = undefined;
    this.#file.close();
  }
}
