/**
 * Where one layer's trunk tensors live: in the checkpoint (a run inside one shard) and in
 * memory (the same relative offsets when the run is contiguous, so a layer is one read).
 * The packed trunk file stores exactly these layouts.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { dtypeBytes, type CheckpointIndex, type Dtype } from "../checkpoint/safetensors.ts";
import { trunkTensors } from "../checkpoint/tensor-names.ts";
import { entriesOf, placeTensors } from "../checkpoint/tensor-run.ts";

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

export function layerLayout(index: CheckpointIndex, config: ModelConfig, layer: number): LayerLayout {
  const entries = entriesOf(index, trunkTensors(config, layer));
  const { run, bytes, offsets } = placeTensors(entries);
  const tensors = entries.map((e, i): LayoutTensor => ({ name: e.name, off: offsets[i]!, nbytes: e.nbytes, dtype: e.dtype, shape: e.shape }));
  return { layer, bytes, run, tensors: tensors.sort((a, b) => a.name.localeCompare(b.name)) };
}

/** Why a layer cannot be packed as one run (runtime.md 4.2), or undefined when it can. */
export function packRefusal(layout: LayerLayout): string | undefined {
  if (!layout.run) return `layer ${layout.layer}'s trunk tensors are not one contiguous run in one shard`;
  // A packed layer starts aligned, so each tensor's offset in the run must keep its elements aligned.
  const unaligned = layout.tensors.find((t) => t.off % dtypeBytes[t.dtype] !== 0);
  return unaligned ? `${unaligned.name} would not be ${dtypeBytes[unaligned.dtype]}-byte aligned in the packed layer ${layout.layer}` : undefined;
}
