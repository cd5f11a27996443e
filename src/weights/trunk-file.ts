/**
 * The packed trunk (runtime.md section 4): trunk.bin holds each layer's trunk run at a
 * O_DIRECT-aligned offset, so a layer is one read; trunk.json describes it.
 *
 * A pack is bound to the checkpoint it was made from and each entry to its layer. Each layer
 * records its `source`: a hash of the layer number, its tensors' names, shapes and offsets and
 * the first and last `sampleBytes` of every tensor as the checkpoint holds them. Opening a pack
 * recomputes it from the checkpoint (a few small reads per tensor), so the pack of another
 * checkpoint with the same shapes is refused before anything runs. The layer's content `hash`
 * over all its bytes is seeded with its source and checked the first time the layer is read, so
 * two entries' offsets and hashes swapped, or a byte changed, are refused too.
 */
import { existsSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { configCeilings } from "../checkpoint/config.ts";
import { dtypeBytes, type CheckpointIndex, type Dtype } from "../checkpoint/safetensors.ts";
import { displayName, excerpt, K3Error, ExitCode } from "../errors.ts";
import { readCapped } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { jsonRefusal, JsonSyntaxError, parseJsonData } from "../json.ts";
import { allocAlignment } from "../native/memory.ts";
import { blockCount, trunkEntryBytes, trunkHeaderBytes, trunkMaxBlockBytes, trunkMinBlockBytes } from "../native/trunk-code.ts";
import type { TensorReader } from "./tensor-reader.ts";
import type { LayerLayout, LayoutDtype } from "./trunk-layout.ts";

/** Version 2 binds each layer to its checkpoint (`source`); version 1 packs are refused. */
export const trunkFormatVersion = 2;
export const trunkBinName = "trunk.bin";
export const trunkJsonName = "trunk.json";
/** Hash chunking is part of the format: the hash chains over chunks of this size. */
export const hashChunkBytes = 64 * 1024 * 1024;
/** Bytes of each end of every tensor that a layer's `source` hashes (part of the format). */
export const sampleBytes = 4096;

export interface PackedLayer {
  layer: number;
  shard: string;
  run_start: number;
  /** Run length rounded up to the alignment (what is read). */
  nbytes: number;
  /** Payload bytes, before padding. */
  payload_bytes: number;
  file_off: number;
  /** The layer's binding to the checkpoint's contents (see above), 16 hex digits. */
  source: string;
  /** All payload bytes, hashed in `hashChunkBytes` chunks seeded with `source`, 16 hex digits. */
  hash: string;
  tensors: Record<string, { off: number; nbytes: number; dtype: LayoutDtype; shape: number[] }>;
  /**
   * A compressed trunk's layers only: the layer's stored (coded) bytes before padding, which
   * `nbytes` rounds up, and the hash of its block table (read when the trunk is opened).
   */
  stored_bytes?: number;
  table_hash?: string;
}

/** The code of a compressed trunk (`k3 pack-trunk --compress`; zig/codec/bf16_planes.zig). */
export interface TrunkCodec {
  name: typeof trunkCodecName;
  /** Decoded bytes of every block but a layer's last. */
  block_bytes: number;
}

export const trunkCodecName = "bf16-planes";
/** The block size `k3 pack-trunk --compress` writes: a block decodes inside a core's L2 cache. */
export const defaultCodecBlockBytes = 256 * 1024;

/**
 * What a quantised (draft) trunk was made from: `k3 quantize-trunk` records it. Its layers keep
 * the source layers' `source` (their binding to the checkpoint); their hashes are of the new bytes.
 */
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
  /** Present in a compressed trunk only: its layers are stored in this code and decode to the plain bytes. */
  codec?: TrunkCodec;
}

/** Bytes of one I8R row: the f32 scale, then one int8 per column (zig/kernels/matvec_i8r.zig). */
const i8rRowBytes = (cols: number) => 4 + cols;

const hex64 = (hash: bigint) => hash.toString(16).padStart(16, "0");

/** Chained wyhash over fixed chunks, seeded with the layer's source, so no copy of a layer is needed. */
export function layerHash(bytes: Uint8Array, source: string): string {
  let hash = BigInt(`0x${source}`);
  let at = 0;
  do {
    hash = Bun.hash.wyhash(bytes.subarray(at, at + hashChunkBytes), hash);
    at += hashChunkBytes;
  } while (at < bytes.length);
  return hex64(hash);
}

/** A compressed layer's `table_hash`: its block table's bytes, hashed as one. */
export const tableHash = (table: Uint8Array): string => hex64(Bun.hash.wyhash(table, 0n));

