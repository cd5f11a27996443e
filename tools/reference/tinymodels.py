"""Construction of the two tiny checkpoints in the released layout (model.md §10).

tiny13   : flat config of §10.1 (MXFP4 variant, moe_intermediate_size 64), init §10.2.
nested14 : nested (released-shape) config, 14 layers, two shards, its own recipe.
"""
import json
import os

import numpy as np

import mxfp4
from safetensors_np import (bf16_truncate, read_header, read_safetensors,
                            write_safetensors)

PFX = "language_model.model.layers.{}."

# ---------------------------------------------------------------- configs

TINY13_CONFIG = {
    "model_type": "kimi_k3",
    "hidden_size": 128,
    "num_hidden_layers": 13,
    "vocab_size": 256,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
    "kda_num_heads": 4,
    "kda_head_dim": 16,
    "short_conv_kernel_size": 4,
    "gate_lower_bound": -5.0,
    "num_attention_heads": 4,
    "q_lora_rank": 64,
    "kv_lora_rank": 32,
    "qk_nope_head_dim": 24,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "mla_use_output_gate": True,
    "num_experts": 8,
    "num_experts_per_token": 2,
    "num_shared_experts": 2,
    "routed_expert_hidden_size": 64,
    "moe_intermediate_size": 64,
    "routed_scaling_factor": 1.0,
    "moe_renormalize": True,
    "latent_moe_use_norm": True,
    "first_k_dense_replace": 1,
    "intermediate_size": 96,
    "attn_res_block_size": 3,
    "situ_beta": 4.0,
    "situ_linear_beta": 25.0,
    "full_attn_layers": [4, 8, 12, 13],
}

NESTED14_FULL_ATTN = [2, 6, 7, 11, 13, 14]  # one-based; irregular; includes the last layer


def nested14_config():
    L = 14
    return {
        "architectures": ["KimiK3ForConditionalGeneration"],
        "model_type": "kimi_k3",
        "quantization_config": {"group_size": 32},
        "vision_config": {"model_type": "moonvit_v2", "note": "ignored by a text engine"},
        "text_config": {
            "model_type": "kimi_k3_text",
            "hidden_size": 192,
            "num_hidden_layers": L,
            "vocab_size": 512,
            "rms_norm_eps": 1e-6,
            "tie_word_embeddings": False,
            "num_attention_heads": 4,
            "q_lora_rank": 48,
            "kv_lora_rank": 64,
            "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 16,
            "v_head_dim": 24,
            "mla_use_output_gate": True,
            "mla_use_nope": True,
            "num_experts": 16,
            "num_experts_per_token": 4,
            "num_shared_experts": 1,
            "routed_expert_hidden_size": 96,
            "moe_intermediate_size": 64,
            "routed_scaling_factor": 2.5,
            "moe_renormalize": True,
            "latent_moe_use_norm": True,
            "first_k_dense_replace": 2,
            "intermediate_size": 256,
            "attn_res_block_size": 4,
            "activation_situ_beta": 4.0,
            "activation_situ_linear_beta": 25.0,
            "num_nextn_predict_layers": 0,
            "num_expert_group": 1,
            "topk_group": 1,
            "moe_layer_freq": 1,
            "hidden_act": "situ",
            "moe_router_activation_func": "sigmoid",
            "linear_attn_config": {
                "num_heads": 3,
                "head_dim": 32,
                "short_conv_kernel_size": 4,
                "gate_lower_bound": -4.0,
                "use_full_rank_gate": True,
                "full_attn_layers": NESTED14_FULL_ATTN,
                "kda_layers": [i for i in range(1, L + 1) if i not in NESTED14_FULL_ATTN],
            },
        },
    }


# ---------------------------------------------------------------- parameter lists

