/**
 * The streamed trunk (runtime.md section 5): layers come from a packed trunk.bin, one read
 * each. A pinned prefix is read once on first use and kept; the other layers cycle through
 * ring slots. With two slots the background reader fetches the next layer while this one
 * computes; with one slot every read is synchronous, because reading ahead would overwrite
 * the layer in use. Each layer's content hash is checked the first time it is read.
 */
import { join } from "node:path";
import type { ModelConfig } from "../checkpoint/config.ts";
import { K3Error, ExitCode } from "../errors.ts";
import { DirectFile, readCapacity, type PendingRead } from "../native/file.ts";
import { NativeBuffer } from "../native/memory.ts";
import { bindLayer, vectorBytes } from "./bind.ts";
import type { Trunk } from "./trunk.ts";
import { layerHash, layoutOfPacked, readTrunkManifest, trunkBinName, type PackedLayer } from "./trunk-file.ts";
import type { LayerLayout } from "./trunk-layout.ts";
import type { LayerWeights } from "./types.ts";
import { VectorArena } from "./vector-arena.ts";

export interface TrunkStats {
  binds: number;
  hits: number;
  reads: number;
  bytesRead: number;
  /** Device seconds of the reads, on whichever thread did them. */
  readSeconds: number;
  /** Seconds the forward pass spent waiting for reads. */
  waitSeconds: number;
}

interface Slot {
  buffer: NativeBuffer;
  arena: VectorArena;
  layer: number;
  pending: PendingRead | undefined;
  weights: LayerWeights | undefined;
}

/** The packed trunk must describe exactly the layers this checkpoint and config imply. */
function checkMatches(packed: PackedLayer, layout: LayerLayout, dir: string): void {
  const want = JSON.stringify(layout.tensors.map((t) => [t.name, t.off, t.nbytes, t.dtype, t.shape]));
  const got = JSON.stringify(layoutOfPacked(packed).tensors.sort((a, b) => a.name.localeCompare(b.name)).map((t) => [t.name, t.off, t.nbytes, t.dtype, t.shape]));
  if (want !== got || packed.payload_bytes !== layout.bytes) {
    throw new K3Error(ExitCode.runtime, `${dir}: layer ${packed.layer} of the packed trunk does not match this checkpoint; re-run 'k3 pack-trunk'`);
  }
}

/** What the streamed trunk executes: the pinned prefix and the ring, decided by the planner. */
export interface RingPlan {
  /** Layers 0 … pinned−1 are read once and kept. */
  pinned: number;
  /** Slots the other layers cycle through; two or more allow read-ahead. */
  ringSlots: number;
}

/** A packed trunk checked against the checkpoint, with what each layer costs in memory. */
export interface PackedTrunk {
  dir: string;
  layers: PackedLayer[];
  /** The layouts as packed (one run per layer, so `run` is unset). */
  layouts: LayerLayout[];
  /** Per layer: its bytes in a slot plus its widened vectors, what the planner spends budget on. */
  layerCosts: number[];
  /** Payload bytes of the bound layers in trunk.bin. */
  packedBytes: number;
}

/** Reads trunk.json and checks it describes exactly the bound layers (`layouts`, in order). */
export function openPackedTrunk(dir: string, layouts: readonly LayerLayout[]): PackedTrunk {
  const layerCount = layouts.length;
  const manifest = readTrunkManifest(dir);
  if (manifest.n_layers < layerCount) {
    throw new K3Error(ExitCode.runtime, `${dir}: the packed trunk holds ${manifest.n_layers} layers, ${layerCount} are needed`);
  }
  const layers = manifest.layers.slice(0, layerCount);
  const packedLayouts = layers.map((packed, l) => {
    const layout = layouts[l] as LayerLayout;
    checkMatches(packed, layout, dir);
    return { ...layout, run: undefined };
  });
  return {
    dir, layers, layouts: packedLayouts,
    layerCosts: layers.map((packed, l) => packed.nbytes + vectorBytes(packedLayouts[l] as LayerLayout)),
    packedBytes: layers.reduce((sum, l) => sum + l.payload_bytes, 0),
  };
}

export class StreamedTrunk implements Trunk {
  readonly layerCount: number;
  readonly plan: RingPlan;
  readonly stats: TrunkStats = { binds: 0, hits: 0, reads: 0, bytesRead: 0, readSeconds: 0, waitSeconds: 0 };
  readonly #config: ModelConfig;
  readonly #dir: string;
  readonly #layers: PackedLayer[];
  readonly #layouts: LayerLayout[];
  readonly #file: DirectFile;
  readonly #pinned = new Map<number, { buffer: NativeBuffer; arena: VectorArena; weights: LayerWeights }>();
  readonly #ring: Slot[] = [];
  readonly #verified = new Set<number>();
  readonly #warnings: string[];

