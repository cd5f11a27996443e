/**
 * `k3 pack-trunk`: copies each layer's trunk run verbatim into trunk.bin at an O_DIRECT-aligned
 * offset, verifies what it wrote by reading it back, and only then renames the files into
 * place, trunk.json last: an interrupted pack never leaves a complete-looking pack behind.
 */
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { basename, join } from "node:path";
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { K3Error, ExitCode } from "../errors.ts";
import { DirectFile } from "../native/file.ts";
import { commitAll, errnoReason, stageBytes, stageWrite, writeFully, type StagedWrite } from "../fs.ts";
import { allocAlignment } from "../native/memory.ts";
import { stopIfSignalled } from "../native/signals.ts";
import type { TensorReader } from "./tensor-reader.ts";
import {
  alignUp, hashChunkBytes, hashSeed, layerSource, readTrunkManifest, trunkBinName, trunkFormatVersion, trunkJsonName,
  type PackedLayer, type TrunkManifest,
} from "./trunk-file.ts";
import { layerLayout, packRefusal } from "./trunk-layout.ts";

export interface PackProgress {
  layersDone: number;
  layerCount: number;
  bytesDone: number;
  seconds: number;
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
      layer, shard: basename(index.shards[layout.run.shard]!.path), run_start: layout.run.start, nbytes,
      payload_bytes: layout.bytes, file_off: fileOff, source: layerSource(reader, layout), hash: "",
      tensors: Object.fromEntries(layout.tensors.map((t) => [t.name, { off: t.off, nbytes: t.nbytes, dtype: t.dtype, shape: t.shape }])),
    });
    shards.push(layout.run.shard);
    fileOff += nbytes;
  }
  return { layers, shards };
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
  },
): PackResult {
  const started = performance.now();
  const { layers: planned, shards } = plannedLayers(index, reader, config, layerCount);
  const jsonPath = join(outDir, trunkJsonName);
  const binPath = join(outDir, trunkBinName);
  const largestLayerBytes = Math.max(...planned.map((l) => l.payload_bytes));
  const payloadBytes = planned.reduce((sum, l) => sum + l.payload_bytes, 0);
  if (existsSync(jsonPath) || existsSync(binPath)) {
    let existing: TrunkManifest | undefined;
    try {
      existing = readTrunkManifest(outDir);
    } catch {
      existing = undefined;
    }
    if (existing && sameLayout(existing.layers, planned)) {
      return { manifest: existing, payloadBytes, largestLayerBytes, seconds: 0, alreadyPacked: true };
    }
    if (!options.force) {
      throw new K3Error(ExitCode.runtime, `${outDir} already holds a different or incomplete packed trunk; pass --force to replace it`);
    }
  }
  try {
    mkdirSync(outDir, { recursive: true });
    removeStaleTemporaries(outDir);
  } catch (error) {
    throw new K3Error(ExitCode.runtime, `${outDir}: cannot create the trunk directory: ${errnoReason(error)}`);
  }
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
  const bin = stageWrite({ path: binPath, what: "the packed trunk" }, fill, (temporary) => verifyPack(temporary, planned));
  const manifest: TrunkManifest = { format: "k3-trunk", version: trunkFormatVersion, n_layers: layerCount, align: allocAlignment(), layers: planned };
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
function verifyPack(path: string, layers: PackedLayer[]): void {
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

/** Temporary files an interrupted pack left behind; they never look like a pack. */
function removeStaleTemporaries(dir: string): void {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    if (/^trunk\.(bin|json)\.\d+\.tmp$/.test(name)) rmSync(join(dir, name), { force: true });
  }
}
