/**
 * A shard's header (src/checkpoint/safetensors.ts): the 8-byte length and the JSON after it;
 * the data section stays the fixture's (in process: a sparse file of its size).
 */
import { appendFileSync, closeSync, mkdirSync, openSync, readdirSync, readFileSync, readSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readShardHeader } from "../../../src/checkpoint/safetensors.ts";
import { nestedModel, runIds, runTail, tinyModel } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { concat, mutateBytes, mutateJsonText, type Rng } from "../mutate.ts";

interface ShardSeed extends Seed {
  model: string;
  shardName: string;
  shardPath: string;
  /** Where the data section starts in the fixture's own file. */
  sourceDataStart: number;
  dataBytes: number;
}

/** A shard's header, padded (as the release pads headers to 8 bytes) with `padding` more spaces. */
function shardSeed(model: string, shardName: string, padding = 0): ShardSeed {
  const shardPath = join(model, shardName);
  const fd = openSync(shardPath, "r");
  try {
    const prefix = Buffer.alloc(8);
    readSync(fd, prefix, 0, 8, 0);
    const headerBytes = Number(prefix.readBigUInt64LE(0));
    const bytes = Buffer.alloc(8 + headerBytes);
    readSync(fd, bytes, 0, bytes.length, 0);
    const dataBytes = Bun.file(shardPath).size - bytes.length;
    const padded = Buffer.concat([bytes, Buffer.alloc(padding, 0x20)]);
    padded.writeBigUInt64LE(BigInt(headerBytes + padding), 0);
    return {
      label: `${shardPath}${padding ? ` (+${padding} spaces)` : ""}`, bytes: new Uint8Array(padded), model, shardName, shardPath,
      sourceDataStart: bytes.length, dataBytes,
    };
  } finally {
    closeSync(fd);
  }
}

const data = new Map<string, Uint8Array>();

/** The seed shard's data section, read once. */
function dataOf(seed: ShardSeed): Uint8Array {
  let bytes = data.get(seed.shardPath);
  if (!bytes) {
    bytes = new Uint8Array(readFileSync(seed.shardPath)).subarray(seed.sourceDataStart);
    data.set(seed.shardPath, bytes);
  }
  return bytes;
}

/** Only the 8-byte length changed: the data section then starts early or late. */
function nudgeLength(input: Uint8Array, rng: Rng): Uint8Array {
  const view = new DataView(input.buffer, input.byteOffset, input.byteLength);
  view.setBigUint64(0, BigInt.asUintN(64, view.getBigUint64(0, true) + BigInt(rng.pick([-8, -4, -2, -1, 1, 2, 4, 8]))), true);
  return input;
}

/** An edit of the JSON (then the length made to fit it, or not), of the length alone, or of the raw bytes. */
function mutateShardHeader(input: Uint8Array, rng: Rng): Uint8Array {
  if (input.length >= 8 && rng.chance(0.1)) return nudgeLength(input, rng);
  if (input.length < 8 || rng.chance(0.25)) return mutateBytes(input, rng);
  const view = new DataView(input.buffer, input.byteOffset, input.byteLength);
  const json = new TextEncoder().encode(mutateJsonText(new TextDecoder().decode(input.subarray(8)), rng));
  const length = new Uint8Array(8);
  const choice = rng.below(10);
  const fitted = BigInt(json.length);
  const value = choice < 7 ? fitted : choice < 8 ? view.getBigUint64(0, true) : BigInt.asUintN(64, fitted + BigInt(rng.pick([-8, -4, -2, -1, 1, 2, 4, 8, 1 << 20])));
  new DataView(length.buffer).setBigUint64(0, value, true);
  return concat(length, json);
}

export const safetensorsTarget: FuzzTarget<ShardSeed> = {
  name: "safetensors",
  about: "a shard's 8-byte header length and JSON header: readShardHeader (coverage, alignment, duplicates)",
  seeds: () => [
    shardSeed(tinyModel, "model-00001-of-00001.safetensors"),
    shardSeed(tinyModel, "model-00001-of-00001.safetensors", 8),
    shardSeed(nestedModel, "model-00002-of-00002.safetensors"),
  ],
  mutate: (input, rng) => mutateShardHeader(input, rng),
  parse(input, seed, scratch) {
    const path = join(scratch, seed.shardName);
    writeFileSync(path, input);
    truncateSync(path, input.length + seed.dataBytes);
    const { shard, tensors } = readShardHeader(path, 0);
    const entries = tensors.map((t) => [t.name, t.dtype, t.shape, t.offset - shard.dataStart, t.nbytes] as const);
    return JSON.stringify(entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
  },
  command(input, seed, dir) {
    const model = join(dir, "model");
    mkdirSync(model);
    for (const name of readdirSync(seed.model)) {
      if (name !== seed.shardName) symlinkSync(join(seed.model, name), join(model, name));
    }
    const shard = join(model, seed.shardName);
    writeFileSync(shard, input);
    appendFileSync(shard, dataOf(seed));
    return { args: [model, ...runTail], names: [shard, model] };
  },
  output: runIds,
  testCount: 150,
};
