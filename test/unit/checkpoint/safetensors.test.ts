import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { indexCheckpoint, readShardHeader } from "../../../src/checkpoint/safetensors.ts";
import { allTensors } from "../../../src/checkpoint/tensor-names.ts";
import { K3Error } from "../../../src/errors.ts";
import { shardName, tensorBytes, writeCheckpoint, writeSafetensors, type TensorData } from "../../../tools/checkpoint/writer.ts";
import { tinyConfig } from "../../support/configs.ts";
import { tempDir } from "../../support/tmp.ts";

// Some tests take seconds, more on a busy machine (a run starts the gates' child processes early):
// bun's 5 s default is too close to be a limit on anything but the machine.
setDefaultTimeout(60_000);

const filled = (name: string, dtype: TensorData["dtype"], shape: number[], byte: number): TensorData => ({
  name, dtype, shape,
  bytes: () => new Uint8Array(tensorBytes(dtype, shape)).fill(byte),
});

/** A shard with a hand-written header (padded with spaces to 8 bytes, as released) and `dataBytes` of payload. */
function rawShard(dir: string, header: unknown, dataBytes: number, name = "model-00001-of-000001.safetensors", minPadding = 0): string {
  let json = JSON.stringify(header);
  const padTo = Math.ceil((json.length + minPadding) / 8) * 8;
  json = json.padEnd(padTo, " ");
  const text = Buffer.from(json);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(text.length));
  const path = join(dir, name);
  writeFileSync(path, Buffer.concat([prefix, text, Buffer.alloc(dataBytes, 7)]));
  return path;
}

function refusal(action: () => unknown): string {
  try {
    action();
  } catch (error) {
    if (error instanceof K3Error) {
      expect(error.exitCode).toBe(1);
      return error.message;
    }
    throw error;
  }
  throw new Error("accepted");
}

