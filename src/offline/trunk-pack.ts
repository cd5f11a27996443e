/**
 * `k3 pack-trunk`: copies each layer's trunk run verbatim into trunk.bin at an O_DIRECT-aligned
 * offset, verifies what it wrote by reading it back, and only then renames the files into
 * place, trunk.json last: an interrupted pack never leaves a complete-looking pack behind.
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { K3Error, ExitCode } from "../errors.ts";
import { DirectFile } from "../native/file.ts";
import { commitAll, errnoReason, stageBytes, stageWrite, writeFully, type StagedWrite } from "../fs.ts";
import { allocAlignment, NativeBuffer, u8View } from "../native/memory.ts";
import { blockCount, codeBound, decodeBlocks, encodeLayer, trunkEntryBytes } from "../native/trunk-code.ts";
import { stopIfSignalled } from "../native/signals.ts";
import type { TensorReader } from "../weights/tensor-reader.ts";
import {
  alignUp, defaultCodecBlockBytes, hashChunkBytes, hashSeed, layerHash, layerSource, recordedRun, tableHash, trunkBinName, trunkCodecName, trunkFormatVersion, trunkJsonName,
  type PackedLayer, type TrunkCodec, type TrunkManifest,
} from "../weights/trunk-file.ts";
import { layerLayout, packRefusal } from "../weights/trunk-layout.ts";
import { prepareTrunkDir, priorTrunk } from "./trunk-output.ts";

export interface PackProgress {
  layersDone: number;
  layerCount: number;
  bytesDone: number;
  seconds: number;
  /** Compressed: the bytes written so far. */
  storedBytes?: number;
}

export interface PackResult {
  manifest: TrunkManifest;
  payloadBytes: number;
  largestLayerBytes: number;
  seconds: number;
  alreadyPacked: boolean;
}

/** The manifest a pack of these layers would have (hashes aside), and where each run is read from. */
function plannedLayers(index: CheckpointIndex, reader: TensorReader, config: ModelConfig, layerCount: number): { layers: PackedLayer[]; shards: number[] } {
  const layers: PackedLayer[] = [];
  const shards: number[] = [];
  let fileOff = 0;
  for (let layer = 0; layer < layerCount; layer++) {
    const layout = layerLayout(index, config, layer);
    const refusal = packRefusal(layout);
    if (refusal || !layout.run) throw new K3Error(ExitCode.runtime, `${index.dir}: cannot pack: ${refusal}`);
    const nbytes = alignUp(layout.bytes);
    layers.push({
      layer, ...recordedRun(index, layout.run), nbytes,
      payload_bytes: layout.bytes, file_off: fileOff, source: layerSource(reader, layout), hash: "",
      tensors: Object.fromEntries(layout.tensors.map((t) => [t.name, { off: t.off, nbytes: t.nbytes, dtype: t.dtype, shape: t.shape }])),
    });
    shards.push(layout.run.shard);
    fileOff += nbytes;
  }
  return { layers, shards };
}

/** A compressed pack of the same layers: the same runs of the same contents (its offsets follow from the code). */
function sameSource(a: PackedLayer[], b: PackedLayer[]): boolean {
  const strip = (layers: PackedLayer[]) => JSON.stringify(layers.map((l) => [l.layer, l.shard, l.run_start, l.payload_bytes, l.source, l.tensors]));
  return strip(a) === strip(b);
}

/** Everything but the hashes, to tell "the same pack" from "a different pack". */
function sameLayout(a: PackedLayer[], b: PackedLayer[]): boolean {
  const strip = (layers: PackedLayer[]) => JSON.stringify(layers.map(({ hash: _hash, ...rest }) => rest));
  return strip(a) === strip(b);
}

