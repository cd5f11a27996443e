/**
 * State files (runtime.md 8): one sequence's carried state and its ids, so a later run or
 * request continues exactly where this one stopped. Version 2 keeps the MLA rows in the latent
 * form k3 carries (kv_lora_rank + qk_rope floats per position), so a version 1 file (expanded
 * keys and values) is refused by its version, never misread.
 *
 * Header, 104 bytes, little-endian: "K3ST", int32 version, int32[12] architecture fingerprint,
 * int32 bound layers, int32 MLA layers, int32 positions cached, int32 ids stored, int64 KDA
 * floats per layer, int64 latent floats per position, int64 rope floats per position, and (new
 * in version 2, at 96) a uint64 checksum of the payload, so a flipped byte is refused instead
 * of continuing fluently wrong. Then the ids (int32), each KDA layer's floats, every MLA
 * layer's latent rows, every MLA layer's rope rows. Floats are written from and read into
 * native memory directly, never through the heap.
 */
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import type { ModelConfig } from "../checkpoint/config.ts";
import { K3Error, runtimeError } from "../errors.ts";
import { errnoCode, writeFileAtomically, writeFully } from "../fs.ts";
import type { SequenceState, StateSnapshot } from "./state.ts";

const magic = "K3ST";
export const stateFileVersion = 2;
const headerBytes = 104;

/** What two runs must agree on for a state to mean the same thing (runtime.md 8.2). */
const fingerprintFields = [
  ["hidden_size", (c) => c.hiddenSize], ["num_hidden_layers", (c) => c.numLayers], ["vocab_size", (c) => c.vocabSize],
  ["kda num_heads", (c) => c.kdaNumHeads], ["kda head_dim", (c) => c.kdaHeadDim], ["short_conv_kernel_size", (c) => c.shortConvKernel],
  ["num_attention_heads", (c) => c.numAttentionHeads], ["qk_nope_head_dim", (c) => c.qkNopeHeadDim],
  ["qk_rope_head_dim", (c) => c.qkRopeHeadDim], ["v_head_dim", (c) => c.vHeadDim], ["num_experts", (c) => c.numExperts],
  ["num_experts_per_tok", (c) => c.numExpertsPerToken],
] as const satisfies readonly (readonly [string, (c: ModelConfig) => number])[];

/** The shape of a state: the header's fields after the fingerprint. */
interface StateShape {
  boundLayers: number;
  mlaLayers: number;
  kdaFloatsPerLayer: number;
  latentFloatsPerPosition: number;
  ropeFloatsPerPosition: number;
}

function shapeOf(state: SequenceState): StateShape {
  const c = state.config;
  const P = c.kdaNumHeads * c.kdaHeadDim;
  return {
    boundLayers: state.kda.size + state.mla.size, mlaLayers: state.mla.size,
    kdaFloatsPerLayer: c.kdaNumHeads * c.kdaHeadDim * c.kdaHeadDim + 3 * P * (c.shortConvKernel - 1),
    latentFloatsPerPosition: c.kvLoraRank, ropeFloatsPerPosition: c.qkRopeHeadDim,
  };
}

/** Bytes of a state file holding `position` positions and `idCount` ids. */
export function stateFileBytes(state: SequenceState, position: number, idCount: number): number {
  const s = shapeOf(state);
  const floats = s.kdaFloatsPerLayer * (s.boundLayers - s.mlaLayers) + position * s.mlaLayers * (s.latentFloatsPerPosition + s.ropeFloatsPerPosition);
  return headerBytes + 4 * idCount + 4 * floats;
}

const asBytes = (a: Float32Array | Int32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** The payload's checksum: a 64-bit hash of each part's hash, so no part is ever copied to hash it. */
function checksum(parts: readonly (Float32Array | Int32Array)[]): bigint {
  const hashes = BigUint64Array.from(parts, (part) => BigInt(Bun.hash(asBytes(part))));
  return BigInt(Bun.hash(new Uint8Array(hashes.buffer)));
}

/**
 * Writes `state` (or, with `snapshot`, the state as that snapshot holds it) and its `ids` to
 * `path` through a temporary file. The ids are the positions absorbed, plus at most one pending
 * id that was emitted but not fed (runtime.md 8.3). Returns the bytes written.
 */
export function writeStateFile(path: string, state: SequenceState, ids: readonly number[], snapshot?: StateSnapshot): number {
  const position = snapshot?.position ?? state.position;
  if (ids.length !== position && ids.length !== position + 1) {
    throw new Error(`writeStateFile: ${ids.length} ids for a state at position ${position}`);
  }
  const shape = shapeOf(state);
  const header = new DataView(new ArrayBuffer(headerBytes));
  for (let i = 0; i < 4; i++) header.setUint8(i, magic.charCodeAt(i));
  header.setInt32(4, stateFileVersion, true);
  fingerprintFields.forEach(([, field], i) => header.setInt32(8 + 4 * i, field(state.config), true));
  [shape.boundLayers, shape.mlaLayers, position, ids.length].forEach((v, i) => header.setInt32(56 + 4 * i, v, true));
  [shape.kdaFloatsPerLayer, shape.latentFloatsPerPosition, shape.ropeFloatsPerPosition].forEach((v, i) => header.setBigInt64(72 + 8 * i, BigInt(v), true));
  const idArray = Int32Array.from(ids);
  const parts = state.parts(position, snapshot);
  header.setBigUint64(96, checksum([idArray, ...parts]), true);
  writeFileAtomically(path, "the state file", (fd) => {
    writeFully(fd, new Uint8Array(header.buffer));
    writeFully(fd, asBytes(idArray));
    for (const part of parts) writeFully(fd, asBytes(part));
  });
  return stateFileBytes(state, position, ids.length);
}

function readFully(fd: number, into: Uint8Array, at: number, path: string): void {
  let done = 0;
  while (done < into.byteLength) {
    const n = readSync(fd, into, done, into.byteLength - done, at + done);
    if (n === 0) throw runtimeError(`${path} is truncated`);
    done += n;
  }
}

/** Opens a state file and checks what every reader needs first: the magic, the version, the id count. */
function openHeader(path: string): { fd: number; view: DataView; size: number; position: number; idCount: number } {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw runtimeError(`${path}: cannot open the state file (${errnoCode(error)})`);
  }
  try {
    const size = fstatSync(fd).size;
    const head = new Uint8Array(headerBytes);
    const got = size < headerBytes ? 0 : readSync(fd, head, 0, headerBytes, 0);
    if (got < headerBytes || String.fromCharCode(...head.subarray(0, 4)) !== magic) throw runtimeError(`${path} is not a k3 state file`);
    const view = new DataView(head.buffer);
    const version = view.getInt32(4, true);
    if (version !== stateFileVersion) {
      throw runtimeError(`${path}: state file version ${version}; this build reads and writes version ${stateFileVersion}`);
    }
    const [position, idCount] = [view.getInt32(64, true), view.getInt32(68, true)];
    if (position < 0 || idCount < position || idCount > position + 1) {
      throw runtimeError(`${path}: ${idCount} ids for ${position} cached positions (expected ${position} or ${position + 1})`);
    }
    return { fd, view, size, position, idCount };
  } catch (error) {
    closeSync(fd);
    throw error instanceof K3Error ? error : runtimeError(`${path}: cannot read the state file (${errnoCode(error)})`);
  }
}