/** Refuses a layer's bytes as read from trunk.bin (`binPath`) unless they hash to what trunk.json records. */
export function checkLayerBytes(binPath: string, packed: PackedLayer, payload: Uint8Array): void {
  if (layerHash(payload, packed.source) !== packed.hash) {
    throw new K3Error(ExitCode.runtime, `${binPath}: layer ${packed.layer} does not match its recorded hash (corrupted?); re-run 'k3 pack-trunk'`);
  }
}

/** The seed `layerHash` chains from, for a writer that hashes chunk by chunk. */
export const hashSeed = (source: string): bigint => BigInt(`0x${source}`);

/**
 * The layer's binding to the checkpoint (see the file comment), read through `reader` from the
 * checkpoint's own bytes: the same layout with other contents gives another value.
 */
export function layerSource(reader: TensorReader, layout: LayerLayout): string {
  const described = layout.tensors.map((t) => `${t.name} ${t.dtype} [${t.shape.join(",")}] ${t.off} ${t.nbytes}`);
  let hash = Bun.hash.wyhash(`k3-trunk layer ${layout.layer}\n${described.join("\n")}`, 0n);
  for (const t of layout.tensors) {
    const entry = reader.index.get(t.name);
    if (!entry) throw new K3Error(ExitCode.runtime, `${reader.index.dir}: missing ${t.name}`);
    const head = Math.min(entry.nbytes, sampleBytes);
    hash = Bun.hash.wyhash(reader.readRaw({ ...entry, nbytes: head }), hash);
    const tail = Math.min(entry.nbytes - head, sampleBytes);
    if (tail > 0) hash = Bun.hash.wyhash(reader.readRange(entry.shard, entry.offset + entry.nbytes - tail, tail), hash);
  }
  return hex64(hash);
}

/** Where a layer's run lies in the checkpoint, as trunk.json records it (pack-trunk writes it, opening checks it). */
export function recordedRun(index: CheckpointIndex, run: { shard: number; start: number }): { shard: string; run_start: number } {
  return { shard: basename(index.shards[run.shard]?.path ?? ""), run_start: run.start };
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

/** A value found in trunk.json, as a message names it. */
function found(value: unknown): string {
  if (typeof value === "string") return `the string ${excerpt(value)}`;
  if (typeof value === "number") return `${value}`;
  return value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
}

const isCount = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;
const isHex64 = (value: unknown): value is string => typeof value === "string" && /^[0-9a-f]{16}$/.test(value);

/** Field access on one object of trunk.json, each refusal naming the field by its path. */
class ManifestFields {
  constructor(
    private readonly path: string,
    private readonly values: Record<string, unknown>,
    private readonly where: string,
  ) {}

  #at(key: string): string {
    return this.where === "" ? displayName(key) : `${this.where}.${displayName(key)}`;
  }

  #fail(key: string, expected: string): never {
    return refuse(this.path, `${this.#at(key)} must be ${expected}, found ${found(this.values[key])}`);
  }

  count(key: string, max = Number.MAX_SAFE_INTEGER): number {
    const value = this.values[key];
    return isCount(value) && value <= max ? value : this.#fail(key, `a whole number from 0 to ${max}`);
  }

  hex(key: string): string {
    const value = this.values[key];
    return isHex64(value) ? value : this.#fail(key, "16 lower-case hex digits");
  }

  text(key: string): string {
    const value = this.values[key];
    return typeof value === "string" ? value : this.#fail(key, "a string");
  }

  counts(key: string): number[] {
    const value = this.values[key];
    return Array.isArray(value) && value.length <= 8 && value.every(isCount) ? value : this.#fail(key, "an array of at most 8 whole numbers");
  }

  dtype(key: string): LayoutDtype {
    const value = this.values[key];
    if (value === "I8R") return value;
    return typeof value === "string" && Object.hasOwn(dtypeBytes, value) ? (value as Dtype) : this.#fail(key, `one of ${[...Object.keys(dtypeBytes), "I8R"].join(", ")}`);
  }

  hexes(key: string, count: number): string[] {
    const value = this.values[key];
    return Array.isArray(value) && value.length === count && value.every(isHex64) ? value : this.#fail(key, `an array of ${count} hashes of 16 lower-case hex digits`);
  }

  object(key: string): ManifestFields {
    const value = this.values[key];
    if (typeof value !== "object" || value === null || Array.isArray(value)) return this.#fail(key, "an object");
    return new ManifestFields(this.path, value as Record<string, unknown>, this.#at(key));
  }

  keys(): string[] {
    return Object.keys(this.values);
  }

  /** Refuses any field but `known`: a value k3 would not check must not be accepted silently. */
  only(known: readonly string[]): void {
    const extra = Object.keys(this.values).find((key) => !known.includes(key));
    if (extra !== undefined) refuse(this.path, `${this.#at(extra)} is not a field of a packed trunk (k3 checks every field it accepts; re-run 'k3 pack-trunk')`);
  }

  array(key: string): Record<string, unknown>[] {
    const value = this.values[key];
    if (!Array.isArray(value)) return this.#fail(key, "an array");
    return value as Record<string, unknown>[];
  }
}

