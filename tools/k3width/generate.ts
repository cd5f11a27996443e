/**
 * The K3-width synthetic checkpoint: Kimi K3's real per-layer widths (hidden 7168, 96 KDA heads
 * of 128, MLA 96 heads with q_lora 1536 / kv_lora 512, latent 3584, expert intermediate 3072,
 * dense 33792) but four layers (three KDA, one MLA), 64 experts per MoE layer at top-16, and a
 * small vocabulary, written in the released layout. About 10 GB; never committed.
 *
 *   bun run tools/k3width/generate.ts <dir>
 */
import { createConsola } from "consola";
import { existsSync, mkdirSync, statSync } from "node:fs";
import { join } from "node:path";
import type { ModelConfig } from "../../src/checkpoint/config.ts";
import { allTensors, type TensorSpec } from "../../src/checkpoint/tensor-names.ts";
import { writeAtomically } from "../../src/fs.ts";
import { releasedConfig } from "../checkpoint/released-config.ts";
import { configJson, shardName, tensorBytes, writeSafetensors } from "../checkpoint/writer.ts";

const log = createConsola({ stdout: process.stderr, stderr: process.stderr });

/** The released widths; only the depth, the expert count, the vocabulary and the block size shrink. */
export const k3WidthConfig: ModelConfig = {
  ...releasedConfig,
  numLayers: 4, vocabSize: 4096, numExperts: 64, attnResBlockSize: 2, fullAttnLayers: [4],
};

/** xorshift128+ from `seed`: a 32-bit word a call, fast enough for gigabytes. */
function xorshift(seed: number): () => number {
  let a = (seed * 2654435761) >>> 0 || 1;
  let b = (seed ^ 0x9e3779b9) >>> 0 || 2;
  return () => {
    let t = a;
    const s = b;
    a = s;
    t ^= t << 11;
    t ^= t >>> 8;
    b = (t ^ s ^ (s >>> 19)) >>> 0;
    return (a + b) >>> 0;
  };
}

function fillRandom(words: Uint32Array, seed: number): void {
  const next = xorshift(seed);
  for (let i = 0; i < words.length; i++) words[i] = next();
}

/**
 * The spread of the bf16 matrices: N(0, 0.015²) keeps activations finite through 7168-wide sums
 * and spreads the exponent as trained weights' do (about 2.5 bits of entropy; a code that
 * compresses them is measured on realistic bits, issue 25).
 */
const matrixStd = 0.015;
/** What the weights are drawn from; bench/streaming.ts regenerates a checkpoint made otherwise. */
export const k3WidthWeights = "bf16 matrices N(0, 0.015^2) truncated to bf16; MXFP4 codes uniform, scales 118..123";
export const k3WidthMarker = "k3width.json";

/** bf16 words drawn from N(0, std²) by Box-Muller, each f32 rounded to bf16 by truncation (its top 16 bits). */
function normalBf16(seed: number, out: Uint16Array, std: number): void {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  const next = xorshift(seed);
  for (let i = 0; i < out.length; i += 2) {
    const m = Math.sqrt(-2 * Math.log((next() + 1) / 4294967297)) * std;
    const angle = (2 * Math.PI * next()) / 4294967296;
    f[0] = m * Math.cos(angle);
    out[i] = (u[0] as number) >>> 16;
    if (i + 1 < out.length) {
      f[0] = m * Math.sin(angle);
      out[i + 1] = (u[0] as number) >>> 16;
    }
  }
}

/**
 * Payloads with the magnitudes a trained model has: matrices ~2^-8..2^-5 so activations stay
 * finite through 7168-wide sums, norm gains near 1, MXFP4 scale bytes 118-123.
 */
function payload(spec: TensorSpec, seed: number): Uint8Array {
  const bytes = new Uint8Array(tensorBytes(spec.dtype, spec.shape));
  const words = new Uint32Array(bytes.buffer, 0, Math.floor(bytes.length / 4));
  fillRandom(words, seed);
  if (spec.dtype === "U8") {
    if (spec.name.endsWith("weight_scale")) for (let i = 0; i < bytes.length; i++) bytes[i] = 118 + ((bytes[i] as number) % 6);
    return bytes;
  }
  const isGain = spec.shape.length === 1 || spec.name.endsWith("_res_proj.weight");
  if (spec.dtype === "BF16") {
    const bits = new Uint16Array(bytes.buffer);
    if (isGain) {
      for (let i = 0; i < bits.length; i++) bits[i] = 0x3f80 | ((bits[i] as number) & 0x1f); // 1.0 +- small
    } else {
      normalBf16(seed, bits, matrixStd);
    }
    return bytes;
  }
  const values = new Float32Array(bytes.buffer);
  for (let i = 0; i < values.length; i++) {
    const r = words[i] as number;
    values[i] = isGain || spec.name.endsWith("o_norm.weight") ? 1 + ((r & 0xff) - 128) / 4096 : ((r & 0xffff) - 32768) / 2 ** 20;
  }
  if (spec.name.endsWith(".A_log")) for (let h = 0; h < values.length; h++) values[h] = h < 96 ? -0.4 + (1.6 * h) / 95 : 0;
  return bytes;
}

export function generateK3Width(dir: string): void {
  mkdirSync(dir, { recursive: true });
  const config = k3WidthConfig;
  const specs = allTensors(config);
  // One shard per layer and one for the model level, like the release.
  const groups: TensorSpec[][] = [];
  for (let layer = 0; layer < config.numLayers; layer++) groups.push(specs.filter((s) => s.name.includes(`.layers.${layer}.`)));
  groups.push(specs.filter((s) => !s.name.includes(".layers.")));
  let written = 0;
  const total = specs.reduce((sum, s) => sum + tensorBytes(s.dtype, s.shape), 0);
  const started = performance.now();
  groups.forEach((group, g) => {
    const path = join(dir, shardName(g, groups.length));
    writeSafetensors(path, group.map((spec, i) => ({
      name: spec.name, dtype: spec.dtype, shape: spec.shape,
      bytes: () => {
        const data = payload(spec, g * 1_000_003 + i + 1);
        written += data.length;
        return data;
      },
    })));
    const seconds = (performance.now() - started) / 1000;
    log.info(`wrote ${path} (${(statSync(path).size / 1e9).toFixed(2)} GB); ${(written / 1e9).toFixed(2)} of ${(total / 1e9).toFixed(2)} GB in ${seconds.toFixed(0)} s`);
  });
  writeAtomically(join(dir, k3WidthMarker), `${JSON.stringify({ weights: k3WidthWeights })}\n`, "the generator's record");
  // Written last: its presence is what says the checkpoint is complete.
  writeAtomically(join(dir, "config.json"), configJson(config, "nested"), "the config");
}

if (import.meta.main) {
  const dir = process.argv[2];
  if (!dir) {
    log.error("usage: bun run tools/k3width/generate.ts <dir>");
    process.exit(2);
  }
  if (existsSync(join(dir, "config.json"))) {
    log.error(`${dir} already holds a checkpoint; k3 does not overwrite it`);
    process.exit(2);
  }
  generateK3Width(dir);
}