/**
 * What a state file holds, read from its header alone (before anything is sized from it):
 * the positions cached and the ids stored. The whole file is checked when it is read.
 */
export function stateFileCounts(path: string): { position: number; idCount: number } {
  const { fd, position, idCount } = openHeader(path);
  closeSync(fd);
  return { position, idCount };
}

/** The ids a state file stores, read after its header alone (the floats are checked when the file is read whole). */
export function stateFileIds(path: string): { position: number; ids: number[]; bytes: number } {
  const { fd, size, position, idCount } = openHeader(path);
  try {
    if (size < headerBytes + 4 * idCount) throw runtimeError(`${path} is truncated`);
    const ids = new Int32Array(idCount);
    readFully(fd, asBytes(ids), headerBytes, path);
    return { position, ids: Array.from(ids), bytes: size };
  } finally {
    closeSync(fd);
  }
}

/**
 * Reads a state file into `state`, refusing (exit 1) anything that is not a state of this
 * model and run (runtime.md 8.4): every check is made before a float is read. Returns the
 * positions restored and the stored ids (one more than the positions when an id is pending).
 */
export function readStateFile(path: string, state: SequenceState): { position: number; ids: number[] } {
  const { fd, view, size, position, idCount } = openHeader(path);
  try {
    fingerprintFields.forEach(([name, field], i) => {
      const found = view.getInt32(8 + 4 * i, true);
      const expected = field(state.config);
      if (found !== expected) {
        throw runtimeError(`REFUSING ${path}: written by a different model architecture (${name} ${found}, this model has ${expected}); restoring it would produce fluent, wrong output`);
      }
    });
    const [bound, mla] = [56, 60].map((at) => view.getInt32(at, true)) as [number, number];
    const shape = shapeOf(state);
    if (bound !== shape.boundLayers || mla !== shape.mlaLayers) {
      throw runtimeError(`REFUSING ${path}: it holds ${bound} bound layers (${mla} MLA); this run binds ${shape.boundLayers} (${shape.mlaLayers} MLA)`);
    }
    const perLayer = [72, 80, 88].map((at) => Number(view.getBigInt64(at, true)));
    const expectedPerLayer = [shape.kdaFloatsPerLayer, shape.latentFloatsPerPosition, shape.ropeFloatsPerPosition];
    if (perLayer.some((v, i) => v !== expectedPerLayer[i])) {
      throw runtimeError(`REFUSING ${path}: floats per layer and position ${perLayer.join("/")}, this model carries ${expectedPerLayer.join("/")}`);
    }
    if (position > state.capacity) {
      throw runtimeError(`REFUSING ${path}: it holds ${position} positions; this run's context holds ${state.capacity} (ask for more positions or a shorter prompt)`);
    }
    const expected = stateFileBytes(state, position, idCount);
    if (size < expected) throw runtimeError(`${path} is truncated (${size} bytes, the header implies ${expected})`);
    if (size > expected) throw runtimeError(`${path}: ${size} bytes, the header implies ${expected} (trailing bytes)`);
    const ids = new Int32Array(idCount);
    readFully(fd, asBytes(ids), headerBytes, path);
    const vocab = state.config.vocabSize;
    const bad = ids.findIndex((id) => id < 0 || id >= vocab);
    if (bad >= 0) throw runtimeError(`${path}: id ${ids[bad]} at index ${bad} is outside the vocabulary of ${vocab}`);
    let at = headerBytes + 4 * idCount;
    const parts = state.parts(position);
    try {
      for (const part of parts) {
        readFully(fd, asBytes(part), at, path);
        at += part.byteLength;
      }
      if (checksum([ids, ...parts]) !== view.getBigUint64(96, true)) throw runtimeError(`${path}: the checksum does not match: the file is damaged`);
    } catch (error) {
      state.reset(); // half a state is no state
      throw error;
    }
    state.position = position;
    return { position, ids: Array.from(ids) };
  } catch (error) {
    throw error instanceof K3Error ? error : runtimeError(`${path}: cannot read the state file (${errnoCode(error)})`);
  } finally {
    closeSync(fd);
  }
}
