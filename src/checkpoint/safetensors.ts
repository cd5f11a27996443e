/**
 * The safetensors index (model.md section 4): every shard's header parsed and validated
 * strictly, then one map from tensor name to where its bytes are. Only headers are read here;
 * payloads go through the O_DIRECT reader.
 */
import { closeSync, fstatSync, openSync, readdirSync, readSync } from "node:fs";
import { isUtf8 } from "node:buffer";
import { join } from "node:path";
import { K3Error, ExitCode } from "../errors.ts";

export const dtypeBytes = { BF16: 2, F16: 2, F32: 4, U8: 1 } as const;
export type Dtype = keyof typeof dtypeBytes;

/** Released headers are under 1 MB; anything near this is corruption, refused before allocating. */
export const maxHeaderBytes = 256 * 1024 * 1024;

export interface Shard {
  path: string;
  fileBytes: number;
  /** Absolute offset of the data section: 8 + header length. */
  dataStart: number;
  /** Bytes after the last tensor (tolerated, reported). */
  trailingBytes: number;
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

/** Reads one shard's header. `shard` is the shard's number in the index. */
export function readShardHeader(path: string, shard: number): { shard: Shard; tensors: TensorEntry[] } {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (error) {
    throw new K3Error(ExitCode.runtime, `${path}: cannot open shard (${(error as NodeJS.ErrnoException).code})`);
  }
  try {
    const fileBytes = fstatSync(fd).size;
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
      header = JSON.parse(headerText.toString("utf8"));
    } catch (error) {
      throw corrupt(path, `header is not valid JSON (${(error as Error).message})`);
    }
    if (typeof header !== "object" || header === null || Array.isArray(header)) {
      throw corrupt(path, "header is not a JSON object");
    }
    const tensors = parseEntries(header as Record<string, unknown>, path, shard, dataStart, fileBytes);
    const dataEnd = tensors.reduce((end, t) => Math.max(end, t.offset + t.nbytes), dataStart);
    return { shard: { path, fileBytes, dataStart, trailingBytes: fileBytes - dataEnd }, tensors };
  } finally {
    closeSync(fd);
  }
}

function parseEntries(
  header: Record<string, unknown>, path: string, shard: number, dataStart: number, fileBytes: number,
): TensorEntry[] {
  const tensors: TensorEntry[] = [];
  const dataBytes = fileBytes - dataStart;
  for (const name in header) {
    if (name === "__metadata__") continue;
    const entry = header[name] as { dtype?: unknown; shape?: unknown; data_offsets?: unknown } | null;
    if (typeof entry !== "object" || entry === null) throw corrupt(path, `entry ${name} is not an object`);
    const { dtype, shape, data_offsets: offsets } = entry;
    if (dtype === undefined) throw corrupt(path, `tensor ${name} has no dtype`);
    if (!isDtype(dtype)) throw corrupt(path, `tensor ${name} has unknown dtype ${JSON.stringify(dtype)}`);
    if (!Array.isArray(shape) || !shape.every(isCount)) throw corrupt(path, `tensor ${name} has an invalid shape`);
    if (!Array.isArray(offsets) || offsets.length !== 2 || !isCount(offsets[0]) || !isCount(offsets[1]) || offsets[1] < offsets[0]) {
      throw corrupt(path, `tensor ${name} has invalid data_offsets`);
    }
    const [begin, end] = offsets as [number, number];
    let elements = 1;
    for (const dim of shape as number[]) elements *= dim;
    const nbytes = end - begin;
    if (elements * dtypeBytes[dtype] !== nbytes) {
      throw corrupt(path, `tensor ${name}: shape [${shape.join(", ")}] x ${dtype} is ${elements * dtypeBytes[dtype]} bytes but data_offsets span ${nbytes}`);
    }
    if (end > dataBytes) {
      throw corrupt(path, `tensor ${name}: data_offsets [${begin}, ${end}) run past the end of the file (data section is ${dataBytes} bytes)`);
    }
    tensors.push({ name, shard, dtype, shape: shape as number[], offset: dataStart + begin, nbytes });
  }
  // Headers are normally written in offset order: check that in one pass, sort only if not.
  const ordered = tensors.every((t, i) => i === 0 || t.offset >= (tensors[i - 1] as TensorEntry).offset);
  const byOffset = ordered ? tensors : tensors.slice().sort((a, b) => a.offset - b.offset || a.nbytes - b.nbytes);
  for (let i = 1; i < byOffset.length; i++) {
    const previous = byOffset[i - 1] as TensorEntry;
    const current = byOffset[i] as TensorEntry;
    if (current.offset < previous.offset + previous.nbytes) {
      throw corrupt(path, `tensors ${previous.name} and ${current.name} overlap`);
    }
  }
  return tensors;
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
