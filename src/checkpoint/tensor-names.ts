/**
 * The one table of Kimi K3 tensor names, shapes and released dtypes (model.md section 3).
 * Binding, packing and the test checkpoint writer all read it from here.
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

export function modelTensors(config: ModelConfig): TensorSpec[] {
  const { vocabSize: V, hiddenSize: E } = config;
  const model = (name: string, shape: number[], dtype: Dtype = "BF16"): TensorSpec => ({ name, shape, dtype, residency: "model" });
  const specs = [
    model(`${modelPrefix}embed_tokens.weight`, [V, E]),
    model(`${modelPrefix}norm.weight`, [E]),
    model(`${modelPrefix}output_attn_res_norm.weight`, [E]),
    model(`${modelPrefix}output_attn_res_proj.weight`, [1, E]),
  ];
  if (!config.tieWordEmbeddings) specs.splice(1, 0, model(lmHeadName, [V, E]));
  return specs;
}

/** The trunk tensors of one layer, in the order the release stores them. */
export function trunkTensors(config: ModelConfig, layer: number): TensorSpec[] {
  const c = config;
  const E = c.hiddenSize;
  const P = c.kdaNumHeads * c.kdaHeadDim;
  const D = c.kdaHeadDim;
  const prefix = layerPrefix(layer);
  const t = (suffix: string, shape: number[], dtype: Dtype = "BF16"): TensorSpec => ({
    name: prefix + suffix, shape, dtype, residency: "trunk",
  });
  const specs: TensorSpec[] = [
    t("input_layernorm.weight", [E]),
    t("post_attention_layernorm.weight", [E]),
    t("self_attention_res_norm.weight", [E]),
    t("self_attention_res_proj.weight", [1, E]),
    t("mlp_res_norm.weight", [E]),
    t("mlp_res_proj.weight", [1, E]),
  ];
  if (attentionKind(c, layer) === "kda") {
    specs.push(
      t("self_attn.q_proj.weight", [P, E]),
      t("self_attn.k_proj.weight", [P, E]),
      t("self_attn.v_proj.weight", [P, E]),
      t("self_attn.q_conv1d.weight", [P, 1, c.shortConvKernel], "F32"),
      t("self_attn.k_conv1d.weight", [P, 1, c.shortConvKernel], "F32"),
      t("self_attn.v_conv1d.weight", [P, 1, c.shortConvKernel], "F32"),
      t("self_attn.f_a_proj.weight", [D, E]),
      t("self_attn.f_b_proj.weight", [P, D]),
      t("self_attn.b_proj.weight", [c.kdaNumHeads, E]),
      // A_log ships at length D with one meaningful value per head (model.md 3.3).
      t("self_attn.A_log", [D], "F32"),
      t("self_attn.dt_bias", [P], "F32"),
      t("self_attn.g_proj.weight", [P, E]),
      t("self_attn.o_norm.weight", [D], "F32"),
      t("self_attn.o_proj.weight", [E, P]),
    );
  } else {
    const H = c.numAttentionHeads;
    const dq = c.qkNopeHeadDim + c.qkRopeHeadDim;
    specs.push(
      t("self_attn.q_a_proj.weight", [c.qLoraRank, E]),
      t("self_attn.q_a_layernorm.weight", [c.qLoraRank]),
      t("self_attn.q_b_proj.weight", [H * dq, c.qLoraRank]),
      t("self_attn.kv_a_proj_with_mqa.weight", [c.kvLoraRank + c.qkRopeHeadDim, E]),
      t("self_attn.kv_a_layernorm.weight", [c.kvLoraRank]),
      t("self_attn.kv_b_proj.weight", [H * (c.qkNopeHeadDim + c.vHeadDim), c.kvLoraRank]),
    );
    if (c.mlaUseOutputGate) specs.push(t("self_attn.g_proj.weight", [H * c.vHeadDim, E]));
    specs.push(t("self_attn.o_proj.weight", [E, H * c.vHeadDim]));
  }
  if (ffnKind(c, layer) === "dense") {
    const I = c.intermediateSize;
    specs.push(t("mlp.gate_proj.weight", [I, E]), t("mlp.up_proj.weight", [I, E]), t("mlp.down_proj.weight", [E, I]));
  } else {
    const L = c.routedExpertHiddenSize;
    const Is = c.numSharedExperts * c.moeIntermediateSize;
    specs.push(
      t("block_sparse_moe.gate.weight", [c.numExperts, E]),
      t("block_sparse_moe.gate.e_score_correction_bias", [c.numExperts], "F32"),
      t("block_sparse_moe.routed_expert_down_proj.weight", [L, E]),
      t("block_sparse_moe.routed_expert_up_proj.weight", [E, L]),
      t("block_sparse_moe.routed_expert_norm.weight", [L]),
    );
    if (Is > 0) {
      specs.push(
        t("block_sparse_moe.shared_experts.gate_proj.weight", [Is, E]),
        t("block_sparse_moe.shared_experts.up_proj.weight", [Is, E]),
        t("block_sparse_moe.shared_experts.down_proj.weight", [E, Is]),
      );
    }
  }
  return specs;
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
  specs.push(...modelTensors(config));
  return specs;
}