describe("safetensors index", () => {
  test("every dtype and rank the checkpoint uses is indexed with absolute offsets", () => {
    const dir = tempDir("st");
    const path = join(dir, "model-00001-of-000001.safetensors");
    writeSafetensors(path, [
      filled("bf16_1d", "BF16", [7], 1),
      filled("f16_odd", "F16", [5], 2),
      filled("u8_packed", "U8", [3, 16], 3),
      filled("scalar", "F32", [], 4),
      filled("f32_2d", "F32", [2, 3], 5),
    ], { format: "pt" });
    const { shard, tensors } = readShardHeader(path, 0);
    const byName = new Map(tensors.map((t) => [t.name, t]));
    const bytes = readFileSync(path);
    const check = (name: string, nbytes: number, shape: number[], fill: number) => {
      const t = byName.get(name)!;
      expect(t.nbytes).toBe(nbytes);
      expect(t.shape).toEqual(shape);
      expect([...bytes.subarray(t.offset, t.offset + t.nbytes)].every((b) => b === fill)).toBe(true);
    };
    check("bf16_1d", 14, [7], 1);
    check("f16_odd", 10, [5], 2);
    check("u8_packed", 48, [3, 16], 3);
    check("scalar", 4, [], 4);
    check("f32_2d", 24, [2, 3], 5);
    expect(byName.has("__metadata__")).toBe(false);
    expect(byName.get("bf16_1d")!.offset).toBe(shard.dataStart);
  });

  test("a multi-shard checkpoint in the released layout finds every tensor by name", () => {
    const dir = tempDir("multi");
    const config = tinyConfig();
    const paths = writeCheckpoint(dir, config, { shape: "nested", shards: 3 });
    expect(paths.map((p) => p.split("/").pop())).toEqual([0, 1, 2].map((i) => shardName(i, 3)));
    const index = indexCheckpoint(dir);
    const specs = allTensors(config);
    expect(index.tensorCount).toBe(specs.length);
    expect(index.shards.length).toBe(3);
    const shardsUsed = new Set<number>();
    for (const spec of specs) {
      const entry = index.get(spec.name);
      expect(entry?.shape).toEqual(spec.shape);
      expect(entry?.dtype).toBe(spec.dtype);
      shardsUsed.add(entry!.shard);
    }
    expect(shardsUsed.size).toBe(3);
    // A layer whose tensors straddle a shard boundary is still found whole.
    const layerShards = new Set(specs.filter((s) => s.name.includes(".layers.5.")).map((s) => index.get(s.name)!.shard));
    expect(layerShards.size).toBeGreaterThanOrEqual(1);
    expect(index.get("language_model.lm_head.weight")?.shape).toEqual([256, 128]);
    expect(index.get("language_model.model.layers.1.block_sparse_moe.experts.7.w2.weight_scale")?.shape).toEqual([64, 2]);
  });

  test("the same tensor in two shards is refused", () => {
    const dir = tempDir("dup");
    writeSafetensors(join(dir, shardName(0, 2)), [filled("a", "F32", [2], 0)]);
    writeSafetensors(join(dir, shardName(1, 2)), [filled("a", "F32", [2], 0)]);
    expect(refusal(() => indexCheckpoint(dir))).toBe(
      `tensor a appears in two shards: ${join(dir, shardName(0, 2))} and ${join(dir, shardName(1, 2))}`,
    );
  });

  test("a directory without shards is refused", () => {
    expect(refusal(() => indexCheckpoint(tempDir("none")))).toMatch(/: no \*\.safetensors shards found$/);
  });

  const entry = (dtype: string, shape: number[], begin: number, end: number) => ({ dtype, shape, data_offsets: [begin, end] });
  const corruptions: [string, (dir: string) => string, string][] = [
    ["a truncated header length", (dir) => {
      const path = join(dir, "s.safetensors");
      writeFileSync(path, Buffer.from([1, 2, 3]));
      return path;
    }, "file is 3 bytes, shorter than the 8-byte header length"],
    ["a header length of zero", (dir) => {
      const path = join(dir, "s.safetensors");
      writeFileSync(path, Buffer.alloc(16));
      return path;
    }, "header length is zero"],
    ["a header length larger than the file", (dir) => {
      const path = join(dir, "s.safetensors");
      const prefix = Buffer.alloc(8);
      prefix.writeBigUInt64LE(1000n);
      writeFileSync(path, Buffer.concat([prefix, Buffer.from("{}")]));
      return path;
    }, "header length 1000 runs past the end of the 10-byte file"],
    ["an absurd header length", (dir) => {
      const path = join(dir, "s.safetensors");
      const prefix = Buffer.alloc(8);
      prefix.writeBigUInt64LE(1n << 60n);
      writeFileSync(path, prefix);
      return path;
    }, `header length ${1n << 60n} is absurd (limit 268435456)`],
    ["a truncated header", (dir) => {
      const path = rawShard(dir, { a: entry("F32", [1], 0, 4) }, 4);
      writeFileSync(path, readFileSync(path).subarray(0, 20));
      return path;
    }, `header length ${Math.ceil(JSON.stringify({ a: entry("F32", [1], 0, 4) }).length / 8) * 8} runs past the end of the 20-byte file`],
    ["a header that is not JSON", (dir) => {
      const path = join(dir, "s.safetensors");
      const prefix = Buffer.alloc(8);
      prefix.writeBigUInt64LE(5n);
      writeFileSync(path, Buffer.concat([prefix, Buffer.from("{oops")]));
      return path;
    }, "header is not valid JSON"],
    ["a header that is not UTF-8", (dir) => {
      const path = join(dir, "s.safetensors");
      const prefix = Buffer.alloc(8);
      prefix.writeBigUInt64LE(4n);
      writeFileSync(path, Buffer.concat([prefix, Buffer.from([0x7b, 0xff, 0xfe, 0x7d])]));
      return path;
    }, "header is not valid UTF-8"],
    ["offsets outside the file", (dir) => rawShard(dir, { a: entry("F32", [4], 0, 16) }, 8),
      "tensor a: data_offsets [0, 16) run past the end of the file (data section is 8 bytes)"],
    ["overlapping tensors", (dir) => rawShard(dir, { a: entry("F32", [2], 0, 8), b: entry("F32", [2], 4, 12) }, 12),
      "tensors a and b overlap"],
    ["an unknown dtype", (dir) => rawShard(dir, { a: entry("F64", [1], 0, 8) }, 8), 'tensor a has unknown dtype "F64"'],
    ["a shape that disagrees with the byte span", (dir) => rawShard(dir, { a: entry("BF16", [3], 0, 8) }, 8),
      "tensor a: shape [3] x BF16 is 6 bytes but data_offsets span 8"],
    ["a missing dtype", (dir) => rawShard(dir, { a: { shape: [1], data_offsets: [0, 4] } }, 4), "tensor a has no dtype"],
    ["missing data_offsets", (dir) => rawShard(dir, { a: { dtype: "F32", shape: [1] } }, 4), "tensor a has invalid data_offsets"],
    ["reversed data_offsets", (dir) => rawShard(dir, { a: entry("F32", [1], 4, 0) }, 4), "tensor a has invalid data_offsets"],
    ["a negative dimension", (dir) => rawShard(dir, { a: entry("F32", [-1], 0, 4) }, 4), "tensor a has an invalid shape"],
  ];
  for (const [name, make, detail] of corruptions) {
    test(`refuses ${name}`, () => {
      const dir = tempDir("bad");
      const path = make(dir);
      const message = refusal(() => readShardHeader(path, 0));
      expect(message.startsWith(`${path}: not a valid safetensors shard: ${detail}`)).toBe(true);
    });
  }

  // Issue 15, defects 1, 7 and 9: headers that parse but do not describe the file exactly.
  const inexact: [string, (dir: string) => string, string][] = [
    ["trailing bytes after the last tensor", (dir) => rawShard(dir, { a: entry("F32", [1], 0, 4) }, 10),
      "6 bytes after the last tensor (a) belong to no tensor (the header length or data_offsets are wrong)"],
    ["a header naming no tensor before data bytes", (dir) => rawShard(dir, { __metadata__: { format: "pt" } }, 4),
      "4 bytes after the header belong to no tensor (the header length or data_offsets are wrong)"],
    ["a hole between two tensors", (dir) => rawShard(dir, { a: entry("F32", [1], 0, 4), b: entry("F32", [1], 8, 12) }, 12),
      "4 bytes after tensor a belong to no tensor (the header length or data_offsets are wrong)"],
    ["a hole before the first tensor", (dir) => rawShard(dir, { a: entry("F32", [1], 4, 8) }, 8),
      "4 bytes at the start of the data section belong to no tensor (the header length or data_offsets are wrong)"],
    ["a header length 4 bytes short (the header ends in padding spaces, so it still parses)", (dir) => {
      const path = rawShard(dir, { a: entry("F32", [3], 0, 12), b: entry("BF16", [4], 12, 20) }, 20, "s.safetensors", 4);
      const bytes = readFileSync(path);
      bytes.writeBigUInt64LE(bytes.readBigUInt64LE(0) - 4n);
      writeFileSync(path, bytes);
      return path;
    }, "4 bytes after the last tensor (b) belong to no tensor (the header length or data_offsets are wrong)"],
    ["an f32 tensor not 4-byte aligned (an unpadded header)", (dir) => {
      const path = join(dir, "s.safetensors");
      const text = Buffer.from(JSON.stringify({ w: entry("F32", [2], 0, 8) }));
      const prefix = Buffer.alloc(8);
      prefix.writeBigUInt64LE(BigInt(text.length));
      writeFileSync(path, Buffer.concat([prefix, text, Buffer.alloc(8)]));
      return path;
    }, "tensor w starts at byte 62 of the file, not a multiple of its 4-byte F32 elements (the data section starts at byte 62; k3 reads elements aligned)"],
    ["a tensor named twice", (dir) => {
      const path = join(dir, "s.safetensors");
      const text = Buffer.from('{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, "\\u0061": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}}');
      const prefix = Buffer.alloc(8);
      prefix.writeBigUInt64LE(BigInt(text.length));
      writeFileSync(path, Buffer.concat([prefix, text, Buffer.alloc(8)]));
      return path;
    }, 'header 1:62: the key "a" appears twice in one object'],
    ["a directory named like a shard", (dir) => {
      const path = join(dir, "s.safetensors");
      mkdirSync(path);
      return path;
    }, "it is a directory, not a file"],
  ];
  for (const [name, make, detail] of inexact) {
    test(`refuses ${name}`, () => {
      const path = make(tempDir("inexact"));
      expect(refusal(() => readShardHeader(path, 0))).toBe(`${path}: not a valid safetensors shard: ${detail}`);
    });
  }

  test("each tensor needs only its own elements' alignment: U8 and BF16 after an odd data start are read", () => {
    /** A shard whose data section starts at byte 1 mod 4 (the header padded to get there). */
    const oddShard = (header: Record<string, unknown>, dataBytes: number) => {
      let text = JSON.stringify(header);
      while ((8 + text.length) % 4 !== 1) text += " ";
      const path = join(tempDir("align"), "s.safetensors");
      const prefix = Buffer.alloc(8);
      prefix.writeBigUInt64LE(BigInt(text.length));
      writeFileSync(path, Buffer.concat([prefix, Buffer.from(text), Buffer.alloc(dataBytes)]));
      return path;
    };
    const ok = readShardHeader(oddShard({ u: entry("U8", [1], 0, 1), h: entry("BF16", [2], 1, 5) }, 5), 0);
    expect(ok.tensors.map((t) => t.offset % 4)).toEqual([1, 2]);
    const path = oddShard({ u: entry("U8", [1], 0, 1), h: entry("BF16", [2], 1, 5), f: entry("F32", [1], 5, 9) }, 9);
    expect(refusal(() => readShardHeader(path, 0))).toMatch(/^.*: not a valid safetensors shard: tensor f starts at byte \d+ of the file, not a multiple of its 4-byte F32 elements/);
  });

  test("escaped names are decoded exactly", () => {
    const dir = tempDir("esc");
    const path = rawShard(dir, { "la\u00fcyer\"x": entry("U8", [2], 0, 2) }, 2);
    expect(readShardHeader(path, 0).tensors[0]?.name).toBe('la\u00fcyer"x');
  });
});
