/**
 * Ultra-low-memory mode's model tables (runtime.md 2.4): the embedding and the LM head stay on
 * disk. Each embedding row is read from its shard when a token needs it and widened as the
 * resident path widens it; the logits walk the LM head in row chunks of `chunkBytes` (4 MiB)
 * through one aligned buffer, each chunk through the same matmul. The bf16 matmul splits work by
 * output rows and a row's dot product depends on that row alone, so the chunked logits have the
 * bits of the resident product. Only the final norm and the output fold stay resident.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { dtypeBytes, type CheckpointIndex, type TensorEntry } from "../checkpoint/safetensors.ts";
import { modelTensors } from "../checkpoint/tensor-names.ts";
import { readCapacity } from "../native/file.ts";
import * as kernels from "../native/kernels.ts";
import { f32View, NativeBuffer, offsetPointer } from "../native/memory.ts";
import { emptyTableStats, loadModelVectors, widenRows, type ModelTables } from "./model-tables.ts";
import type { ShardFiles } from "./shard-files.ts";
import type { TensorReader } from "./tensor-reader.ts";
import type { Matrix } from "./types.ts";

/** The LM head is walked in chunks of this many bytes of rows (runtime.md 2.4). */
export const lmHeadChunkBytes = 4 * 1024 * 1024;

/** Rows of a table of `cols` columns of `dtype` that one chunk holds (at least one). */
export function chunkRows(cols: number, dtype: TensorEntry["dtype"], chunkBytes: number): number {
  return Math.max(1, Math.floor(chunkBytes / (cols * dtypeBytes[dtype])));
}

/** How the LM head is walked: rows per chunk and the chunk buffer's bytes. */
export function lmHeadWalk(index: CheckpointIndex, config: ModelConfig, chunkBytes = lmHeadChunkBytes): { rowsPerChunk: number; chunks: number; bufferBytes: number } {
  const t = modelTensors(config);
  const head = index.get((t.lmHead ?? t.embed).name)!;
  const E = config.hiddenSize;
  const rowsPerChunk = Math.min(chunkRows(E, head.dtype, chunkBytes), config.vocabSize);
  return { rowsPerChunk, chunks: Math.ceil(config.vocabSize / rowsPerChunk), bufferBytes: readCapacity(rowsPerChunk * E * dtypeBytes[head.dtype]) };
}

/**
 * What the streamed tables hold in memory (runtime.md 3.2, ultra): the chunk buffer, one
 * embedding row's read buffer, and the final norm and output fold.
 */
export function streamedTableBytes(index: CheckpointIndex, config: ModelConfig, chunkBytes = lmHeadChunkBytes): number {
  const E = config.hiddenSize;
  const embed = index.get(modelTensors(config).embed.name)!;
  return lmHeadWalk(index, config, chunkBytes).bufferBytes + readCapacity(E * dtypeBytes[embed.dtype]) + 3 * E * 4;
}

export function openStreamedTables(index: CheckpointIndex, reader: TensorReader, config: ModelConfig, chunkBytes = lmHeadChunkBytes): ModelTables {
  const E = config.hiddenSize;
  const t = modelTensors(config);
  const embedEntry = index.get(t.embed.name)!;
  const headEntry = index.get((t.lmHead ?? t.embed).name)!;
  const files: ShardFiles = reader.files;
  const { finalNorm, phiOut, arena } = loadModelVectors(index, reader, config);
  const headRowBytes = E * dtypeBytes[headEntry.dtype];
  const embedRowBytes = E * dtypeBytes[embedEntry.dtype];
  const { rowsPerChunk, bufferBytes } = lmHeadWalk(index, config, chunkBytes);
  const chunk = NativeBuffer.allocate(bufferBytes, "the LM head chunk", "read-target");
  const row = NativeBuffer.allocate(readCapacity(embedRowBytes), "an embedding row", "read-target");
  let staging: NativeBuffer | undefined; // [rows][chunk rows] when several positions want logits
  const stats = emptyTableStats();
  const read = (entry: TensorEntry, offset: number, bytes: number, into: NativeBuffer) => {
    const started = performance.now();
    const { payload } = files.get(entry.shard).submit(entry.offset + offset, bytes, into).wait();
    stats.readSeconds += (performance.now() - started) / 1000;
    return offsetPointer(into.ptr, payload);
  };
  return {
    streamed: true, finalNorm, phiOut, stats,
    residentBytes: chunk.bytes + row.bytes,
    embed(ids, out) {
      ids.forEach((id, r) => {
        const src = read(embedEntry, id * embedRowBytes, embedRowBytes, row);
        stats.embeddingBytesRead += embedRowBytes;
        widenRows(embedEntry.dtype as Matrix["dtype"], src, { ptr: offsetPointer(out.ptr, r * E * 4), length: E }, E);
      });
    },
    project(normed, logits, rows) {
      const V = config.vocabSize;
      if (rows > 1 && (!staging || staging.bytes < rows * rowsPerChunk * 4)) {
        staging?.free();
        staging = NativeBuffer.allocate(rows * rowsPerChunk * 4, "LM head chunk logits");
      }
      for (let first = 0; first < V; first += rowsPerChunk) {
        const n = Math.min(rowsPerChunk, V - first);
        const ptr = read(headEntry, first * headRowBytes, n * headRowBytes, chunk);
        stats.lmHeadBytesRead += n * headRowBytes;
        const w: Matrix = { name: headEntry.name, ptr, rows: n, cols: E, dtype: headEntry.dtype as Matrix["dtype"] };
        if (rows === 1) {
          kernels.matmul(w, normed, { ptr: offsetPointer(logits.ptr, first * 4), length: n }, 1);
          continue;
        }
        const out = staging as NativeBuffer;
        kernels.matmul(w, normed, { ptr: out.ptr, length: rows * n }, rows);
        const part = f32View(out.ptr, 0, rows * n);
        const all = f32View(logits.ptr, 0, rows * V);
        for (let r = 0; r < rows; r++) all.set(part.subarray(r * n, (r + 1) * n), r * V + first);
      }
    },
    close() {
      chunk.free();
      row.free();
      staging?.free();
      arena.free();
    },
  };
}