def layer_param_shapes(c, l):
    """Ordered (suffix, shape) of the fresh model's per-layer parameters.

    A_log is [Hk] here (the fresh-model shape); it is padded to D at write time.
    Experts are listed as f32 matrices 'block_sparse_moe.experts.{e}.w{1,2,3}'.
    """
    E, P, D, Hk, Kc = c["E"], c["P"], c["D"], c["Hk"], c["Kc"]
    out = [("input_layernorm.weight", (E,)), ("post_attention_layernorm.weight", (E,)),
           ("self_attention_res_norm.weight", (E,)), ("self_attention_res_proj.weight", (1, E)),
           ("mlp_res_norm.weight", (E,)), ("mlp_res_proj.weight", (1, E))]
    a = "self_attn."
    if c["is_mla"][l]:
        H, dq, dn, dv, dr, Rq, Rkv = (c[x] for x in ("H", "dq", "dn", "dv", "dr", "Rq", "Rkv"))
        out += [(a + "q_a_proj.weight", (Rq, E)), (a + "q_a_layernorm.weight", (Rq,)),
                (a + "q_b_proj.weight", (H * dq, Rq)),
                (a + "kv_a_proj_with_mqa.weight", (Rkv + dr, E)),
                (a + "kv_a_layernorm.weight", (Rkv,)),
                (a + "kv_b_proj.weight", (H * (dn + dv), Rkv)),
                (a + "g_proj.weight", (H * dv, E)), (a + "o_proj.weight", (E, H * dv))]
    else:
        out += [(a + "q_proj.weight", (P, E)), (a + "k_proj.weight", (P, E)),
                (a + "v_proj.weight", (P, E)),
                (a + "q_conv1d.weight", (P, 1, Kc)), (a + "k_conv1d.weight", (P, 1, Kc)),
                (a + "v_conv1d.weight", (P, 1, Kc)),
                (a + "f_a_proj.weight", (D, E)), (a + "f_b_proj.weight", (P, D)),
                (a + "b_proj.weight", (Hk, E)), (a + "A_log", (Hk,)), (a + "dt_bias", (P,)),
                (a + "g_proj.weight", (P, E)), (a + "o_norm.weight", (D,)),
                (a + "o_proj.weight", (E, P))]
    if l < c["F"]:
        Id = c["Id"]
        out += [("mlp.gate_proj.weight", (Id, E)), ("mlp.up_proj.weight", (Id, E)),
                ("mlp.down_proj.weight", (E, Id))]
    else:
        Ne, Lam, I, Is = c["Ne"], c["Lam"], c["I"], c["Is"]
        m = "block_sparse_moe."
        out += [(m + "gate.weight", (Ne, E)), (m + "gate.e_score_correction_bias", (Ne,)),
                (m + "routed_expert_down_proj.weight", (Lam, E)),
                (m + "routed_expert_up_proj.weight", (E, Lam)),
                (m + "routed_expert_norm.weight", (Lam,)),
                (m + "shared_experts.gate_proj.weight", (Is, E)),
                (m + "shared_experts.up_proj.weight", (Is, E)),
                (m + "shared_experts.down_proj.weight", (E, Is))]
        for e in range(Ne):
            out += [(m + f"experts.{e}.w1", (I, Lam)), (m + f"experts.{e}.w2", (Lam, I)),
                    (m + f"experts.{e}.w3", (I, Lam))]
    return out


MODEL_PARAMS = ["language_model.model.embed_tokens.weight", "language_model.lm_head.weight",
                "language_model.model.norm.weight",
                "language_model.model.output_attn_res_norm.weight",
                "language_model.model.output_attn_res_proj.weight"]


def model_param_shapes(c):
    E, V = c["E"], c["V"]
    return list(zip(MODEL_PARAMS, [(V, E), (V, E), (E,), (E,), (1, E)]))


def all_param_shapes(c):
    out = []
    for l in range(c["L"]):
        out += [(PFX.format(l) + s, shp) for s, shp in layer_param_shapes(c, l)]
    return out + model_param_shapes(c)


def normal(rng, std, shape):
    return (rng.standard_normal(shape) * std).astype(np.float32)


def is_gate_or_up(name):
    return (name.endswith(".w1") or name.endswith(".w3")
            or name.endswith("shared_experts.gate_proj.weight")
            or name.endswith("shared_experts.up_proj.weight")
            or name.endswith("mlp.gate_proj.weight") or name.endswith("mlp.up_proj.weight"))