/** The fields of a `layers` entry every pack has (a compressed one adds `stored_bytes` and `table_hash`). */
const layerFields = ["layer", "shard", "run_start", "nbytes", "payload_bytes", "file_off", "source", "hash", "tensors"] as const;

/** One entry of `layers`, checked field by field against the layout rules pack-trunk writes by. */
function readLayer(path: string, raw: unknown, i: number, fileOff: number, alignment: number, codec: TrunkCodec | undefined): PackedLayer {
  const where = `layers[${i}]`;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) refuse(path, `${where} must be an object, found ${found(raw)}`);
  const f = new ManifestFields(path, raw as Record<string, unknown>, where);
  f.only([...layerFields, "stored_bytes", "table_hash"]);
  const layer = f.count("layer");
  if (layer !== i) refuse(path, `${where}.layer is ${layer}, expected ${i} (entries are in layer order)`);
  const payloadBytes = f.count("payload_bytes");
  const nbytes = f.count("nbytes");
  let stored: { stored_bytes: number; table_hash: string } | undefined;
  if (codec) {
    const storedBytes = f.count("stored_bytes");
    const blocks = blockCount(payloadBytes, codec.block_bytes);
    const least = blocks * (trunkEntryBytes + trunkHeaderBytes);
    const most = payloadBytes + least;
    if (payloadBytes === 0 || storedBytes < least || storedBytes > most) {
      refuse(path, `${where}.stored_bytes is ${storedBytes}, outside [${least}, ${most}] for ${blocks} blocks of the ${payloadBytes}-byte layer`);
    }
    stored = { stored_bytes: storedBytes, table_hash: f.hex("table_hash") };
  } else {
    for (const key of ["stored_bytes", "table_hash"]) if (key in (raw as object)) refuse(path, `${where}.${key} belongs to a compressed trunk, and this one has no codec`);
  }
  const readBytes = stored ? stored.stored_bytes : payloadBytes;
  const expected = Math.ceil(readBytes / alignment) * alignment;
  if (nbytes !== expected) refuse(path, `${where}.nbytes is ${nbytes}, expected ${expected} (${stored ? "stored_bytes" : "payload_bytes"} ${readBytes} rounded up to ${alignment})`);
  const offset = f.count("file_off");
  if (offset !== fileOff) refuse(path, `${where}.file_off is ${offset}, expected ${fileOff} (layers follow each other in trunk.bin)`);
  const tensorFields = f.object("tensors");
  const tensors: PackedLayer["tensors"] = {};
  for (const name of tensorFields.keys()) {
    const t = tensorFields.object(name);
    t.only(["off", "nbytes", "dtype", "shape"]);
    const off = t.count("off");
    const tensorBytes = t.count("nbytes");
    const dtype = t.dtype("dtype");
    const shape = t.counts("shape");
    const tensorWhere = `${where}.tensors.${displayName(name)}`;
    if (off + tensorBytes > payloadBytes) refuse(path, `${tensorWhere} [${off}, ${off + tensorBytes}) lies outside the layer's ${payloadBytes} payload bytes`);
    if (dtype === "I8R") {
      // Rows of [f32 scale][int8 x cols], read unaligned: only the size is fixed by the shape.
      const [rows, cols] = shape as [number, number];
      if (shape.length !== 2 || rows * i8rRowBytes(cols) !== tensorBytes) refuse(path, `${tensorWhere}: I8R shape [${shape.join(", ")}] is not ${tensorBytes} bytes of [f32 scale][int8 x cols] rows`);
    } else {
      if (off % dtypeBytes[dtype] !== 0) refuse(path, `${tensorWhere}.off ${off} is not a multiple of its ${dtypeBytes[dtype]}-byte ${dtype} elements`);
      if (shape.reduce((a, b) => a * b, 1) * dtypeBytes[dtype] !== tensorBytes) {
        refuse(path, `${tensorWhere}: shape [${shape.join(", ")}] x ${dtype} is not ${tensorBytes} bytes`);
      }
    }
    tensors[name] = { off, nbytes: tensorBytes, dtype, shape };
  }
  return {
    layer, shard: f.text("shard"), run_start: f.count("run_start"), nbytes, payload_bytes: payloadBytes, file_off: offset,
    source: f.hex("source"), hash: f.hex("hash"), tensors, ...stored,
  };
}

