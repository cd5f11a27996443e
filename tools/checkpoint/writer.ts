/**
 * Writes checkpoints in the released Kimi K3 layout: safetensors shards named like the
 * release, tensor names and dtypes from src/checkpoint/tensor-names.ts, MXFP4 experts as
 * packed nibbles plus E8M0 scales, and config.json in the nested or flat shape.
 * Tests and benchmarks use it; payloads are streamed, so large checkpoints need little memory.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { configFields, type ModelConfig, type ConfigShape } from "../../src/checkpoint/config.ts";
import { dtypeBytes, type Dtype } from "../../src/checkpoint/safetensors.ts";
import { writeAtomically, writeFileAtomically, writeFully } from "../../src/fs.ts";
import { allTensors, type TensorSpec } from "../../src/checkpoint/tensor-names.ts";

export interface TensorData {
  name: string;
  dtype: Dtype;
  shape: number[];
  /** Produces the payload; called once, in file order. */
  bytes: () => Uint8Array;
}

export function tensorBytes(dtype: Dtype, shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1) * dtypeBytes[dtype];
}

/** The header JSON of a shard, with data_offsets laid out back to back in the given order. */
export function headerFor(tensors: readonly Omit<TensorData, "bytes">[], metadata?: Record<string, string>): string {
  const header: Record<string, unknown> = {};
  if (metadata) header.__metadata__ = metadata;
  let offset = 0;
  for (const t of tensors) {
    const nbytes = tensorBytes(t.dtype, t.shape);
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + nbytes] };
    offset += nbytes;
  }
  return JSON.stringify(header);
}

/** Writes one shard to a temporary name and renames it into place when complete. */
export function writeSafetensors(path: string, tensors: readonly TensorData[], metadata?: Record<string, string>): void {
  const headerText = Buffer.from(headerFor(tensors, metadata), "utf8");
  // Pad the header with spaces to 8 bytes, as the release does, so payloads start aligned.
  const padded = Buffer.alloc(Math.ceil(headerText.length / 8) * 8, 0x20);
  headerText.copy(padded);
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(padded.length));
  writeFileAtomically(path, "the checkpoint shard", (fd) => {
    writeFully(fd, prefix);
    writeFully(fd, padded);
    for (const t of tensors) {
      const data = t.bytes();
      const expected = tensorBytes(t.dtype, t.shape);
      if (data.byteLength !== expected) throw new Error(`${t.name}: ${data.byteLength} bytes, expected ${expected}`);
      writeFully(fd, data);
    }
  });
}

/** config.json text for `config` in the released nested shape or the flat fixture shape. */
export function configJson(config: ModelConfig, shape: ConfigShape): string {
  const root: Record<string, unknown> = {};
  if (shape === "flat") {
    for (const field of configFields) root[field.flat] = config[field.key];
    root.tie_word_embeddings = config.tieWordEmbeddings;
    return `${JSON.stringify(root, null, 2)}\n`;
  }
  const textConfig: Record<string, unknown> = {};
  const linear: Record<string, unknown> = {};
  for (const field of configFields) {
    (field.nested.scope === "text" ? textConfig : linear)[field.nested.name] = config[field.key];
  }
  const all = Array.from({ length: config.numLayers }, (_, l) => l + 1);
  linear.kda_layers = all.filter((l) => !config.fullAttnLayers.includes(l));
  linear.use_full_rank_gate = true;
  textConfig.tie_word_embeddings = config.tieWordEmbeddings;
  textConfig.linear_attn_config = linear;
  root.architectures = ["KimiK3ForConditionalGeneration"];
  root.model_type = "kimi_k3";
  root.quantization_config = { group_size: 32 };
  root.text_config = textConfig;
  return `${JSON.stringify(root, null, 2)}\n`;
}

/** A small deterministic generator (xorshift32) so fixtures are reproducible without Python. */
export function rng(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 0x100000000;
  };
}

/** bf16 bits of `value`, by truncation (the rule the reference fixtures use). */
export function bf16Bits(value: number): number {
  const f = new Float32Array([value]);
  return new Uint32Array(f.buffer)[0]! >>> 16;
}

/** Deterministic payload for a tensor: small normal-ish floats, or MXFP4 bytes for experts. */
export function syntheticPayload(spec: Omit<TensorSpec, "residency">, seed: number): Uint8Array {
  const random = rng(seed);
  const count = spec.shape.reduce((a, b) => a * b, 1);
  const gaussian = () => (random() + random() + random() - 1.5) * 0.05;
  if (spec.dtype === "U8") {
    const bytes = new Uint8Array(count);
    const isScale = spec.name.endsWith("weight_scale");
    for (let i = 0; i < count; i++) bytes[i] = isScale ? 118 + Math.floor(random() * 8) : Math.floor(random() * 256);
    return bytes;
  }
  if (spec.dtype === "F32") {
    const values = new Float32Array(count);
    for (let i = 0; i < count; i++) values[i] = gaussian();
    return new Uint8Array(values.buffer);
  }
  const bits = new Uint16Array(count);
  const isGain = spec.shape.length === 1 || spec.name.endsWith("_res_proj.weight");
  for (let i = 0; i < count; i++) bits[i] = bf16Bits(isGain ? 1 + gaussian() : gaussian());
  return new Uint8Array(bits.buffer);
}

export interface CheckpointOptions {
  shape: ConfigShape;
  /** Number of shards; layers are spread over them in order, the model level goes last. */
  shards: number;
  seed?: number;
  /** A_log ships padded to the head dim with zeros after its one value per head; "noise" fills the padding (a test of the warning). */
  aLogPadding?: "zero" | "noise";
}

/** Shard file names as the release spells them: model-00001-of-000096.safetensors. */
export function shardName(index: number, total: number): string {
  return `model-${String(index + 1).padStart(5, "0")}-of-${String(total).padStart(6, "0")}.safetensors`;
}

/** Writes a complete synthetic checkpoint for `config` into `dir`. */
export function writeCheckpoint(dir: string, config: ModelConfig, options: CheckpointOptions): string[] {
  mkdirSync(dir, { recursive: true });
  const specs = allTensors(config);
  const perShard = Math.ceil(specs.length / options.shards);
  const paths: string[] = [];
  const seed = options.seed ?? 1;
  for (let s = 0; s < options.shards; s++) {
    const slice = specs.slice(s * perShard, (s + 1) * perShard);
    const path = join(dir, shardName(s, options.shards));
    writeSafetensors(path, slice.map((spec, i) => ({
      name: spec.name, dtype: spec.dtype, shape: spec.shape,
      bytes: () => {
        const payload = syntheticPayload(spec, seed * 100_003 + s * 10_007 + i);
        if (spec.name.endsWith(".A_log") && options.aLogPadding !== "noise") {
          new Float32Array(payload.buffer, payload.byteOffset, payload.byteLength / 4).fill(0, config.kdaNumHeads);
        }
        return payload;
      },
    })));
    paths.push(path);
  }
  writeAtomically(join(dir, "config.json"), configJson(config, options.shape), "the config");
  return paths;
}