  /** Opens trunk.bin; nothing is allocated until the first layer is asked for. */
  constructor(packed: PackedTrunk, config: ModelConfig, plan: RingPlan, warnings: string[]) {
    this.layerCount = packed.layers.length;
    this.plan = plan;
    this.#config = config;
    this.#dir = packed.dir;
    this.#warnings = warnings;
    this.#layers = packed.layers;
    this.#layouts = packed.layouts;
    this.#file = new DirectFile(join(packed.dir, trunkBinName));
  }

  /** The ring slots, allocated on first use so that opening plans without allocating. */
  #ringSlots(): Slot[] {
    if (this.#ring.length === this.plan.ringSlots) return this.#ring;
    const slotData = Math.max(0, ...this.#layers.slice(this.plan.pinned).map((l) => l.nbytes));
    const slotVectors = Math.max(0, ...this.#layouts.slice(this.plan.pinned).map((layout) => vectorBytes(layout)));
    for (let s = 0; s < this.plan.ringSlots; s++) {
      this.#ring.push({
        buffer: NativeBuffer.allocate(readCapacity(slotData), `trunk ring slot ${s}`, "read-target"),
        arena: new VectorArena(slotVectors, `trunk ring slot ${s} vectors`), layer: -1, pending: undefined, weights: undefined,
      });
    }
    return this.#ring;
  }

  #submit(layer: number, buffer: NativeBuffer): PendingRead {
    const packed = this.#layers[layer]!;
    return this.#file.submit(packed.file_off, packed.nbytes, buffer);
  }

  /** Waits for a read, checks the layer's hash the first time, and accounts for it. */
  #land(layer: number, read: PendingRead | (() => { seconds: number }), buffer: NativeBuffer): void {
    const waitStarted = performance.now();
    const { seconds } = typeof read === "function" ? read() : read.wait();
    this.stats.waitSeconds += (performance.now() - waitStarted) / 1000;
    this.stats.reads++;
    this.stats.readSeconds += seconds;
    const packed = this.#layers[layer]!;
    this.stats.bytesRead += packed.nbytes;
    if (!this.#verified.has(layer)) {
      if (layerHash(buffer.u8(0, packed.payload_bytes)) !== packed.hash) {
        throw new K3Error(ExitCode.runtime, `${join(this.#dir, trunkBinName)}: layer ${layer} does not match its recorded hash (corrupted?); re-run 'k3 pack-trunk'`);
      }
      this.#verified.add(layer);
    }
  }

  #bind(layer: number, buffer: NativeBuffer, arena: VectorArena): LayerWeights {
    return bindLayer(this.#config, { layout: this.#layouts[layer]!, base: buffer.ptr }, arena, this.#warnings);
  }

  layer(layer: number): LayerWeights {
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
    this.#land(layer, () => this.#file.readInto(packed.file_off, packed.nbytes, buffer), buffer);
    const weights = this.#bind(layer, buffer, arena);
    this.#pinned.set(layer, { buffer, arena, weights });
    return weights;
  }

  #ringLayer(layer: number): LayerWeights {
    const ring = this.#ringSlots();
    let slot = ring.find((s) => s.layer === layer);
    if (slot && !slot.pending && slot.weights) {
      this.stats.hits++;
      return slot.weights;
    }
    if (!slot) {
      // Any slot may be reused: the previous layer's computation has finished.
      slot = ring.find((s) => !s.pending) ?? (ring[0] as Slot);
      this.#settle(slot);
      slot.layer = layer;
      slot.pending = this.#submit(layer, slot.buffer);
    }
    this.#land(layer, slot.pending as PendingRead, slot.buffer);
    slot.pending = undefined;
    slot.weights = this.#bind(layer, slot.buffer, slot.arena);
    return slot.weights;
  }

  /** Collects a read still in flight in `slot` before the slot is reused. */
  #settle(slot: Slot): void {
    if (slot.pending) {
      try {
        slot.pending.wait();
      } catch {
        // That layer is read again when it is needed; its error surfaces then.
      }
    }
    slot.pending = undefined;
    slot.weights = undefined;
    slot.layer = -1;
  }

  /** With two or more slots, start reading the layer that comes next in the cycle. */
  #prefetch(current: number): void {
    if (this.plan.ringSlots < 2) return; // one slot: reading ahead would overwrite this layer
    const P = this.plan.pinned;
    const next = current + 1 < this.layerCount ? current + 1 : P;
    const ring = this.#ringSlots();
    if (next < P || ring.some((s) => s.layer === next)) return;
    const slot = ring.find((s) => s.layer !== current && !s.pending);
    if (!slot) return;
    this.#settle(slot);
    slot.layer = next;
    slot.pending = this.#submit(next, slot.buffer);
  }

  close(): void {
    for (const slot of this.#ring) {
      this.#settle(slot);
      slot.buffer.free();
      slot.arena.free();
    }
    for (const { buffer, arena } of this.#pinned.values()) {
      buffer.free();
      arena.free();
    }
    this.#file.close();
  }
}
