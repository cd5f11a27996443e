/** The model-level tensors: embedding, LM head, final norm and the output AttnRes fold. */
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { modelTensors, type TensorSpec } from "../checkpoint/tensor-names.ts";
import type { NativeBuffer } from "../native/memory.ts";
import type { TensorReader } from "./tensor-reader.ts";
import type { Matrix, Vector } from "./types.ts";
import { VectorArena } from "./vector-arena.ts";
import { foldPhi, widenToF32 } from "./widen.ts";

export interface ModelTables {
  embed: Matrix;
  lmHead: Matrix;
  finalNorm: Vector;
  phiOut: Vector;
  close(): void;
}

export function loadModelTables(index: CheckpointIndex, reader: TensorReader, config: ModelConfig): ModelTables {
  const owned: NativeBuffer[] = [];
  const matrix = (spec: TensorSpec): Matrix => {
    const entry = index.get(spec.name)!;
    const { buffer, ptr } = reader.readToNative(entry);
    owned.push(buffer);
    return { name: spec.name, ptr, rows: entry.shape[0] as number, cols: entry.shape[1] as number, dtype: entry.dtype as Matrix["dtype"] };
  };
  const values = (spec: TensorSpec): Float32Array => {
    const entry = index.get(spec.name)!;
    return widenToF32(reader.readRaw(entry), entry.dtype, config.hiddenSize).slice();
  };
  const t = modelTensors(config);
  const arena = new VectorArena(VectorArena.bytesFor([config.hiddenSize, config.hiddenSize]), "model-level vectors");
  const embed = matrix(t.embed);
  const lmHead = t.lmHead ? matrix(t.lmHead) : embed;
  const finalNorm = arena.store("final norm", values(t.finalNorm));
  const phiOut = arena.store("output AttnRes fold", foldPhi(values(t.outputResNorm), values(t.outputResProj)));
  return {
    embed, lmHead, finalNorm, phiOut,
    close() {
      for (const b of owned) b.free();
      arena.free();
    },
  };
}
