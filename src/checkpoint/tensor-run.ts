/**
 * Where a group of tensors that is read together (a layer's trunk, one routed expert) lives in
 * memory. When the group is one contiguous run of one shard it is one read, and each tensor
 * keeps its offset from the start of the run; otherwise the tensors are packed back to back.
 */
import { K3Error, ExitCode } from "../errors.ts";
import type { CheckpointIndex, TensorEntry } from "./safetensors.ts";
import type { TensorSpec } from "./tensor-names.ts";

/** Packed tensors start 64-byte aligned, for vector loads. */
const packAlignment = 64;

export interface TensorPlacement {
  /** Set when the entries are one contiguous run of one shard. */
  run: { shard: number; start: number } | undefined;
  /** Bytes the group takes in memory: the run, or the packed tensors with their alignment. */
  bytes: number;
  /** Each entry's byte offset from the start of those bytes, in the order the entries came. */
  offsets: number[];
}

/** The index entries of `specs`, in the same order; a missing one is a runtime error naming it. */
export function entriesOf(index: CheckpointIndex, specs: readonly TensorSpec[]): TensorEntry[] {
  return specs.map((spec) => {
    const entry = index.get(spec.name);
    if (!entry) throw new K3Error(ExitCode.runtime, `${index.dir}: missing ${spec.name}`);
    return entry;
  });
}

export function placeTensors(entries: readonly TensorEntry[]): TensorPlacement {
  const shard = entries[0]!.shard;
  const start = Math.min(...entries.map((e) => e.offset));
  const end = Math.max(...entries.map((e) => e.offset + e.nbytes));
  const payload = entries.reduce((sum, e) => sum + e.nbytes, 0);
  if (entries.every((e) => e.shard === shard) && end - start === payload) {
    return { run: { shard, start }, bytes: payload, offsets: entries.map((e) => e.offset - start) };
  }
  let at = 0;
  const offsets = entries.map((e) => {
    const off = at;
    at = Math.ceil((at + e.nbytes) / packAlignment) * packAlignment;
    return off;
  });
  return { run: undefined, bytes: at, offsets };
}