def init_recipe_10_2(c, seed):
    """model.md §10.2, steps 1-6 in order (4-6 layer by layer, 6 on KDA layers only)."""
    rng = np.random.default_rng(seed)
    shapes = all_param_shapes(c)
    p = {}
    for name, shp in shapes:                        # steps 1-3
        if len(shp) >= 2:
            p[name] = normal(rng, 0.02, shp)
        elif "weight" in name:                      # every RMSNorm gain
            p[name] = np.ones(shp, np.float32)
        else:
            p[name] = np.zeros(shp, np.float32)
    for l in range(c["L"]):                         # steps 4-6
        pre = PFX.format(l)
        for name, shp in shapes:
            if name.startswith(pre) and is_gate_or_up(name):
                p[name] = normal(rng, 1.2, shp)
        if l >= c["F"]:
            p[pre + "block_sparse_moe.gate.e_score_correction_bias"] = \
                np.linspace(-0.15, 0.15, c["Ne"]).astype(np.float32)
        if not c["is_mla"][l]:
            a = pre + "self_attn."
            p[a + "A_log"] = np.linspace(-0.4, 1.2, c["Hk"]).astype(np.float32)
            p[a + "dt_bias"] = normal(rng, 0.5, (c["P"],))
            for s in ("q", "k", "v"):
                p[a + f"{s}_conv1d.weight"] = normal(rng, 0.4, (c["P"], 1, c["Kc"]))
    return p


def init_recipe_nested14(c, seed):
    """Own recipe for nested14: like §10.2 but with NON-UNIT norm gains 1+N(0,0.2) (so a
    missing or misplaced gain is visible), stronger AttnRes pseudo-queries N(0,0.07)
    (non-uniform depth mixing; 0.2 made the f32 reference too chaotic), stronger MLA
    q/kv expansions N(0,0.15) (peaked attention), embedding N(0,1), other matrices
    N(0,0.05), shared/dense gate-up N(0,0.4), routed w1/w3 N(0,1.2) (SiTU caps engaged),
    w2 N(0,0.02), router N(0,0.02), bias linspace(-0.15,0.15), A_log linspace(-1,1.5,Hk)."""
    rng = np.random.default_rng(seed)
    shapes = all_param_shapes(c)
    p = {}
    for name, shp in shapes:
        if len(shp) >= 2:
            std = 0.05
            if name.endswith("_res_proj.weight"):
                std = 0.07   # depth softmax scores ~ N(0, 1): mixed, not chaotic
            elif name.endswith("q_b_proj.weight") or name.endswith("kv_b_proj.weight"):
                std = 0.15
            elif name.endswith("embed_tokens.weight"):
                std = 1.0
            elif name.endswith("gate.weight"):
                std = 0.02
            elif name.endswith(".w1") or name.endswith(".w3"):
                std = 1.2
            elif name.endswith(".w2"):
                std = 0.02
            elif is_gate_or_up(name):
                std = 0.4
            p[name] = normal(rng, std, shp)
        elif name.endswith(".weight"):
            p[name] = (1.0 + normal(rng, 0.2, shp)).astype(np.float32)
        else:
            p[name] = np.zeros(shp, np.float32)
    for l in range(c["L"]):
        pre = PFX.format(l)
        if l >= c["F"]:
            p[pre + "block_sparse_moe.gate.e_score_correction_bias"] = \
                np.linspace(-0.15, 0.15, c["Ne"]).astype(np.float32)
        if not c["is_mla"][l]:
            a = pre + "self_attn."
            p[a + "A_log"] = np.linspace(-1.0, 1.5, c["Hk"]).astype(np.float32)
            p[a + "dt_bias"] = normal(rng, 0.5, (c["P"],))
            for s in ("q", "k", "v"):
                p[a + f"{s}_conv1d.weight"] = normal(rng, 0.4, (c["P"], 1, c["Kc"]))
    return p


# ---------------------------------------------------------------- released-layout writer

