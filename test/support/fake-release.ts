/**
 * A checkpoint directory with the release's exact layout and sizes that takes no disk: the 96
 * shards of the release table as sparse files, each holding a valid safetensors header for its
 * share of a small model's tensors (tiny13's, so config.json and the tensor table agree; the last
 * two shards a vision tensor, as in the release), then one byte tensor covering the rest of
 * the shard, which is a hole on disk (the reader wants the data section tiled exactly). `k3 verify` and `k3 doctor` see 1,560,936,091,448 bytes.
 */
import { closeSync, copyFileSync, ftruncateSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { dtypeBytes, indexCheckpoint } from "../../src/checkpoint/safetensors.ts";
import { releaseShards } from "../../src/fetch/release-shards.ts";
import { modelDir } from "./fixtures.ts";
import { tempDir } from "./tmp.ts";

export function writeSparseRelease(label = "release"): string {
  const dir = tempDir(label);
  const source = modelDir("tiny13");
  copyFileSync(join(source, "config.json"), join(dir, "config.json"));
  const index = indexCheckpoint(source);
  const names = [...index.names()].sort();
  const weightMap: Record<string, string> = {};
  // As in the release, the last two shards hold only the (unused) vision tower.
  const textShards = releaseShards.length - 2;
  releaseShards.forEach((shard, i) => {
    const header: Record<string, unknown> = { __metadata__: { format: "pt" } };
    let offset = 0;
    const add = (name: string, dtype: string, shape: number[], nbytes: number) => {
      header[name] = { dtype, shape, data_offsets: [offset, offset + nbytes] };
      offset += nbytes;
      weightMap[name] = shard.name;
    };
    if (i < textShards) {
      // Widest elements first, so every tensor starts on a multiple of its element size.
      const mine = names.filter((_, n) => n % textShards === i).map((name) => index.get(name)!);
      mine.sort((a, b) => dtypeBytes[b.dtype] - dtypeBytes[a.dtype] || (a.name < b.name ? -1 : 1));
      for (const t of mine) add(t.name, t.dtype, t.shape, t.nbytes);
    } else {
      add(`vision_tower.blocks.${i}.weight`, "BF16", [64, 64], 64 * 64 * 2);
    }
    // The tensors must tile the whole data section: the rest of the shard is one byte tensor
    // (a hole on disk). Its size depends on the header's, which its entry is part of.
    const padName = `test_padding.shard_${i + 1}`;
    header[padName] = { dtype: "U8", shape: [0], data_offsets: [offset, offset] };
    weightMap[padName] = shard.name;
    let text = Buffer.from("");
    for (let round = 0; round < 3; round++) {
      const headerBytes = Math.ceil((Buffer.byteLength(JSON.stringify(header)) + 8) / 8) * 8;
      const padBytes = shard.bytes - 8 - headerBytes - offset;
      header[padName] = { dtype: "U8", shape: [padBytes], data_offsets: [offset, offset + padBytes] };
      const json = JSON.stringify(header);
      text = Buffer.from(json.padEnd(headerBytes, " "));
      if (Buffer.byteLength(json) <= headerBytes && 8 + text.length + offset + padBytes === shard.bytes) break;
    }
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(text.length));
    const fd = openSync(join(dir, shard.name), "w");
    try {
      writeSync(fd, prefix, 0, 8, 0);
      writeSync(fd, text, 0, text.length, 8);
      ftruncateSync(fd, shard.bytes);
    } finally {
      closeSync(fd);
    }
  });
  const indexJson = { metadata: { total_size: 0 }, weight_map: weightMap };
  const fd = openSync(join(dir, "model.safetensors.index.json"), "w");
  writeSync(fd, JSON.stringify(indexJson, null, 1));
  closeSync(fd);
  return dir;
}
