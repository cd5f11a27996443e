/**
 * The one table of Kimi K3 tensor names, shapes and released dtypes (model.md section 3).
 * Binding reads the per-block records (`kdaTensors`, `moeTensors`, ...) field by field; packing,
 * checking and the test checkpoint writer read the same records flattened (`trunkTensors`).
 */
import type { ModelConfig } from "./config.ts";
import type { Dtype } from "./safetensors.ts";

/** trunk: per-layer, always-on; expert: routed, streamed on demand; model: embed/head/norms. */
export type Residency = "trunk" | "expert" | "model";

export interface TensorSpec {
  name: string;
  shape: number[];
  /** The dtype the release ships; readers also accept F32 for any float tensor. */
  dtype: Dtype;
  residency: Residency;
}

export type AttentionKind = "kda" | "mla";
export type FfnKind = "dense" | "moe";

export const modelPrefix = "language_model.model.";
export const lmHeadName = "language_model.lm_head.weight";

export const layerPrefix = (layer: number) => `${modelPrefix}layers.${layer}.`;
export const expertPrefix = (layer: number, expert: number) => `${layerPrefix(layer)}block_sparse_moe.experts.${expert}.`;

export function attentionKind(config: ModelConfig, layer: number): AttentionKind {
  return config.fullAttnLayers.includes(layer + 1) ? "mla" : "kda";
}

export function ffnKind(config: ModelConfig, layer: number): FfnKind {
  return layer < config.firstKDenseReplace ? "dense" : "moe";
}

/**
 * A block's specs keyed by the field of the bound weights that uses them (an AttnRes norm and
 * projection pair folds into one field), nested where the weights nest (the MoE's shared
 * experts). Absent tensors (a tied LM head, no output gate, no shared experts) are undefined.
 * Field order is storage order.
 */
export type TensorTable = { readonly [field: string]: TensorSpec | TensorTable | undefined };

// A table's entries are never strings, so a string name is what marks a spec.
const isSpec = (entry: TensorSpec | TensorTable): entry is TensorSpec => typeof entry.name === "string";

/** The specs of a table in its field order, nested tables in place. */
export function tensorList(table: TensorTable): TensorSpec[] {
  return Object.values(table).flatMap((entry) => (entry === undefined ? [] : isSpec(entry) ? [entry] : tensorList(entry)));
}

export type ModelTensors = Record<"embed" | "finalNorm" | "outputResNorm" | "outputResProj", TensorSpec> & {
  lmHead: TensorSpec | undefined;
};

export function modelTensors(config: ModelConfig): ModelTensors {
  const { vocabSize: V, hiddenSize: E } = config;
  const model = (name: string, shape: number[]): TensorSpec => ({ name, shape, dtype: "BF16", residency: "model" });
  return {
    embed: model(`${modelPrefix}embed_tokens.weight`, [V, E]),
    lmHead: config.tieWordEmbeddings ? undefined : model(lmHeadName, [V, E]),
    finalNorm: model(`${modelPrefix}norm.weight`, [E]),
    outputResNorm: model(`${modelPrefix}output_attn_res_norm.weight`, [E]),
    outputResProj: model(`${modelPrefix}output_attn_res_proj.weight`, [1, E]),
  };
}

/** The builder of one layer's trunk specs; names are relative to the layer. */
function trunkSpec(layer: number) {
  const prefix = layerPrefix(layer);
  return (suffix: string, shape: number[], dtype: Dtype = "BF16"): TensorSpec => ({ name: prefix + suffix, shape, dtype, residency: "trunk" });
}

/** The norm gains and the AttnRes norm/projection pairs every layer has. */
export type LayerNormTensors = Record<
  "inputNorm" | "postNorm" | "attnResNorm" | "attnResProj" | "mlpResNorm" | "mlpResProj", TensorSpec
>;

export function layerNormTensors(config: ModelConfig, layer: number): LayerNormTensors {
  const E = config.hiddenSize;
  const t = trunkSpec(layer);
  return {
    inputNorm: t("input_layernorm.weight", [E]),
    postNorm: t("post_attention_layernorm.weight", [E]),
    attnResNorm: t("self_attention_res_norm.weight", [E]),
    attnResProj: t("self_attention_res_proj.weight", [1, E]),
    mlpResNorm: t("mlp_res_norm.weight", [E]),
    mlpResProj: t("mlp_res_proj.weight", [1, E]),
  };
}

export type KdaTensors = Record<
  "q" | "k" | "v" | "qConv" | "kConv" | "vConv" | "fa" | "fb" | "beta" | "aLog" | "dtBias" | "gate" | "oNorm" | "o", TensorSpec
>;

export function kdaTensors(config: ModelConfig, layer: number): KdaTensors {
  const c = config;
  const E = c.hiddenSize;
  const P = c.kdaNumHeads * c.kdaHeadDim;
  const D = c.kdaHeadDim;
  const t = trunkSpec(layer);
  return {
    q: t("self_attn.q_proj.weight", [P, E]),
    k: t("self_attn.k_proj.weight", [P, E]),
    v: t("self_attn.v_proj.weight", [P, E]),
    qConv: t("self_attn.q_conv1d.weight", [P, 1, c.shortConvKernel], "F32"),
    kConv: t("self_attn.k_conv1d.weight", [P, 1, c.shortConvKernel], "F32"),
    vConv: t("self_attn.v_conv1d.weight", [P, 1, c.shortConvKernel], "F32"),
    fa: t("self_attn.f_a_proj.weight", [D, E]),
    fb: t("self_attn.f_b_proj.weight", [P, D]),
    beta: t("self_attn.b_proj.weight", [c.kdaNumHeads, E]),
    // A_log ships at length D with one meaningful value per head (model.md 3.3).
    aLog: t("self_attn.A_log", [D], "F32"),
    dtBias: t("self_attn.dt_bias", [P], "F32"),
    gate: t("self_attn.g_proj.weight", [P, E]),
    oNorm: t("self_attn.o_norm.weight", [D], "F32"),
    o: t("self_attn.o_proj.weight", [E, P]),
  };
}