export function packTrunk(
  index: CheckpointIndex, reader: TensorReader, config: ModelConfig, layerCount: number, outDir: string,
  options: {
    force: boolean;
    onProgress: (p: PackProgress) => void;
    /** Fault injection for tests: after this many layers send `signal` (SIGKILL: as a power cut would). */
    killAfterLayers?: { layers: number; signal: "SIGKILL" | "SIGINT" | "SIGTERM" };
    /** Store each layer in the compressed code (`--compress`) instead of verbatim. */
    compress?: boolean;
    /** The code's block size (tests use small ones, so small layers have many blocks). */
    codecBlockBytes?: number;
  },
): PackResult {
  const started = performance.now();
  const { layers: planned, shards } = plannedLayers(index, reader, config, layerCount);
  const jsonPath = join(outDir, trunkJsonName);
  const binPath = join(outDir, trunkBinName);
  const largestLayerBytes = Math.max(...planned.map((l) => l.payload_bytes));
  const payloadBytes = planned.reduce((sum, l) => sum + l.payload_bytes, 0);
  const sameCodec = (existing: TrunkManifest) => (existing.codec !== undefined) === (options.compress === true);
  const existing = priorTrunk(
    outDir,
    (m) => sameCodec(m) && (m.codec ? m.codec.block_bytes === (options.codecBlockBytes ?? defaultCodecBlockBytes) && sameSource(m.layers, planned) : sameLayout(m.layers, planned)),
    options.force === true,
    "packed trunk",
  );
  if (existing) return { manifest: existing, payloadBytes, largestLayerBytes, seconds: 0, alreadyPacked: true };
  prepareTrunkDir(outDir);
  let bytesDone = 0;
  const padding = new Uint8Array(allocAlignment());
  const fill = (fd: number) => {
    for (const layer of planned) {
      // Copy in chunks, hashing the same chunks the verifier will hash.
      let hash = hashSeed(layer.source);
      for (let at = 0; at < layer.payload_bytes; at += hashChunkBytes) {
        stopIfSignalled(); // the temporary is removed on the way out
        const length = Math.min(hashChunkBytes, layer.payload_bytes - at);
        const chunk = reader.readRange(shards[layer.layer] as number, layer.run_start + at, length);
        hash = Bun.hash.wyhash(chunk, hash);
        writeFully(fd, chunk, layer.file_off + at);
      }
      const pad = layer.nbytes - layer.payload_bytes;
      if (pad > 0) writeFully(fd, padding.subarray(0, pad), layer.file_off + layer.payload_bytes);
      layer.hash = hash.toString(16).padStart(16, "0");
      bytesDone += layer.payload_bytes;
      options.onProgress({ layersDone: layer.layer + 1, layerCount, bytesDone, seconds: (performance.now() - started) / 1000 });
      if (layer.layer + 1 === options.killAfterLayers?.layers) process.kill(process.pid, options.killAfterLayers.signal); // fault injection
    }
  };
  // Both files are complete in their temporaries before either is renamed: a write that fails
  // (a full disk) leaves the directory as it was, so the same command works once there is room.
  const blockBytes = options.codecBlockBytes ?? defaultCodecBlockBytes;
  const codec: TrunkCodec | undefined = options.compress ? { name: trunkCodecName, block_bytes: blockBytes } : undefined;
  const fillCompressed = (fd: number) => {
    const largest = Math.max(...planned.map((l) => l.payload_bytes));
    const coded = NativeBuffer.allocate(alignUp(codeBound(largest, blockBytes)), "a compressed layer", "read-target");
    try {
      let fileOff = 0;
      for (const layer of planned) {
        stopIfSignalled();
        const run = reader.readRangeToNative(shards[layer.layer] as number, layer.run_start, layer.payload_bytes, `trunk layer ${layer.layer}`);
        try {
          layer.hash = layerHash(u8View(run.ptr, 0, layer.payload_bytes), layer.source);
          const stored = encodeLayer(run.ptr, layer.payload_bytes, blockBytes, layer.layer, coded.ptr, coded.bytes);
          layer.stored_bytes = stored;
          layer.nbytes = alignUp(stored);
          layer.file_off = fileOff;
          layer.table_hash = tableHash(coded.u8(0, blockCount(layer.payload_bytes, blockBytes) * trunkEntryBytes));
          coded.u8(stored, layer.nbytes - stored).fill(0);
          writeFully(fd, coded.u8(0, layer.nbytes), fileOff);
          fileOff += layer.nbytes;
        } finally {
          run.buffer.free();
        }
        bytesDone += layer.payload_bytes;
        options.onProgress({ layersDone: layer.layer + 1, layerCount, bytesDone, seconds: (performance.now() - started) / 1000, storedBytes: fileOff });
        if (layer.layer + 1 === options.killAfterLayers?.layers) process.kill(process.pid, options.killAfterLayers.signal); // fault injection
      }
    } finally {
      coded.free();
    }
  };
  const bin = codec
    ? stageWrite({ path: binPath, what: "the packed trunk" }, fillCompressed, (temporary) => verifyCompressedPack(temporary, planned, codec))
    : stageWrite({ path: binPath, what: "the packed trunk" }, fill, (temporary) => verifyPack(temporary, planned));
  const manifest: TrunkManifest = {
    format: "k3-trunk", version: trunkFormatVersion, n_layers: layerCount, align: allocAlignment(), layers: planned, ...(codec && { codec }),
  };
  let json: StagedWrite | undefined;
  try {
    json = stageBytes({ path: jsonPath, what: "the trunk manifest" }, `${JSON.stringify(manifest, null, 1)}\n`);
    // The old manifest goes first, so no moment pairs it with the new trunk.bin; the new one last.
    rmSync(jsonPath, { force: true });
  } catch (error) {
    bin.discard();
    json?.discard();
    throw error instanceof K3Error ? error : new K3Error(ExitCode.runtime, `${jsonPath}: cannot replace the old trunk manifest: ${errnoReason(error)}`);
  }
  commitAll([bin, json]);
  return { manifest, payloadBytes, largestLayerBytes, seconds: (performance.now() - started) / 1000, alreadyPacked: false };
}

