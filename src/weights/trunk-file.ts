/**
 * The packed trunk (runtime.md section 4): trunk.bin holds each layer's trunk run at a
 * O_DIRECT-aligned offset, so a layer is one read; trunk.json describes it. Each layer also
 * records a content hash, checked the first time the layer is read in a run.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { K3Error, ExitCode } from "../errors.ts";
import { allocAlignment } from "../native/memory.ts";
import type { LayerLayout, LayoutDtype } from "./trunk-layout.ts";

export const trunkFormatVersion = 1;
export const trunkBinName = "trunk.bin";
export const trunkJsonName = "trunk.json";
/** Hash chunking is part of the format: the hash chains over chunks of this size. */
export const hashChunkBytes = 64 * 1024 * 1024;

export interface PackedLayer {
  layer: number;
  shard: string;
  run_start: number;
  /** Run length rounded up to the alignment (what is read). */
  nbytes: number;
  /** Payload bytes, before padding. */
  payload_bytes: number;
  file_off: number;
  hash: string;
  tensors: Record<string, { off: number; nbytes: number; dtype: LayoutDtype; shape: number[] }>;
}

/** What a quantised (draft) trunk was made from: `k3 quantize-trunk` records it. */
export interface TrunkDerivation {
  /** The container its matrices were converted to. */
  kind: "I8R";
  /** The source trunk's layer hashes, in layer order (a re-run from the same source is a no-op). */
  source_hashes: string[];
}

export interface TrunkManifest {
  format: "k3-trunk";
  version: number;
  n_layers: number;
  align: number;
  layers: PackedLayer[];
  /** Present in a quantised trunk only: such a trunk drafts (--draft-trunk), it never computes exact tokens. */
  derived?: TrunkDerivation;
}

/** Chained wyhash over fixed chunks, so hashing needs no copy of a whole layer. */
export function layerHash(bytes: Uint8Array): string {
  let hash = 0n;
  let at = 0;
  do {
    hash = Bun.hash.wyhash(bytes.subarray(at, at + hashChunkBytes), hash);
    at += hashChunkBytes;
  } while (at < bytes.length);
  return hash.toString(16).padStart(16, "0");
}

export function alignUp(n: number): number {
  const alignment = allocAlignment();
  return Math.ceil(n / alignment) * alignment;
}

export function layoutOfPacked(packed: PackedLayer): LayerLayout {
  const tensors = Object.entries(packed.tensors).map(([name, t]) => ({ name, off: t.off, nbytes: t.nbytes, dtype: t.dtype, shape: t.shape }));
  return { layer: packed.layer, bytes: packed.payload_bytes, tensors, run: undefined };
}

function refuse(path: string, detail: string): never {
  throw new K3Error(ExitCode.runtime, `${path}: not a usable packed trunk: ${detail}`);
}

/** Reads and checks trunk.json against trunk.bin's size; every offset must be aligned and inside the file. */
export function readTrunkManifest(dir: string): TrunkManifest {
  const jsonPath = join(dir, trunkJsonName);
  const binPath = join(dir, trunkBinName);
  if (!existsSync(jsonPath)) refuse(dir, `${trunkJsonName} is missing (pack it with 'k3 pack-trunk')`);
  if (!existsSync(binPath)) refuse(dir, `${trunkBinName} is missing`);
  let manifest: TrunkManifest;
  try {
    manifest = JSON.parse(readFileSync(jsonPath, "utf8")) as TrunkManifest;
  } catch (error) {
    return refuse(jsonPath, `not valid JSON (${(error as Error).message})`);
  }
  if (manifest.format !== "k3-trunk" || manifest.version !== trunkFormatVersion) refuse(jsonPath, `format ${manifest.format} version ${manifest.version} is not k3-trunk version ${trunkFormatVersion}`);
  const alignment = allocAlignment();
  if (manifest.align !== alignment) refuse(jsonPath, `align is ${manifest.align}, expected ${alignment}`);
  if (!Array.isArray(manifest.layers) || manifest.layers.length !== manifest.n_layers) refuse(jsonPath, "layers must be an array of n_layers entries");
  const fileBytes = statSync(binPath).size;
  manifest.layers.forEach((layer, i) => {
    if (layer.layer !== i) refuse(jsonPath, `entry ${i} is layer ${layer.layer}`);
    if (typeof layer.tensors !== "object" || layer.tensors === null) refuse(jsonPath, `layer ${i} has no tensors object`);
    if (layer.file_off % alignment !== 0 || layer.nbytes % alignment !== 0) refuse(jsonPath, `layer ${i} is not ${alignment}-aligned`);
    if (layer.file_off + layer.nbytes > fileBytes) {
      refuse(binPath, `layer ${i} ends at byte ${layer.file_off + layer.nbytes} but the file has ${fileBytes} (truncated?)`);
    }
    for (const [name, t] of Object.entries(layer.tensors)) {
      if (t.off < 0 || t.off + t.nbytes > layer.payload_bytes) refuse(jsonPath, `tensor ${name} lies outside layer ${i}`);
    }
  });
  return manifest;
}
