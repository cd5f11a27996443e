/**
 * Binding by name (model.md 3.7): every tensor the first `layerCount` layers and the model
 * level use is found by its exact released name and checked against the shape the config
 * implies and a readable dtype, before anything is read. All problems are reported together;
 * nothing missing is ever read as zeros. `bindLayer` then turns a layer's bytes (resident, or
 * a streaming slot) into the structures the forward pass uses: matrices point into the bytes,
 * small vectors are widened to f32.
 */
import { u8View, type Pointer } from "../native/memory.ts";
import type { ModelConfig } from "../checkpoint/config.ts";
import { dtypeBytes, type CheckpointIndex, type TensorEntry } from "../checkpoint/safetensors.ts";
import {
  attentionKind, expertTensors, ffnKind, layerPrefix, modelTensors, trunkTensors, type TensorSpec,
} from "../checkpoint/tensor-names.ts";
import { K3Error, ExitCode } from "../errors.ts";
import type { LayerLayout, LayoutTensor } from "./trunk-layout.ts";
import type {
  DenseWeights, KdaWeights, LayerWeights, Matrix, MlaWeights, MoeWeights, Vector,
} from "./types.ts";
import { VectorArena } from "./vector-arena.ts";
import { foldPhi, widenToF32 } from "./widen.ts";

const sameShape = (a: number[], b: number[]) => a.length === b.length && a.every((d, i) => d === b[i]);

/** Shapes a tensor may have besides the released one (model.md 3.2, 3.3). */
function shapeAccepted(spec: TensorSpec, shape: number[], config: ModelConfig): boolean {
  if (sameShape(spec.shape, shape)) return true;
  if (spec.name.endsWith("_res_proj.weight")) return sameShape(shape, [config.hiddenSize]);
  // A_log ships padded to D; the first Hk values are the heads.
  if (spec.name.endsWith(".A_log")) return shape.length === 1 && (shape[0] as number) >= config.kdaNumHeads;
  return false;
}

/** Matrices are read as bf16 or f32 in the dot product; vectors are widened from any float. */
export function isMatrixSpec(spec: Pick<TensorSpec, "shape" | "dtype">): boolean {
  return spec.dtype !== "U8" && spec.shape.length === 2 && spec.shape[0] !== 1;
}

function dtypeAccepted(spec: TensorSpec, entry: TensorEntry): boolean {
  if (spec.dtype === "U8") return entry.dtype === "U8";
  return isMatrixSpec(spec) ? entry.dtype === "BF16" || entry.dtype === "F32" : entry.dtype !== "U8";
}

/** Checks every tensor the run will use; throws one K3Error (exit 1) listing the problems. */
export function checkBindable(index: CheckpointIndex, config: ModelConfig, layerCount: number): void {
  const problems: string[] = [];
  const layersMissing = new Set<number>();
  const check = (spec: TensorSpec, layer: number | undefined) => {
    const entry = index.get(spec.name);
    if (!entry) {
      if (layer !== undefined) layersMissing.add(layer);
      problems.push(`missing ${spec.name}`);
    } else if (!shapeAccepted(spec, entry.shape, config)) {
      problems.push(`${spec.name} has shape [${entry.shape.join(", ")}], the config implies [${spec.shape.join(", ")}]`);
    } else if (!dtypeAccepted(spec, entry)) {
      problems.push(`${spec.name} has dtype ${entry.dtype}, which k3 cannot use there`);
    }
  };
  for (let layer = 0; layer < layerCount; layer++) {
    for (const spec of trunkTensors(config, layer)) check(spec, layer);
    if (ffnKind(config, layer) !== "moe") continue;
    // Routed experts: U8, rank 2, logical shapes [I, Λ] for w1/w3 and [Λ, I] for w2, and
    // scale_cols x 32 = packed_cols x 2 (which is what proves the group size is 32).
    for (let e = 0; e < config.numExperts; e++) for (const spec of expertTensors(config, layer, e)) check(spec, layer);
  }
  for (const spec of modelTensors(config)) check(spec, undefined);
  if (problems.length === 0) return;
  const head = layersMissing.size > 0 ? `${layersMissing.size} of ${layerCount} layers are missing tensors in this shard set; ` : "";
  const shown = problems.slice(0, 5).join("; ");
  const more = problems.length > 5 ? `; and ${problems.length - 5} more` : "";
  throw new K3Error(ExitCode.runtime, `${index.dir}: ${head}${shown}${more}`);
}

/** Bytes of widened vectors a layer's bind stores (its arena size). */
export function vectorBytes(layout: LayerLayout): number {
  return VectorArena.bytesFor(layout.tensors.filter((t) => !isMatrixSpec(t)).map((t) => t.nbytes / dtypeBytes[t.dtype]));
}

/** A layer's trunk bytes in native memory, laid out as `layout` says. */
export interface LayerBytes {
  layout: LayerLayout;
  base: Pointer;
}

class LayerBinder {
  readonly #tensors: Map<string, LayoutTensor>;
  readonly #bytes: LayerBytes;
  readonly #arena: VectorArena;
  readonly warnings: string[];

