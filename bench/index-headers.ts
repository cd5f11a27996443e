/**
 * Safetensors index benchmark: the released checkpoint's 497,220 tensor names over 96 shards
 * (real names, shapes and dtypes; payloads are sparse holes), indexed from the headers.
 */
import { closeSync, ftruncateSync, openSync, rmSync, writeSync } from "node:fs";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ModelConfig } from "../src/checkpoint/config.ts";
import { indexCheckpoint } from "../src/checkpoint/safetensors.ts";
import { expertTensors, ffnKind, modelTensors, tensorList, trunkTensors, type TensorSpec } from "../src/checkpoint/tensor-names.ts";
import { releasedConfig } from "../tools/checkpoint/released-config.ts";
import { headerFor, shardName, tensorBytes } from "../tools/checkpoint/writer.ts";
import { Figures, times, type PartReport } from "./results.ts";


/** The released shard layout (model.md 3.8): one layer per shard, model level, two vision shards. */
function releasedShards(config: ModelConfig): TensorSpec[][] {
  const shards: TensorSpec[][] = [];
  for (let layer = 0; layer < config.numLayers; layer++) {
    const specs = trunkTensors(config, layer);
    if (ffnKind(config, layer) === "moe") {
      for (let e = 0; e < config.numExperts; e++) specs.push(...expertTensors(config, layer, e));
    }
    shards.push(specs);
  }
  shards.push(tensorList(modelTensors(config)));
  for (const [tower, count] of [["vision_tower", 120], ["mm_projector", 48]] as const) {
    shards.push(Array.from({ length: count }, (_, i) => ({
      name: `${tower}.blocks.${i}.weight`, shape: [1152, 1152], dtype: "BF16" as const, residency: "model" as const,
    })));
  }
  return shards;
}

function writeHeaderOnlyShard(path: string, specs: TensorSpec[]): void {
  // Padded with spaces to 8 bytes, as the release pads its headers, so tensors start aligned.
  const text = headerFor(specs);
  const header = Buffer.from(text.padEnd(Math.ceil(text.length / 8) * 8, " "));
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(header.length));
  const fd = openSync(path, "w");
  writeSync(fd, prefix);
  writeSync(fd, header);
  const dataBytes = specs.reduce((sum, s) => sum + tensorBytes(s.dtype, s.shape), 0);
  ftruncateSync(fd, 8 + header.length + dataBytes); // a sparse hole: no payload is written
  closeSync(fd);
}

export interface IndexBench {
  tensors: number;
  shards: number;
  /** Median of 5 runs of `indexCheckpoint`, the headers in the page cache. */
  seconds: number;
  headerBytes: number;
}

/** The original C engine's time for the same index, as its authors quoted it (not measured here). */
const originalSeconds = 0.27;

export function benchIndex(): IndexBench {
  const dir = mkdtempSync(join(tmpdir(), "k3-index-bench-"));
  try {
    const shards = releasedShards(releasedConfig);
    let headerBytes = 0;
    shards.forEach((specs, i) => {
      writeHeaderOnlyShard(join(dir, shardName(i, shards.length)), specs);
      headerBytes += headerFor(specs).length;
    });
    indexCheckpoint(dir); // warm the page cache: the benchmark measures parsing, not the disk
    const runs: number[] = [];
    let tensors = 0;
    for (let i = 0; i < 5; i++) {
      const started = performance.now();
      tensors = indexCheckpoint(dir).tensorCount;
      runs.push((performance.now() - started) / 1000);
    }
    runs.sort((a, b) => a - b);
    return { tensors, shards: shards.length, seconds: runs[Math.floor(runs.length / 2)] as number, headerBytes };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function indexReport(index: IndexBench): PartReport {
  const figures = new Figures("index");
  const f = figures.add("headers.seconds", `index ${index.tensors} tensor names over ${index.shards} shards (${(index.headerBytes / 1e6).toFixed(1)} MB of headers), median of 5`,
    index.seconds, "s", { what: "the original C engine (quoted, not measured here)", value: originalSeconds, unit: "s" });
  return {
    lines: [
      `index: ${index.tensors} tensors in ${index.shards} shards (${(index.headerBytes / 1e6).toFixed(1)} MB of headers): ` +
        `median ${f.value.toFixed(3)} s of 5 (the original: ~${originalSeconds} s; ${times(f)})`,
    ],
    figures: figures.list,
    failures: [],
  };
}

if (import.meta.main) for (const line of indexReport(benchIndex()).lines) console.log(line);
