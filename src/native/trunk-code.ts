/**
 * The compressed trunk's block code as TypeScript calls it (zig/codec/bf16_planes.zig has the
 * format; zig/abi.zig the contracts): coding a layer for `k3 pack-trunk --compress`, and
 * decoding runs of its blocks into the memory the plain format would have filled.
 */
import { K3Error, ExitCode } from "../errors.ts";
import { Status, trunkEntryBytes, trunkHeaderBytes, trunkMaxBlockBytes, trunkMinBlockBytes } from "./abi.ts";
import { native } from "./library.ts";
import type { Pointer } from "./memory.ts";

export { trunkEntryBytes, trunkHeaderBytes, trunkMaxBlockBytes, trunkMinBlockBytes };

/** Blocks of a layer of `payloadBytes` decoded bytes. */
export const blockCount = (payloadBytes: number, blockBytes: number): number => Math.ceil(payloadBytes / blockBytes);

/** Worst-case stored bytes of a layer of `payloadBytes` (every block stored raw). */
export function codeBound(payloadBytes: number, blockBytes: number): number {
  const bound = Number(native().k3_trunk_code_bound(payloadBytes, blockBytes));
  if (bound === 0) throw new Error(`trunk code: no bound for ${payloadBytes} bytes in blocks of ${blockBytes}`);
  return bound;
}

/** Codes layer `layer`'s `payloadBytes` at `src` into `dst` (capacity `capacity`); returns the stored length. */
export function encodeLayer(src: Pointer, payloadBytes: number, blockBytes: number, layer: number, dst: Pointer, capacity: number): number {
  const stored = new BigUint64Array(1);
  const status = native().k3_trunk_encode(src, payloadBytes, blockBytes, layer, dst, capacity, stored);
  if (status === Status.outOfMemory) throw new K3Error(ExitCode.runtime, `could not allocate the block list to compress layer ${layer}`);
  if (status !== Status.ok) throw new Error(`k3_trunk_encode: status ${status}`);
  return Number(stored[0]);
}

/** A run of consecutive blocks of one layer and where their bytes are. */
export interface BlockRun {
  layer: number;
  /** The layer's block table (all of it); the run's entries are read from it. */
  table: Uint8Array;
  first: number;
  count: number;
  /** Their stored bytes (native memory, or a view of it), starting at offset `srcBase` of the layer's stored bytes. */
  src: Pointer | Uint8Array;
  srcBytes: number;
  srcBase: number;
  /** Where their decoded bytes go (native memory, or a view of it), and how many there are. */
  dst: Pointer | Uint8Array;
  dstBytes: number;
  blockBytes: number;
  /** Check each block's checksum too (the first decode of a layer). */
  verify: boolean;
}

/** Decodes a run of blocks on the compute pool; returns the first damaged block's index in the layer, or undefined. */
export function decodeBlocks(run: BlockRun): number | undefined {
  const damaged = new BigUint64Array(1);
  const entries = run.table.subarray(run.first * trunkEntryBytes, (run.first + run.count) * trunkEntryBytes);
  const status = native().k3_trunk_decode(
    entries, run.count, run.first, run.layer, run.src, run.srcBytes, run.srcBase, run.dst, run.dstBytes, run.blockBytes, run.verify ? 1 : 0, damaged,
  );
  if (status === Status.damaged) return Number(damaged[0]);
  if (status === Status.outOfMemory) throw new K3Error(ExitCode.runtime, `out of memory decoding layer ${run.layer}`);
  if (status !== Status.ok) throw new Error(`k3_trunk_decode: status ${status} (layer ${run.layer}, blocks ${run.first}+${run.count})`);
  return undefined;
}

/** Each block's stored offset (in the layer's stored bytes) and length, read from a table. */
export function tableEntry(table: Uint8Array, block: number): { offset: number; length: number } {
  const view = new DataView(table.buffer, table.byteOffset + block * trunkEntryBytes, trunkEntryBytes);
  return { offset: Number(view.getBigUint64(0, true)), length: view.getUint32(8, true) };
}