  constructor(bytes: LayerBytes, arena: VectorArena, warnings: string[]) {
    this.#bytes = bytes;
    this.#tensors = new Map(bytes.layout.tensors.map((t) => [t.name, t]));
    this.#arena = arena;
    this.warnings = warnings;
  }

  #tensor(name: string): LayoutTensor {
    const tensor = this.#tensors.get(name);
    if (!tensor) throw new Error(`layer ${this.#bytes.layout.layer} has no tensor ${name} (checkBindable runs first)`);
    return tensor;
  }

  matrix(name: string): Matrix {
    const t = this.#tensor(name);
    const [rows, cols] = t.shape as [number, number];
    return { name, ptr: (this.#bytes.base + t.off) as Pointer, rows, cols, dtype: t.dtype as Matrix["dtype"] };
  }

  values(name: string): Float32Array {
    const t = this.#tensor(name);
    const raw = u8View(this.#bytes.base, t.off, t.nbytes);
    return widenToF32(raw, t.dtype, t.shape.reduce((a, b) => a * b, 1));
  }

  vector(name: string, values: Float32Array = this.values(name)): Vector {
    return this.#arena.store(name, values);
  }

  fold(normName: string, projName: string): Vector {
    return this.vector(`${normName} * ${projName}`, foldPhi(this.values(normName), this.values(projName)));
  }

  aLog(name: string, heads: number): Vector {
    const all = this.values(name);
    if (all.subarray(heads).some((v) => v !== 0)) {
      this.warnings.push(`${name}: padding after the first ${heads} values (one per head) is not zero`);
    }
    return this.vector(name, all.slice(0, heads));
  }
}

function bindKda(b: LayerBinder, a: string, config: ModelConfig): KdaWeights {
  return {
    kind: "kda",
    q: b.matrix(`${a}q_proj.weight`), k: b.matrix(`${a}k_proj.weight`), v: b.matrix(`${a}v_proj.weight`),
    qConv: b.vector(`${a}q_conv1d.weight`), kConv: b.vector(`${a}k_conv1d.weight`), vConv: b.vector(`${a}v_conv1d.weight`),
    fa: b.matrix(`${a}f_a_proj.weight`), fb: b.matrix(`${a}f_b_proj.weight`), beta: b.matrix(`${a}b_proj.weight`),
    aLog: b.aLog(`${a}A_log`, config.kdaNumHeads), dtBias: b.vector(`${a}dt_bias`),
    gate: b.matrix(`${a}g_proj.weight`), oNorm: b.vector(`${a}o_norm.weight`), o: b.matrix(`${a}o_proj.weight`),
  };
}

function bindMla(b: LayerBinder, a: string, config: ModelConfig): MlaWeights {
  return {
    kind: "mla",
    qa: b.matrix(`${a}q_a_proj.weight`), qaNorm: b.vector(`${a}q_a_layernorm.weight`),
    qb: b.matrix(`${a}q_b_proj.weight`),
    kva: b.matrix(`${a}kv_a_proj_with_mqa.weight`), kvaNorm: b.vector(`${a}kv_a_layernorm.weight`),
    kvb: b.matrix(`${a}kv_b_proj.weight`),
    gate: config.mlaUseOutputGate ? b.matrix(`${a}g_proj.weight`) : undefined,
    o: b.matrix(`${a}o_proj.weight`),
  };
}

function bindDense(b: LayerBinder, prefix: string): DenseWeights {
  return {
    kind: "dense",
    gate: b.matrix(`${prefix}gate_proj.weight`), up: b.matrix(`${prefix}up_proj.weight`), down: b.matrix(`${prefix}down_proj.weight`),
  };
}

function bindMoe(b: LayerBinder, m: string, config: ModelConfig): MoeWeights {
  return {
    kind: "moe",
    router: b.matrix(`${m}gate.weight`), routerBias: b.vector(`${m}gate.e_score_correction_bias`),
    latentDown: b.matrix(`${m}routed_expert_down_proj.weight`), latentUp: b.matrix(`${m}routed_expert_up_proj.weight`),
    latentNorm: b.vector(`${m}routed_expert_norm.weight`),
    shared: config.numSharedExperts > 0 ? bindDense(b, `${m}shared_experts.`) : undefined,
  };
}

/** Binds one layer's bytes; vectors go to `arena`, which is reset first. */
export function bindLayer(config: ModelConfig, bytes: LayerBytes, arena: VectorArena, warnings: string[]): LayerWeights {
  arena.reset();
  const b = new LayerBinder(bytes, arena, warnings);
  const layer = bytes.layout.layer;
  const p = layerPrefix(layer);
  return {
    index: layer,
    inputNorm: b.vector(`${p}input_layernorm.weight`),
    postNorm: b.vector(`${p}post_attention_layernorm.weight`),
    phiAttn: b.fold(`${p}self_attention_res_norm.weight`, `${p}self_attention_res_proj.weight`),
    phiMlp: b.fold(`${p}mlp_res_norm.weight`, `${p}mlp_res_proj.weight`),
    attention: attentionKind(config, layer) === "kda" ? bindKda(b, `${p}self_attn.`, config) : bindMla(b, `${p}self_attn.`, config),
    ffn: ffnKind(config, layer) === "dense" ? bindDense(b, `${p}mlp.`) : bindMoe(b, `${p}block_sparse_moe.`, config),
  };
}