export type MlaTensors = Record<"qa" | "qaNorm" | "qb" | "kva" | "kvaNorm" | "kvb" | "o", TensorSpec> & {
  gate: TensorSpec | undefined;
};

export function mlaTensors(config: ModelConfig, layer: number): MlaTensors {
  const c = config;
  const E = c.hiddenSize;
  const H = c.numAttentionHeads;
  const dq = c.qkNopeHeadDim + c.qkRopeHeadDim;
  const t = trunkSpec(layer);
  return {
    qa: t("self_attn.q_a_proj.weight", [c.qLoraRank, E]),
    qaNorm: t("self_attn.q_a_layernorm.weight", [c.qLoraRank]),
    qb: t("self_attn.q_b_proj.weight", [H * dq, c.qLoraRank]),
    kva: t("self_attn.kv_a_proj_with_mqa.weight", [c.kvLoraRank + c.qkRopeHeadDim, E]),
    kvaNorm: t("self_attn.kv_a_layernorm.weight", [c.kvLoraRank]),
    kvb: t("self_attn.kv_b_proj.weight", [H * (c.qkNopeHeadDim + c.vHeadDim), c.kvLoraRank]),
    gate: c.mlaUseOutputGate ? t("self_attn.g_proj.weight", [H * c.vHeadDim, E]) : undefined,
    o: t("self_attn.o_proj.weight", [E, H * c.vHeadDim]),
  };
}

export type DenseTensors = Record<"gate" | "up" | "down", TensorSpec>;

/** A SwiGLU MLP of width `width` under `prefix` (the dense layers' mlp., the shared experts). */
function swiglu(layer: number, prefix: string, hidden: number, width: number): DenseTensors {
  const t = trunkSpec(layer);
  return {
    gate: t(`${prefix}gate_proj.weight`, [width, hidden]),
    up: t(`${prefix}up_proj.weight`, [width, hidden]),
    down: t(`${prefix}down_proj.weight`, [hidden, width]),
  };
}

export function denseTensors(config: ModelConfig, layer: number): DenseTensors {
  return swiglu(layer, "mlp.", config.hiddenSize, config.intermediateSize);
}

export type MoeTensors = Record<"router" | "routerBias" | "latentDown" | "latentUp" | "latentNorm", TensorSpec> & {
  shared: DenseTensors | undefined;
};

/** A MoE layer's trunk tensors; its routed experts are `expertTensors`. */
export function moeTensors(config: ModelConfig, layer: number): MoeTensors {
  const c = config;
  const E = c.hiddenSize;
  const L = c.routedExpertHiddenSize;
  const Is = c.numSharedExperts * c.moeIntermediateSize;
  const t = trunkSpec(layer);
  return {
    router: t("block_sparse_moe.gate.weight", [c.numExperts, E]),
    routerBias: t("block_sparse_moe.gate.e_score_correction_bias", [c.numExperts], "F32"),
    latentDown: t("block_sparse_moe.routed_expert_down_proj.weight", [L, E]),
    latentUp: t("block_sparse_moe.routed_expert_up_proj.weight", [E, L]),
    latentNorm: t("block_sparse_moe.routed_expert_norm.weight", [L]),
    shared: Is > 0 ? swiglu(layer, "block_sparse_moe.shared_experts.", E, Is) : undefined,
  };
}

/** The trunk tensors of one layer, in the order the release stores them. */
export function trunkTensors(config: ModelConfig, layer: number): TensorSpec[] {
  const attention = attentionKind(config, layer) === "kda" ? kdaTensors(config, layer) : mlaTensors(config, layer);
  const ffn = ffnKind(config, layer) === "dense" ? denseTensors(config, layer) : moeTensors(config, layer);
  return [layerNormTensors(config, layer), attention, ffn].flatMap((table) => tensorList(table));
}

/** The six tensors of one routed expert, in the order observed on disk. w1 = gate, w3 = up, w2 = down. */
export function expertTensors(config: ModelConfig, layer: number, expert: number): TensorSpec[] {
  const L = config.routedExpertHiddenSize;
  const I = config.moeIntermediateSize;
  const prefix = expertPrefix(layer, expert);
  const specs: TensorSpec[] = [];
  for (const [w, rows, cols] of [["w1", I, L], ["w2", L, I], ["w3", I, L]] as const) {
    specs.push(
      { name: `${prefix}${w}.weight_packed`, shape: [rows, cols / 2], dtype: "U8", residency: "expert" },
      { name: `${prefix}${w}.weight_scale`, shape: [rows, cols / 32], dtype: "U8", residency: "expert" },
    );
  }
  return specs;
}

/** Every tensor of a checkpoint: each layer's trunk then its experts, then the model level. */
export function allTensors(config: ModelConfig): TensorSpec[] {
  const specs: TensorSpec[] = [];
  for (let layer = 0; layer < config.numLayers; layer++) {
    specs.push(...trunkTensors(config, layer));
    if (ffnKind(config, layer) === "moe") {
      for (let e = 0; e < config.numExperts; e++) specs.push(...expertTensors(config, layer, e));
    }
  }
  specs.push(...tensorList(modelTensors(config)));
  return specs;
}
