/**
 * The streamed trunk of a compressed pack (`k3 pack-trunk --compress`, zig/codec/bf16_planes.zig):
 * what is read from disk and what is pinned are the stored (coded) bytes; what the kernels see
 * is the plain layer, decoded into one slot just before the layer computes. Pinned layers are
 * held stored (so the same budget pins more of them) and decode from memory; the others are
 * read in pieces of whole blocks into a staging area, each piece decoded as soon as it lands
 * while the next ones are read. While a layer computes, the first pieces of the next one are
 * read ahead. The first decode of each layer checks every block's checksum and the decoded
 * layer's hash (the plain pack's: the decoded bytes are the checkpoint's).
 */
import { join } from "node:path";
import type { ModelConfig } from "../checkpoint/config.ts";
import { K3Error, ExitCode } from "../errors.ts";
import { constants as os } from "node:os";
import { describeStatus, DirectFile, readCapacity, type PendingRead } from "../native/file.ts";
import { allocAlignment, NativeBuffer, offsetPointer } from "../native/memory.ts";
import { blockCount, decodeBlocks, tableEntry, trunkEntryBytes, trunkHeaderBytes } from "../native/trunk-code.ts";
import { bindLayer, vectorBytes } from "./bind.ts";
import type { RingPlan, TrunkStats } from "./trunk.ts";
import type { Trunk } from "./trunk.ts";
import { checkLayerBytes, tableHash, trunkBinName, type PackedLayer, type TrunkCodec } from "./trunk-file.ts";
import type { LayerLayout } from "./trunk-layout.ts";
import type { LayerWeights } from "./types.ts";
import { VectorArena } from "./vector-arena.ts";

/** Stored bytes of one piece, and the fewest pieces the staging area holds (one decoding, one landing). */
export const pieceBytes = 32 * 1024 * 1024;
export const minimumPieces = 2;

/** What the planner sizes the staging area in: pieces of `pieceBytes`, or of the largest layer when layers are smaller. */
export function stagingPiece(largestStoredBytes: number): { bytes: number; slotBytes: number; minimum: number } {
  const A = allocAlignment();
  const bytes = Math.min(pieceBytes, Math.ceil(largestStoredBytes / A) * A);
  return { bytes, slotBytes: Math.ceil(readCapacity(bytes) / A) * A, minimum: minimumPieces };
}

/** A run of whole blocks read and decoded as one: [offset, offset + bytes) of the stored layer. */
export interface Piece {
  first: number;
  count: number;
  offset: number;
  bytes: number;
}

/**
 * The layer's blocks cut into pieces of at most `pieceBytes` stored bytes (a block larger than
 * that is a piece of its own), after the table, which is held in memory.
 */
export function piecesOf(table: Uint8Array, blocks: number, pieceBytes: number): Piece[] {
  const pieces: Piece[] = [];
  let first = 0;
  while (first < blocks) {
    const start = tableEntry(table, first).offset;
    let count = 1;
    let end = start + tableEntry(table, first).length;
    while (first + count < blocks) {
      const next = tableEntry(table, first + count);
      if (next.offset + next.length - start > pieceBytes) break;
      end = next.offset + next.length;
      count++;
    }
    pieces.push({ first, count, offset: start, bytes: end - start });
    first += count;
  }
  return pieces;
}

/** The one-line refusal of a damaged block, naming the layer, the block and the tensor it holds. */
export function damagedBlock(binPath: string, packed: PackedLayer, codec: TrunkCodec, block: number): K3Error {
  const from = block * codec.block_bytes;
  const to = Math.min(packed.payload_bytes, from + codec.block_bytes);
  const held = Object.entries(packed.tensors).filter(([, t]) => t.off < to && t.off + t.nbytes > from).sort(([, a], [, b]) => a.off - b.off).map(([name]) => name);
  const tensors = held.length === 0 ? "" : held.length === 1 ? `, in ${held[0]}` : `, in ${held[0]} and ${held.length - 1} more tensor${held.length > 2 ? "s" : ""}`;
  return new K3Error(
    ExitCode.runtime,
    `${binPath}: layer ${packed.layer} block ${block} (bytes [${from}, ${to}) of the layer${tensors}) is damaged: its entry, header or checksum is wrong; re-run 'k3 pack-trunk --compress'`,
  );
}

