/**
 * The model-level tensors: embedding, LM head, final norm and the output AttnRes fold. Held
 * resident (read once at open), or in ultra-low-memory mode streamed from the shard
 * (streamed-tables.ts); either way the forward pass asks for embedding rows and a projection,
 * and both give the same bits.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { modelTensors, type TensorSpec } from "../checkpoint/tensor-names.ts";
import * as kernels from "../native/kernels.ts";
import { f32View, offsetPointer, type NativeBuffer } from "../native/memory.ts";
import type { TensorReader } from "./tensor-reader.ts";
import type { Matrix, Vector } from "./types.ts";
import { VectorArena } from "./vector-arena.ts";
import { foldPhi, widenToF32 } from "./widen.ts";

/** What a streamed table read during the run (all zero when the tables are resident). */
export interface TableStats {
  embeddingBytesRead: number;
  lmHeadBytesRead: number;
  /** Seconds spent waiting for those reads (they are synchronous). */
  readSeconds: number;
}

export interface ModelTables {
  /** True when the embedding and LM head are read from the shard as needed (ultra-low-memory). */
  readonly streamed: boolean;
  readonly finalNorm: Vector;
  readonly phiOut: Vector;
  /** Bytes held in memory for the embedding and LM head (their matrices, or the streaming buffers). */
  readonly residentBytes: number;
  readonly stats: TableStats;
  /** out[t] = the embedding row of ids[t], widened exactly to f32; out holds [ids][E]. */
  embed(ids: readonly number[], out: kernels.F32Ref): void;
  /** logits [rows][vocab] = normed [rows][E] · lm_headᵀ. */
  project(normed: kernels.F32Ref, logits: kernels.F32Ref, rows: number): void;
  close(): void;
}

export const emptyTableStats = (): TableStats => ({ embeddingBytesRead: 0, lmHeadBytesRead: 0, readSeconds: 0 });

/** One embedding row (or a run of rows) of a bf16 or f32 table at `src`, widened into `dst`. */
export function widenRows(dtype: Matrix["dtype"], src: NativeBuffer["ptr"], dst: kernels.F32Ref, count: number): void {
  if (dtype === "BF16") kernels.widenBf16(src, dst, count);
  else if (dtype === "F32") f32View(dst.ptr, 0, count).set(f32View(src, 0, count));
  else throw new Error(`embedding rows in ${dtype} are not supported`);
}

/** The final norm and the output AttnRes fold: small, always resident. */
export function loadModelVectors(index: CheckpointIndex, reader: TensorReader, config: ModelConfig): { finalNorm: Vector; phiOut: Vector; arena: VectorArena } {
  const values = (spec: TensorSpec): Float32Array => {
    const entry = index.get(spec.name)!;
    return widenToF32(reader.readRaw(entry), entry.dtype, config.hiddenSize).slice();
  };
  const t = modelTensors(config);
  const arena = new VectorArena(VectorArena.bytesFor([config.hiddenSize, config.hiddenSize]), "model-level vectors");
  const finalNorm = arena.store("final norm", values(t.finalNorm));
  const phiOut = arena.store("output AttnRes fold", foldPhi(values(t.outputResNorm), values(t.outputResProj)));
  return { finalNorm, phiOut, arena };
}

export function loadModelTables(index: CheckpointIndex, reader: TensorReader, config: ModelConfig): ModelTables {
  const owned: NativeBuffer[] = [];
  const E = config.hiddenSize;
  const matrix = (spec: TensorSpec): Matrix => {
    const entry = index.get(spec.name)!;
    const { buffer, ptr } = reader.readToNative(entry);
    owned.push(buffer);
    return { name: spec.name, ptr, rows: entry.shape[0] as number, cols: entry.shape[1] as number, dtype: entry.dtype as Matrix["dtype"] };
  };
  const t = modelTensors(config);
  const embedding = matrix(t.embed);
  const lmHead = t.lmHead ? matrix(t.lmHead) : embedding;
  const { finalNorm, phiOut, arena } = loadModelVectors(index, reader, config);
  const rowBytes = E * (embedding.dtype === "BF16" ? 2 : 4);
  return {
    streamed: false, finalNorm, phiOut, stats: emptyTableStats(),
    residentBytes: owned.reduce((sum, b) => sum + b.bytes, 0),
    embed(ids, out) {
      ids.forEach((id, row) => widenRows(embedding.dtype, offsetPointer(embedding.ptr, id * rowBytes), { ptr: offsetPointer(out.ptr, row * E * 4), length: E }, E));
    },
    project(normed, logits, rows) {
      kernels.matmul(lmHead, normed, logits, rows);
    },
    close() {
      for (const b of owned) b.free();
      arena.free();
    },
  };
}