/** Reads every layer back from the written file, in hash-sized chunks, and compares its hash. */
export function verifyPack(path: string, layers: PackedLayer[]): void {
  const file = new DirectFile(path);
  try {
    for (const layer of layers) {
      let hash = hashSeed(layer.source);
      for (let at = 0; at < layer.payload_bytes; at += hashChunkBytes) {
        hash = Bun.hash.wyhash(file.read(layer.file_off + at, Math.min(hashChunkBytes, layer.payload_bytes - at)), hash);
      }
      if (hash.toString(16).padStart(16, "0") !== layer.hash) {
        throw new K3Error(ExitCode.runtime, `${path}: layer ${layer.layer} read back differently from what was written; the pack is not usable`);
      }
    }
  } finally {
    file.close();
  }
}

/**
 * Reads every compressed layer back, decodes it with every checksum checked and compares the
 * decoded layer's hash with the checkpoint's: the bytes written decode to the bytes packed.
 */
export function verifyCompressedPack(path: string, layers: PackedLayer[], codec: TrunkCodec): void {
  const largest = Math.max(...layers.map((l) => l.payload_bytes));
  const decoded = NativeBuffer.allocate(largest, "verifying a compressed layer", "read-target");
  const file = new DirectFile(path);
  try {
    for (const layer of layers) {
      const storedBytes = layer.stored_bytes as number;
      const stored = file.read(layer.file_off, storedBytes);
      const blocks = blockCount(layer.payload_bytes, codec.block_bytes);
      const tableBytes = blocks * trunkEntryBytes;
      const damaged = decodeBlocks({
        layer: layer.layer, table: stored.slice(0, tableBytes), first: 0, count: blocks, src: stored.subarray(tableBytes), srcBytes: storedBytes - tableBytes,
        srcBase: tableBytes, dst: decoded.ptr, dstBytes: layer.payload_bytes, blockBytes: codec.block_bytes, verify: true,
      });
      if (damaged !== undefined || layerHash(decoded.u8(0, layer.payload_bytes), layer.source) !== layer.hash) {
        throw new K3Error(ExitCode.runtime, `${path}: layer ${layer.layer} read back differently from what was written${damaged !== undefined ? ` (block ${damaged})` : ""}; the pack is not usable`);
      }
    }
  } finally {
    file.close();
    decoded.free();
  }
}