/** A compressed layer ready to decode: its manifest entry and its block table. */
export interface StoredLayer {
  packed: PackedLayer;
  table: Uint8Array;
  blocks: number;
  pieces: Piece[];
}

/** Reads and checks every layer's block table (one small read per layer), as the trunk is opened. */
export function readTables(dir: string, layers: readonly PackedLayer[], codec: TrunkCodec, pieceBytes: number): StoredLayer[] {
  const binPath = join(dir, trunkBinName);
  const file = new DirectFile(binPath);
  try {
    return layers.map((packed) => {
      const blocks = blockCount(packed.payload_bytes, codec.block_bytes);
      const table = file.read(packed.file_off, blocks * trunkEntryBytes).slice();
      if (tableHash(table) !== packed.table_hash) {
        throw new K3Error(ExitCode.runtime, `${binPath}: layer ${packed.layer}'s block table does not match its recorded hash (corrupted?); re-run 'k3 pack-trunk --compress'`);
      }
      // Each block where the one before ends, no longer than a raw block, the last ending the layer:
      // what the pieces' reads are sized from is checked here, before any read is.
      let at = blocks * trunkEntryBytes;
      for (let b = 0; b < blocks; b++) {
        const entry = tableEntry(table, b);
        const decoded = Math.min(codec.block_bytes, packed.payload_bytes - b * codec.block_bytes);
        if (entry.offset !== at || entry.length > decoded + trunkHeaderBytes || entry.length < trunkHeaderBytes) throw damagedBlock(binPath, packed, codec, b);
        at += entry.length;
      }
      if (at !== packed.stored_bytes) throw damagedBlock(binPath, packed, codec, blocks - 1);
      return { packed, table, blocks, pieces: piecesOf(table, blocks, pieceBytes) };
    });
  } finally {
    file.close();
  }
}

/** Decodes blocks of `layer` from `src` (stored bytes from offset `srcBase`) into the decoded layer at `dst`. */
export function decodeRun(
  binPath: string, layer: StoredLayer, codec: TrunkCodec, run: { first: number; count: number; src: NativeBuffer; srcAt: number; srcBytes: number; srcBase: number },
  dst: NativeBuffer, dstAt: number, verify: boolean,
): void {
  const from = run.first * codec.block_bytes;
  const to = Math.min(layer.packed.payload_bytes, (run.first + run.count) * codec.block_bytes);
  const damaged = decodeBlocks({
    layer: layer.packed.layer, table: layer.table, first: run.first, count: run.count,
    src: offsetPointer(run.src.ptr, run.srcAt), srcBytes: run.srcBytes, srcBase: run.srcBase,
    dst: offsetPointer(dst.ptr, dstAt + from), dstBytes: to - from, blockBytes: codec.block_bytes, verify,
  });
  if (damaged !== undefined) throw damagedBlock(binPath, layer.packed, codec, damaged);
}

/** What the compressed trunk executes, decided by the planner (plan/trunk-plan.ts `planCompressedTrunk`). */
export interface CompressedRingPlan extends RingPlan {
  /** The staging area: whole staging slots of `stagingSlotBytes`, each one piece's read window. */
  stagingBytes: number;
  pieceBytes: number;
  stagingSlotBytes: number;
}

/** A piece being read into the staging area. */
interface Staged {
  layer: number;
  piece: number;
  slot: number;
  read: PendingRead;
}

export class CompressedTrunk implements Trunk {
  readonly layerCount: number;
  readonly plan: CompressedRingPlan;
  readonly stats: TrunkStats = { binds: 0, hits: 0, reads: 0, bytesRead: 0, aheadBytes: 0, readSeconds: 0, waitSeconds: 0, bytesDecoded: 0, codecSeconds: 0 };
  readonly #config: ModelConfig;
  readonly #codec: TrunkCodec;
  readonly #binPath: string;
  readonly #layers: StoredLayer[];
  readonly #layouts: LayerLayout[];
  readonly #file: DirectFile;
  readonly #warnings: string[];
  readonly #readFaults: ReadonlyMap<number, number>;
  readonly #readsOfLayer = new Map<number, number>();
  readonly #verified = new Set<number>();
  readonly #pinned = new Map<number, NativeBuffer>();
  /** The decoded slot and its vectors, the staging area; allocated on first use. */
  #slot: { buffer: NativeBuffer; vectors: VectorArena } | undefined;
  #staging: NativeBuffer | undefined;
  /** Staging slots (each one piece's read window) and the reads in flight, oldest first. */
  readonly #stagingSlots: number;
  readonly #stagingSlotBytes: number;
  #inFlight: Staged[] = [];
  #current: { layer: number; weights: LayerWeights } | undefined;

