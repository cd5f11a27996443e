/**
 * Where one layer's trunk tensors live: in the checkpoint (a run inside one shard) and in
 * memory (the same relative offsets when the run is contiguous, so a layer is one read).
 * The packed trunk file stores exactly these layouts.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex, Dtype, TensorEntry } from "../checkpoint/safetensors.ts";
import { trunkTensors } from "../checkpoint/tensor-names.ts";
import { K3Error, ExitCode } from "../errors.ts";

export interface LayoutTensor {
  name: string;
  /** Byte offset from the start of the layer's bytes. */
  off: number;
  nbytes: number;
  dtype: Dtype;
  shape: number[];
}

export interface LayerLayout {
  layer: number;
  /** Bytes of the layer in memory (the run, or the tensors packed back to back). */
  bytes: number;
  tensors: LayoutTensor[];
  /** Set when the layer is one contiguous run of one shard: then it is one read. */
  run: { shard: number; start: number } | undefined;
}

const align = (n: number, to: number) => Math.ceil(n / to) * to;

export function layerLayout(index: CheckpointIndex, config: ModelConfig, layer: number): LayerLayout {
  const entries: TensorEntry[] = trunkTensors(config, layer).map((spec) => {
    const entry = index.get(spec.name);
    if (!entry) throw new K3Error(ExitCode.runtime, `${index.dir}: missing ${spec.name}`);
    return entry;
  });
  const start = Math.min(...entries.map((e) => e.offset));
  const end = Math.max(...entries.map((e) => e.offset + e.nbytes));
  const payload = entries.reduce((sum, e) => sum + e.nbytes, 0);
  const oneShard = entries.every((e) => e.shard === entries[0]!.shard);
  const tensorOf = (e: TensorEntry, off: number): LayoutTensor => ({ name: e.name, off, nbytes: e.nbytes, dtype: e.dtype, shape: e.shape });
  if (oneShard && end - start === payload) {
    return {
      layer, bytes: payload, run: { shard: entries[0]!.shard, start },
      tensors: entries.map((e) => tensorOf(e, e.offset - start)).sort((a, b) => a.name.localeCompare(b.name)),
    };
  }
  // Not one run: pack the tensors back to back, each 64-byte aligned for vector loads.
  let at = 0;
  const tensors = entries.map((e) => {
    const t = tensorOf(e, at);
    at = align(at + e.nbytes, 64);
    return t;
  });
  return { layer, bytes: at, run: undefined, tensors: tensors.sort((a, b) => a.name.localeCompare(b.name)) };
}

/** Why a layer cannot be packed as one run (runtime.md 4.2), or undefined when it can. */
export function packRefusal(layout: LayerLayout): string | undefined {
  return layout.run ? undefined : `layer ${layout.layer}'s trunk tensors are not one contiguous run in one shard`;
}