def stored_dtype(name, arr):
    """BF16 for matrices except the router gate.weight and the [1,E] AttnRes projections;
    F32 for every vector, the rank-3 conv kernels, gate.weight and *_res_proj."""
    if arr.ndim == 2 and not name.endswith("gate.weight") and not name.endswith("_res_proj.weight"):
        return "BF16"
    return "F32"


def layer_tensors(c, p, l):
    """(trunk list, expert list) of (name, code, array) for layer l in released layout."""
    pre = PFX.format(l)
    trunk, experts = [], []
    for suffix, _ in layer_param_shapes(c, l):
        name = pre + suffix
        arr = p[name]
        if ".block_sparse_moe.experts." in name:
            continue
        if suffix.endswith("A_log"):
            arr = np.concatenate([arr, np.zeros(c["D"] - c["Hk"], np.float32)])  # pad to D
        code = stored_dtype(name, arr)
        trunk.append((name, code, bf16_truncate(arr) if code == "BF16" else arr.astype(np.float32)))
    trunk.sort(key=lambda t: t[0])
    if l >= c["F"]:
        for e in range(c["Ne"]):
            for wn in ("w1", "w2", "w3"):
                name = pre + f"block_sparse_moe.experts.{e}.{wn}"
                packed, scale = mxfp4.quantise(p[name], name)
                experts.append((name + ".weight_packed", "U8", packed))
                experts.append((name + ".weight_scale", "U8", scale))
    return trunk, experts


def model_tensors(p):
    out = []
    for name in MODEL_PARAMS:
        arr = p[name]
        code = stored_dtype(name, arr)
        out.append((name, code, bf16_truncate(arr) if code == "BF16" else arr))
    return out


def write_released(out_dir, config, c, p, layer_shards):
    """layer_shards: list of lists of layer indices, one list per shard; the model-level
    tensors go at the end of the last shard."""
    os.makedirs(out_dir, exist_ok=True)
    for f in os.listdir(out_dir):
        if f.endswith(".safetensors") or f.endswith(".json") or f.endswith(".f32"):
            os.remove(os.path.join(out_dir, f))
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    n = len(layer_shards)
    weight_map = {}
    written = {}
    shard_names = []
    for i, layers in enumerate(layer_shards):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        shard_names.append(fname)
        tensors = []
        runs = []
        for l in layers:
            trunk, experts = layer_tensors(c, p, l)
            runs.append(([t[0] for t in trunk], [t[0] for t in experts]))
            tensors += trunk + experts
        if i == n - 1:
            tensors += model_tensors(p)
        write_safetensors(os.path.join(out_dir, fname), tensors, metadata={"format": "pt"})
        for name, code, arr in tensors:
            weight_map[name] = fname
            written[name] = (code, arr)
        check_shard(os.path.join(out_dir, fname), tensors, runs)
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        total = sum(np.asarray(a).nbytes for _, a in written.values())
        json.dump({"metadata": {"total_size": int(total)}, "weight_map": weight_map}, f, indent=1)
        f.write("\n")
    return shard_names, written


def check_shard(path, tensors, runs):
    """Round-trip: read the shard back and compare every tensor bit for bit; check that
    each layer's trunk is one contiguous run and each expert's six tensors tile a run."""
    back = read_safetensors(path)
    assert list(back.keys()) == [t[0] for t in tensors], "tensor order changed on round trip"
    for name, code, arr in tensors:
        c2, a2 = back[name]
        assert c2 == code and a2.shape == arr.shape and a2.tobytes() == np.ascontiguousarray(arr).tobytes(), name
    hdr, _, _, _ = read_header(path)

    def contiguous(names):
        spans = sorted(tuple(hdr[nm]["data_offsets"]) for nm in names)
        total = sum(e - b for b, e in spans)
        return spans[-1][1] - spans[0][0] == total

    for trunk_names, expert_names in runs:
        assert contiguous(trunk_names), "trunk run not contiguous"
        end_trunk = max(hdr[nm]["data_offsets"][1] for nm in trunk_names)
        if expert_names:
            assert min(hdr[nm]["data_offsets"][0] for nm in expert_names) == end_trunk
            for e in range(0, len(expert_names), 6):
                assert contiguous(expert_names[e:e + 6])
