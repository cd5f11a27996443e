/**
 * The safetensors index (model.md section 4): every shard's header parsed and validated
 * strictly, then one map from tensor name to where its bytes are. Only headers are read here;
 * payloads go through the O_DIRECT reader.
 */
import { closeSync, fstatSync, openSync, readdirSync, readSync } from "node:fs";
import { isUtf8 } from "node:buffer";
import { join } from "node:path";
import { displayName, excerpt, K3Error, ExitCode } from "../errors.ts";
import { inputLimits } from "../input-limits.ts";
import { jsonRefusal, JsonSyntaxError, parseJsonData } from "../json.ts";

export const dtypeBytes = { BF16: 2, F16: 2, F32: 4, U8: 1 } as const;
export type Dtype = keyof typeof dtypeBytes;

/** Released headers are under 1 MB; anything near this is corruption, refused before allocating. */
export const maxHeaderBytes = inputLimits.safetensorsHeaderBytes;

export interface Shard {
  path: string;
  fileBytes: number;
  /** Absolute offset of the data section: 8 + header length. */
  dataStart: number;
}

export interface TensorEntry {
  name: string;
  shard: number;
  dtype: Dtype;
  shape: number[];
  /** Absolute file offset of the first byte. */
  offset: number;
  nbytes: number;
}

function corrupt(path: string, detail: string): K3Error {
  return new K3Error(ExitCode.runtime, `${path}: not a valid safetensors shard: ${detail}`);
}

function isDtype(value: unknown): value is Dtype {
  return typeof value === "string" && Object.hasOwn(dtypeBytes, value);
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function readExactly(fd: number, length: number, position: number): Buffer {
  const buffer = Buffer.allocUnsafe(length);
  let done = 0;
  while (done < length) {
    const n = readSync(fd, buffer, done, length - done, position + done);
    if (n === 0) break;
    done += n;
  }
  return buffer.subarray(0, done);
}

/**
 * Reads one shard's header. `shard` is the shard's number in the index. The header must
 * describe the file exactly (safetensors' own rule): the tensors cover the data section with
 * no hole, no overlap and no byte after the last one, so a header length that is off by a few
 * bytes (a header padded with spaces still parses) is refused instead of shifting every tensor.
 */
export function readShardHeader(path: string, shard: number): { shard: Shard; tensors: TensorEntry[] } {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw new K3Error(ExitCode.runtime, `${path}: cannot open shard (${(error as NodeJS.ErrnoException).code})`);
  }
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw corrupt(path, "it is a directory, not a file");
    const fileBytes = stat.size;
    const prefix = readExactly(fd, 8, 0);
    if (prefix.length < 8) throw corrupt(path, `file is ${fileBytes} bytes, shorter than the 8-byte header length`);
    const headerLength = prefix.readBigUInt64LE(0);
    if (headerLength === 0n) throw corrupt(path, "header length is zero");
    if (headerLength > BigInt(maxHeaderBytes)) throw corrupt(path, `header length ${headerLength} is absurd (limit ${maxHeaderBytes})`);
    const dataStart = 8 + Number(headerLength);
    if (dataStart > fileBytes) {
      throw corrupt(path, `header length ${headerLength} runs past the end of the ${fileBytes}-byte file`);
    }
    const headerText = readExactly(fd, Number(headerLength), 8);
    if (!isUtf8(headerText)) throw corrupt(path, "header is not valid UTF-8");
    let header: unknown;
    try {
      header = parseJsonData(headerText.toString("utf8"));
    } catch (error) {
      if (!(error instanceof JsonSyntaxError)) throw error;
      throw corrupt(path, error.kind === "syntax" || error.kind === "unicode" ? `header is ${jsonRefusal(error)}` : `header ${error.message}`);
    }
    if (typeof header !== "object" || header === null || Array.isArray(header)) {
      throw corrupt(path, "header is not a JSON object");
    }
    const tensors = parseEntries(header as Record<string, unknown>, path, shard, dataStart, fileBytes);
    return { shard: { path, fileBytes, dataStart }, tensors };
  } finally {
    closeSync(fd);
  }
}