  constructor(
    dir: string, layers: StoredLayer[], layouts: LayerLayout[], codec: TrunkCodec, config: ModelConfig, plan: CompressedRingPlan,
    warnings: string[], readFaults: ReadonlyMap<number, number> = new Map(),
  ) {
    this.layerCount = layers.length;
    this.plan = plan;
    this.#config = config;
    this.#codec = codec;
    this.#layers = layers;
    this.#layouts = layouts;
    this.#warnings = warnings;
    this.#readFaults = readFaults;
    this.#binPath = join(dir, trunkBinName);
    this.#file = new DirectFile(this.#binPath);
    this.#stagingSlotBytes = plan.stagingSlotBytes;
    this.#stagingSlots = Math.floor(plan.stagingBytes / plan.stagingSlotBytes);
    if (plan.pinned < layers.length && this.#stagingSlots < 1) throw new Error("compressed trunk plan without a staging slot");
  }

  #slotArena(): { buffer: NativeBuffer; vectors: VectorArena } {
    this.#slot ??= {
      buffer: NativeBuffer.allocate(Math.max(...this.#layers.map((l) => l.packed.payload_bytes)), "the decoded trunk slot", "read-target"),
      vectors: new VectorArena(Math.max(...this.#layouts.map((layout) => vectorBytes(layout))), "decoded trunk slot vectors"),
    };
    return this.#slot;
  }

  #stagingArea(): NativeBuffer {
    this.#staging ??= NativeBuffer.allocate(this.#stagingSlots * this.#stagingSlotBytes, "the compressed trunk's staging area", "read-target");
    return this.#staging;
  }

  layer(layer: number): LayerWeights {
    this.stats.binds++;
    if (this.#current?.layer === layer) {
      this.stats.hits++;
      return this.#current.weights;
    }
    const slot = this.#slotArena();
    this.#current = undefined; // the slot is about to be overwritten
    const verify = !this.#verified.has(layer);
    if (layer < this.plan.pinned) this.#decodePinned(layer, slot.buffer, verify);
    else this.#decodeStreamed(layer, slot.buffer, verify);
    const stored = this.#layers[layer]!;
    if (verify) {
      checkLayerBytes(this.#binPath, stored.packed, slot.buffer.u8(0, stored.packed.payload_bytes));
      this.#verified.add(layer);
    }
    this.stats.bytesDecoded += stored.packed.payload_bytes;
    const weights = bindLayer(this.#config, { layout: this.#layouts[layer]!, base: slot.buffer.ptr }, slot.vectors, this.#warnings);
    this.#current = { layer, weights };
    this.#readAhead(layer);
    return weights;
  }

  /** A pinned layer: its stored bytes are read once and kept; every use decodes them. */
  #decodePinned(layer: number, slot: NativeBuffer, verify: boolean): void {
    const stored = this.#layers[layer]!;
    let held = this.#pinned.get(layer);
    if (held) this.stats.hits++;
    else {
      held = NativeBuffer.allocate(readCapacity(stored.packed.nbytes), `pinned compressed trunk layer ${layer}`, "read-target");
      const started = performance.now();
      const { seconds } = this.#file.readInto(stored.packed.file_off, stored.packed.nbytes, held, 0, undefined, this.#label(layer));
      this.#accountRead(layer, stored.packed.nbytes, performance.now() - started, seconds);
      this.#pinned.set(layer, held);
    }
    const tableBytes = stored.blocks * trunkEntryBytes;
    const started = performance.now();
    decodeRun(this.#binPath, stored, this.#codec, {
      first: 0, count: stored.blocks, src: held, srcAt: tableBytes, srcBytes: stored.packed.stored_bytes! - tableBytes, srcBase: tableBytes,
    }, slot, 0, verify);
    this.stats.codecSeconds += (performance.now() - started) / 1000;
  }

  /** A streamed layer: its pieces are read into the staging slots in turn and decoded as they land. */
  #decodeStreamed(layer: number, slot: NativeBuffer, verify: boolean): void {
    const stored = this.#layers[layer]!;
    const staging = this.#stagingArea();
    if (this.#inFlight[0]?.layer !== layer) this.#drain();
    let next = this.#inFlight.length;
    for (; next < Math.min(stored.pieces.length, this.#stagingSlots); next++) this.#submit(layer, next);
    let waitedMs = 0;
    let seconds = 0;
    for (let p = 0; p < stored.pieces.length; p++) {
      const staged = this.#inFlight.shift();
      // The reads in flight are this layer's pieces in order: anything else is a bug here, not bad input.
      if (staged?.layer !== layer || staged.piece !== p) throw new Error(`compressed trunk: piece ${p} of layer ${layer} was not the next read in flight`);
      const piece = stored.pieces[p]!;
      const started = performance.now();
      const { payload, seconds: device } = staged.read.wait();
      waitedMs += performance.now() - started;
      seconds += device;
      const decodeStarted = performance.now();
      decodeRun(this.#binPath, stored, this.#codec, {
        first: piece.first, count: piece.count, src: staging, srcAt: staged.slot * this.#stagingSlotBytes + payload, srcBytes: piece.bytes, srcBase: piece.offset,
      }, slot, 0, verify);
      this.stats.codecSeconds += (performance.now() - decodeStarted) / 1000;
      if (next < stored.pieces.length) this.#submit(layer, next++);
    }
    this.#accountRead(layer, stored.packed.stored_bytes! - stored.blocks * trunkEntryBytes, waitedMs, seconds);
  }

  /** Starts reading piece `piece` of `layer` into the next staging slot. */
  #submit(layer: number, piece: number): void {
    const { offset, bytes } = this.#layers[layer]!.pieces[piece]!;
    const slot = this.#inFlight.length === 0 ? 0 : (this.#inFlight.at(-1)!.slot + 1) % this.#stagingSlots;
    const packed = this.#layers[layer]!.packed;
    const read = this.#file.submit(packed.file_off + offset, bytes, this.#stagingArea(), slot * this.#stagingSlotBytes, this.#label(layer));
    this.#inFlight.push({ layer, piece, slot, read });
  }

  /** While `current` computes, the first pieces of the next streamed layer are read. */
  #readAhead(current: number): void {
    const P = this.plan.pinned;
    if (P === this.layerCount) return;
    const next = current + 1 < this.layerCount ? Math.max(current + 1, P) : P;
    if (this.#inFlight[0]?.layer === next) return;
    this.#drain();
    const pieces = this.#layers[next]!.pieces;
    for (let p = 0; p < Math.min(pieces.length, this.#stagingSlots); p++) {
      this.#submit(next, p);
      this.stats.aheadBytes += pieces[p]!.bytes;
    }
  }

  /** Waits out reads that will not be used (their staging slots are about to be reused). */
  #drain(): void {
    for (const staged of this.#inFlight.splice(0)) {
      try {
        staged.read.wait();
      } catch {
        // That piece is read again when it is needed; its error surfaces then.
      }
    }
  }

  #label(layer: number): string {
    return `${this.#binPath}: layer ${layer}`;
  }

  #accountRead(layer: number, bytes: number, waitedMs: number, seconds: number): void {
    this.stats.waitSeconds += waitedMs / 1000;
    this.stats.reads++;
    this.stats.readSeconds += seconds;
    this.stats.bytesRead += bytes;
    const readNumber = (this.#readsOfLayer.get(layer) ?? 0) + 1;
    this.#readsOfLayer.set(layer, readNumber);
    if (this.#readFaults.get(layer) === readNumber) throw new K3Error(ExitCode.runtime, describeStatus(-os.errno.EIO, this.#label(layer)));
  }

  close(): void {
    this.#drain();
    this.#slot?.buffer.free();
    this.#slot?.vectors.free();
    this.#slot = undefined;
    this.#staging?.free();
    this.#staging = undefined;
    for (const buffer of this.#pinned.values()) buffer.free();
    this.#pinned.clear();
    this.#file.close();
  }
}