/**
 * Reads trunk.json and checks every field against the rules pack-trunk writes by, and trunk.bin's
 * size against it, before any number in it sizes a buffer or a read: types, alignment, each
 * layer where the previous one ends, each tensor inside its layer and aligned to its elements.
 */
export function readTrunkManifest(dir: string): TrunkManifest {
  const jsonPath = join(dir, trunkJsonName);
  const binPath = join(dir, trunkBinName);
  if (!existsSync(jsonPath)) refuse(dir, `${trunkJsonName} is missing (pack it with 'k3 pack-trunk')`);
  if (!existsSync(binPath)) refuse(dir, `${trunkBinName} is missing`);
  const bytes = readCapped(jsonPath, inputLimits.trunkManifestBytes, "the trunk manifest");
  let root: unknown;
  try {
    root = parseJsonData(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (error) {
    if (error instanceof JsonSyntaxError) return refuse(jsonPath, jsonRefusal(error));
    if (error instanceof TypeError) return refuse(jsonPath, "not valid UTF-8");
    throw error;
  }
  if (typeof root !== "object" || root === null || Array.isArray(root)) return refuse(jsonPath, `the top level must be an object, found ${found(root)}`);
  const top = root as Record<string, unknown>;
  if (top.format !== "k3-trunk" || top.version !== trunkFormatVersion) {
    const shown = (value: unknown) => (typeof value === "string" ? excerpt(value) : found(value));
    refuse(jsonPath, `found format ${shown(top.format)} version ${shown(top.version)}, expected format "k3-trunk" version ${trunkFormatVersion} (re-run 'k3 pack-trunk')`);
  }
  const f = new ManifestFields(jsonPath, top, "");
  f.only(["format", "version", "n_layers", "align", "layers", "derived", "codec"]);
  const alignment = allocAlignment();
  const align = f.count("align");
  if (align !== alignment) refuse(jsonPath, `align is ${align}, expected ${alignment}`);
  const layerCount = f.count("n_layers", configCeilings.layers);
  const entries = f.array("layers");
  if (entries.length !== layerCount) refuse(jsonPath, `layers has ${entries.length} entries, n_layers says ${layerCount}`);
  let codec: TrunkCodec | undefined;
  if (top.codec !== undefined) {
    const c = f.object("codec");
    const name = c.text("name");
    if (name !== trunkCodecName) refuse(jsonPath, `codec.name must be "${trunkCodecName}", found ${found(name)}`);
    const blockBytes = c.count("block_bytes", trunkMaxBlockBytes);
    if (blockBytes < trunkMinBlockBytes || blockBytes % trunkMinBlockBytes !== 0) {
      refuse(jsonPath, `codec.block_bytes must be a multiple of ${trunkMinBlockBytes} from ${trunkMinBlockBytes} to ${trunkMaxBlockBytes}, found ${blockBytes}`);
    }
    const extra = c.keys().find((key) => key !== "name" && key !== "block_bytes");
    if (extra !== undefined) refuse(jsonPath, `codec.${displayName(extra)} is not a field of the codec`);
    codec = { name: trunkCodecName, block_bytes: blockBytes };
  }
  const layers: PackedLayer[] = [];
  let fileOff = 0;
  for (let i = 0; i < entries.length; i++) {
    const layer = readLayer(jsonPath, entries[i], i, fileOff, alignment, codec);
    fileOff += layer.nbytes;
    layers.push(layer);
  }
  const fileBytes = statSync(binPath).size;
  const last = layers.at(-1);
  if (last && fileBytes < fileOff) refuse(binPath, `layer ${last.layer} ends at byte ${fileOff} but the file has ${fileBytes} (truncated?)`);
  if (fileBytes !== fileOff) refuse(binPath, `the file has ${fileBytes} bytes, ${trunkJsonName} describes ${fileOff}`);
  let derived: TrunkDerivation | undefined;
  if (top.derived !== undefined) {
    const d = f.object("derived");
    d.only(["kind", "source_hashes"]);
    if (d.text("kind") !== "I8R") refuse(jsonPath, `derived.kind must be "I8R", found ${found((top.derived as Record<string, unknown>).kind)}`);
    derived = { kind: "I8R", source_hashes: d.hexes("source_hashes", layerCount) };
  } else if (layers.some((l) => Object.values(l.tensors).some((t) => t.dtype === "I8R"))) {
    refuse(jsonPath, "I8R tensors in a trunk that does not say it is derived (only 'k3 quantize-trunk' writes them)");
  }
  if (derived && codec) refuse(jsonPath, "a quantised draft trunk is not compressed (derived and codec together)");
  return { format: "k3-trunk", version: trunkFormatVersion, n_layers: layerCount, align, layers, ...(derived && { derived }), ...(codec && { codec }) };
}