function parseEntries(
  header: Record<string, unknown>, path: string, shard: number, dataStart: number, fileBytes: number,
): TensorEntry[] {
  const tensors: TensorEntry[] = [];
  const dataBytes = fileBytes - dataStart;
  for (const key of Object.keys(header)) {
    if (key === "__metadata__") continue;
    const name = displayName(key);
    const entry = header[key] as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | null;
    if (typeof entry !== "object" || entry === null || Array.isArray(entry)) throw corrupt(path, `entry ${name} is not an object`);
    const { dtype, shape, data_offsets: offsets } = entry;
    if (dtype === undefined) throw corrupt(path, `tensor ${name} has no dtype`);
    if (!isDtype(dtype)) {
      const found = typeof dtype === "string" ? excerpt(dtype) : `of JSON type ${dtype === null ? "null" : Array.isArray(dtype) ? "array" : typeof dtype}`;
      throw corrupt(path, `tensor ${name} has unknown dtype ${found}`);
    }
    if (!Array.isArray(shape) || !shape.every(isCount)) throw corrupt(path, `tensor ${name} has an invalid shape`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !isCount(offsets[0]) || !isCount(offsets[1]) || offsets[1] < offsets[0]) {
      throw corrupt(path, `tensor ${name} has invalid data_offsets`);
    }
    const [begin, end] = offsets as [number, number];
    if (end > dataBytes) {
      throw corrupt(path, `tensor ${name}: data_offsets [${begin}, ${end}) run past the end of the file (data section is ${dataBytes} bytes)`);
    }
    let elements = 1;
    for (const dim of shape as number[]) elements *= dim;
    const nbytes = end - begin;
    if (elements * dtypeBytes[dtype] !== nbytes) {
      const dims = shape.length > 8 ? `${shape.slice(0, 8).join(", ")}, ...` : shape.join(", ");
      throw corrupt(path, `tensor ${name}: shape [${dims}] x ${dtype} is ${elements * dtypeBytes[dtype]} bytes but data_offsets span ${nbytes}`);
    }
    // Kernels read elements in place from buffers aligned like the file, so each tensor must start
    // on a multiple of its element size (a header whose length is not a multiple of 8 breaks that).
    if ((dataStart + begin) % dtypeBytes[dtype] !== 0) {
      throw corrupt(
        path,
        `tensor ${name} starts at byte ${dataStart + begin} of the file, not a multiple of its ${dtypeBytes[dtype]}-byte ${dtype} elements ` +
          `(the data section starts at byte ${dataStart}; k3 reads elements aligned)`,
      );
    }
    tensors.push({ name: key, shard, dtype, shape: shape as number[], offset: dataStart + begin, nbytes });
  }
  checkCoverage(tensors, path, dataStart, dataBytes);
  return tensors;
}

/** The tensors must tile the data section exactly: no overlap, no hole, nothing after the last. */
function checkCoverage(tensors: readonly TensorEntry[], path: string, dataStart: number, dataBytes: number): void {
  // Headers are normally written in offset order: check that in one pass, sort only if not.
  const ordered = tensors.every((t, i) => i === 0 || t.offset >= (tensors[i - 1] as TensorEntry).offset);
  const byOffset = ordered ? tensors : tensors.slice().sort((a, b) => a.offset - b.offset || a.nbytes - b.nbytes);
  let covered = dataStart;
  let previous: TensorEntry | undefined;
  for (const current of byOffset) {
    if (previous && current.offset < covered) {
      throw corrupt(path, `tensors ${displayName(previous.name)} and ${displayName(current.name)} overlap`);
    }
    if (current.offset > covered) {
      const after = previous ? `after tensor ${displayName(previous.name)}` : "at the start of the data section";
      throw corrupt(path, `${current.offset - covered} bytes ${after} belong to no tensor (the header length or data_offsets are wrong)`);
    }
    covered = current.offset + current.nbytes;
    previous = current;
  }
  if (covered !== dataStart + dataBytes) {
    const after = previous ? `the last tensor (${displayName(previous.name)})` : "the header";
    throw corrupt(path, `${dataStart + dataBytes - covered} bytes after ${after} belong to no tensor (the header length or data_offsets are wrong)`);
  }
}

/** All shards of a checkpoint directory, indexed by tensor name. */
export class CheckpointIndex {
  readonly dir: string;
  readonly shards: Shard[];
  readonly #tensors: Map<string, TensorEntry>;

  constructor(dir: string, shards: Shard[], tensors: Map<string, TensorEntry>) {
    this.dir = dir;
    this.shards = shards;
    this.#tensors = tensors;
  }

  get tensorCount(): number {
    return this.#tensors.size;
  }

  get(name: string): TensorEntry | undefined {
    return this.#tensors.get(name);
  }

  has(name: string): boolean {
    return this.#tensors.has(name);
  }

  names(): IterableIterator<string> {
    return this.#tensors.keys();
  }

  shardOf(entry: TensorEntry): Shard {
    return this.shards[entry.shard] as Shard;
  }
}

/** Shard files of a directory, in lexicographic order (stable shard numbers). */
export function listShards(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    throw new K3Error(ExitCode.runtime, `${dir}: cannot list the model directory (${(error as NodeJS.ErrnoException).code})`);
  }
  const shards = names.filter((n) => n.endsWith(".safetensors")).sort();
  if (shards.length === 0) throw new K3Error(ExitCode.runtime, `${dir}: no *.safetensors shards found`);
  return shards.map((n) => join(dir, n));
}

export function indexCheckpoint(dir: string): CheckpointIndex {
  const shards: Shard[] = [];
  const tensors = new Map<string, TensorEntry>();
  const perShard: TensorEntry[][] = [];
  for (const path of listShards(dir)) {
    const { shard, tensors: entries } = readShardHeader(path, shards.length);
    for (const entry of entries) {
      const before = tensors.size;
      tensors.set(entry.name, entry);
      // One hash per name on the common path; the rare duplicate is located afterwards.
      if (tensors.size === before) {
        const first = perShard.findIndex((list) => list.some((t) => t.name === entry.name));
        throw new K3Error(ExitCode.runtime, `tensor ${entry.name} appears in two shards: ${(shards[first] as Shard).path} and ${path}`);
      }
    }
    perShard.push(entries);
    shards.push(shard);
  }
  return new CheckpointIndex(dir, shards, tensors);
}
