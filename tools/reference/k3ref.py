"""Independent numpy reference of the Kimi K3 forward pass.

Written from /work/shared/spec/model.md alone (section numbers below refer to it).
Every operator is evaluated on the exactly stored weights (bf16 widened by shift,
MXFP4 dequantised exactly) with float32 activations, like the spec's reference
(§6, "Reference:" notes). The dtype can be switched to float64 only to *estimate*
how far an f64-accumulating engine may be from this f32 reference.

Usage:
    m = Model("test/fixtures/tiny13")
    toks, logits = greedy(m, prompt_ids, 20)              # incremental decode
    toks2, _ = greedy(m, prompt_ids, 20, incremental=False)  # full recompute
"""
import glob
import json
import math
import os
import re

import numpy as np

import mxfp4
from safetensors_np import read_checkpoint_dir, to_f32

# --------------------------------------------------------------------------------------
# Configuration (§1)
# --------------------------------------------------------------------------------------

# symbol -> (nested location, flat key, type); nested location "lac.x" means
# text_config.linear_attn_config.x
CONFIG_FIELDS = [
    ("E", "hidden_size", "hidden_size", int),
    ("L", "num_hidden_layers", "num_hidden_layers", int),
    ("V", "vocab_size", "vocab_size", int),
    ("eps", "rms_norm_eps", "rms_norm_eps", float),
    ("Hk", "lac.num_heads", "kda_num_heads", int),
    ("D", "lac.head_dim", "kda_head_dim", int),
    ("Kc", "lac.short_conv_kernel_size", "short_conv_kernel_size", int),
    ("gmin", "lac.gate_lower_bound", "gate_lower_bound", float),
    ("H", "num_attention_heads", "num_attention_heads", int),
    ("Rq", "q_lora_rank", "q_lora_rank", int),
    ("Rkv", "kv_lora_rank", "kv_lora_rank", int),
    ("dn", "qk_nope_head_dim", "qk_nope_head_dim", int),
    ("dr", "qk_rope_head_dim", "qk_rope_head_dim", int),
    ("dv", "v_head_dim", "v_head_dim", int),
    ("Ne", "num_experts", "num_experts", int),
    ("k", "num_experts_per_token", "num_experts_per_token", int),
    ("Ns", "num_shared_experts", "num_shared_experts", int),
    ("Lam", "routed_expert_hidden_size", "routed_expert_hidden_size", int),
    ("I", "moe_intermediate_size", "moe_intermediate_size", int),
    ("rho", "routed_scaling_factor", "routed_scaling_factor", float),
    ("F", "first_k_dense_replace", "first_k_dense_replace", int),
    ("Id", "intermediate_size", "intermediate_size", int),
    ("S", "attn_res_block_size", "attn_res_block_size", int),
    ("beta1", "activation_situ_beta", "situ_beta", float),
    ("beta2", "activation_situ_linear_beta", "situ_linear_beta", float),
]
BOOL_FIELDS = [  # (symbol, key) -- same key in both shapes, default true
    ("mla_gate", "mla_use_output_gate"),
    ("renorm", "moe_renormalize"),
    ("latent_norm", "latent_moe_use_norm"),
]
ALIASES = {  # canonical <-> alias; either spelling accepted in either shape (§1.3)
    "activation_situ_beta": "situ_beta",
    "activation_situ_linear_beta": "situ_linear_beta",
    "num_heads": "kda_num_heads",
    "head_dim": "kda_head_dim",
}


class ConfigError(ValueError):
    pass


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _lookup(obj, key):
    """Value of key or its alias in obj; refuses two different spellings (§1.3)."""
    names = [key]
    for a, b in ALIASES.items():
        if key == a:
            names.append(b)
        elif key == b:
            names.append(a)
    found = [(n, obj[n]) for n in names if n in obj]
    if len(found) > 1 and any(v != found[0][1] for _, v in found):
        raise ConfigError(f"both spellings {[n for n, _ in found]} present with different values")
    return found[0][1] if found else None


def parse_config(root):
    """Parse a config dict (nested or flat) into a dict of symbols (§1)."""
    nested = "text_config" in root
    tc = root["text_config"] if nested else root
    lac = tc.get("linear_attn_config", {}) if nested else root
    errors = []
    cfg = {"nested": nested}
    for sym, nkey, fkey, typ in CONFIG_FIELDS:
        if nested:
            obj, key = (lac, nkey[4:]) if nkey.startswith("lac.") else (tc, nkey)
        else:
            obj, key = root, fkey
        v = _lookup(obj, key)
        if v is None or not _is_number(v):
            errors.append(f"{key}: {'missing' if v is None else 'not a number'}")
            continue
        if typ is int:
            if float(v) != int(v):
                errors.append(f"{key}: not an integer")
                continue
            v = int(v)
        cfg[sym] = typ(v)
    for sym, key in BOOL_FIELDS:
        v = tc.get(key, True)
        if not isinstance(v, bool):
            errors.append(f"{key}: not a boolean")
            continue
        cfg[sym] = v
    fal = lac.get("full_attn_layers") if nested else root.get("full_attn_layers")
    if not isinstance(fal, list) or not fal or not all(_is_number(x) and int(x) == x for x in fal):
        errors.append("full_attn_layers: missing, empty or not a list of integers")
    if errors:
        raise ConfigError("config errors: " + "; ".join(errors))
    L = cfg["L"]
    fal = [int(x) for x in fal]
    if any(x < 1 or x > L for x in fal):
        raise ConfigError(f"full_attn_layers is one-based 1..{L}: {fal}")
    if len(set(fal)) != len(fal):
        raise ConfigError("duplicate entries in full_attn_layers")
    if len(fal) >= L:
        raise ConfigError("no KDA layer left")
    kda = lac.get("kda_layers") if nested else root.get("kda_layers")
    if kda is not None:
        kda = [int(x) for x in kda]
        if set(kda) & set(fal) or set(kda) | set(fal) != set(range(1, L + 1)) or len(set(kda)) != len(kda):
            raise ConfigError("kda_layers and full_attn_layers are not complementary")
    if nested and lac.get("use_full_rank_gate", True) is not True:
        raise ConfigError("use_full_rank_gate must be true")
    for q in (root.get("quantization_config"), tc.get("quantization_config")):
        if isinstance(q, dict) and "group_size" in q and q["group_size"] != 32:
            raise ConfigError("quantization group size must be 32")
    if tc.get("num_nextn_predict_layers", 0) != 0:
        raise ConfigError("num_nextn_predict_layers must be 0")
    for key in ("num_expert_group", "topk_group", "moe_layer_freq"):
        if tc.get(key, 1) != 1:
            raise ConfigError(f"{key} must be 1")
    if tc.get("mla_use_nope", True) is not True:
        raise ConfigError("mla_use_nope must be true")
    if cfg["E"] <= 0 or L <= 0 or cfg["V"] <= 0:
        raise ConfigError("E, L, V must be positive")
    if not 1 <= cfg["k"] <= cfg["Ne"]:
        raise ConfigError("need 1 <= k <= Ne")
    if cfg["S"] <= 0 or cfg["Kc"] < 1 or not 0 <= cfg["F"] <= L:
        raise ConfigError("bad S, Kc or F")
    if cfg["Lam"] % 32 or cfg["I"] % 32:
        raise ConfigError("routed expert widths must be multiples of 32")
    cfg["full_attn_layers"] = fal
    cfg["tie"] = bool(tc.get("tie_word_embeddings", False))
    # eps and the other floats are used as f32 values (§1.2)
    for sym in ("eps", "gmin", "rho", "beta1", "beta2"):
        cfg[sym] = float(np.float32(cfg[sym]))
    cfg["P"] = cfg["Hk"] * cfg["D"]
    cfg["dq"] = cfg["dn"] + cfg["dr"]
    cfg["Is"] = cfg["Ns"] * cfg["I"]
    cfg["is_mla"] = [(l + 1) in fal for l in range(L)]
    return cfg


def load_config(ckpt_dir):
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        return parse_config(json.load(f))


# --------------------------------------------------------------------------------------
# Primitive operators (§6). Arrays are float32 (or float64 for the error estimate);
# Python float constants are "weak" in numpy 2 and take the array's dtype.
# --------------------------------------------------------------------------------------

def sigmoid(x):
    """σ(x) = 1/(1+exp(-x)); overflows safely to 0 for very negative x (§8.3)."""
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def silu(x):
    return x * sigmoid(x)


def rmsnorm(x, w, eps):
    """§6.2: y = w * (x * r), r = 1/sqrt(mean(x^2) + eps), over the last axis."""
    ms = np.mean(x * x, axis=-1, keepdims=True)
    r = 1 / np.sqrt(ms + eps)
    y = x * r
    return y if w is None else w * y


def l2norm(x):
    """§6.4: y = x / sqrt(sum(x^2) + 1e-6) over the last axis (SUM, not mean)."""
    ss = np.sum(x * x, axis=-1, keepdims=True)
    return x * (1 / np.sqrt(ss + 1e-6))


def situ_glu(g, u, beta1, beta2):
    """§6.3: ((β1·tanh(g/β1))·σ(g)) · (β2·tanh(u/β2)); σ takes the UNCAPPED gate."""
    a = (beta1 * np.tanh(g / beta1)) * sigmoid(g)
    b = beta2 * np.tanh(u / beta2)
    return a * b


def linear(x, w):
    """y[..., o] = Σ_i W[o][i] x[..., i]  (no bias anywhere in the model)."""
    return x @ w.T


def softmax(s, axis=-1):
    m = np.max(s, axis=axis, keepdims=True)
    e = np.exp(s - m)
    return e / np.sum(e, axis=axis, keepdims=True)


# ---- ShortConv (§6.5) ----

def shortconv_step(x, hist, w):
    """One token of the depthwise causal conv with fused SiLU.

    x: [P] current raw input; hist: [P, Kc-1] previous raw inputs, oldest first;
    w: [P, Kc] taps (tap Kc-1 meets the current input).
    Returns (y [P], new hist [P, Kc-1]).
    """
    Kc = w.shape[1]
    pre = w[:, Kc - 1] * x
    for j in range(Kc - 1):
        pre = pre + w[:, j] * hist[:, j]
    y = silu(pre)
    new_hist = np.concatenate([hist[:, 1:], x[:, None]], axis=1)
    return y, new_hist


# ---- KDA (§6.6) ----

def kda_decay(z, A_log, dt_bias, Hk, D, gmin):
    """Per-(head, channel) log-decay g and retention α from z = W_fb W_fa x (before dt_bias).

    a_h = exp(A_log[h]) (one value per HEAD; only A_log[0..Hk-1] are used);
    u_i = a_h (z_i + dt_bias_i); g_i = gmin σ(u_i); α_i = exp(g_i); i = h·D + d.
    """
    a = np.exp(A_log[:Hk])
    a_per_channel = np.repeat(a, D, axis=-1)
    u = a_per_channel * (z + dt_bias)
    g = gmin * sigmoid(u)
    alpha = np.exp(g)
    return g, alpha


def kda_recurrence_step(S, q, k, v, alpha, beta):
    """One token of the delta rule for all heads.

    S: [Hk, D(key i), D(value j)]; q (already scaled by D^-1/2), k, v, alpha: [Hk, D];
    beta: [Hk]. Order: decay -> read u from the DECAYED state -> delta write ->
    output from the UPDATED state. Returns (new S, o [Hk, D]).
    """
    S = alpha[:, :, None] * S                                   # (a) decay rows
    u = np.matmul(k[:, None, :], S)[:, 0, :]                    # (b) u_j = Σ_i k_i S[i][j]
    S = S + k[:, :, None] * (beta[:, None] * (v - u))[:, None, :]  # (c) k_i·(β·(v_j − u_j))
    o = np.matmul(q[:, None, :], S)[:, 0, :]                    # (d) o_j = Σ_i q'_i S[i][j]
    return S, o


def kda_heads_qkv(qc, kc, vc, Hk, D):
    """Step 3: per-head L2Norm of q and k; v is NOT normalised."""
    return (l2norm(qc.reshape(Hk, D)), l2norm(kc.reshape(Hk, D)), vc.reshape(Hk, D))


def kda_gated_output(o, o_norm, gate, eps):
    """Steps 7-8: head-wise RMSNorm with the shared o_norm gain FIRST, then σ(gate)."""
    Hk, D = o.shape
    return rmsnorm(o, o_norm, eps).reshape(Hk * D) * sigmoid(gate)


def new_kda_state(cfg, dtype=np.float32):
    Hk, D, P, Kc = cfg["Hk"], cfg["D"], cfg["P"], cfg["Kc"]
    return {"S": np.zeros((Hk, D, D), dtype),
            "conv_q": np.zeros((P, Kc - 1), dtype),
            "conv_k": np.zeros((P, Kc - 1), dtype),
            "conv_v": np.zeros((P, Kc - 1), dtype)}


def kda_layer(X, W, cfg, st):
    """KDA attention over T tokens X [T, E] (normalised hidden), updating state st in place.

    W: dict of suffix -> array ('q_proj.weight', ..., conv as [P, Kc], A_log [>=Hk]).
    """
    Hk, D, gmin, eps = cfg["Hk"], cfg["D"], cfg["gmin"], cfg["eps"]
    Qh = linear(X, W["q_proj.weight"])
    Kh = linear(X, W["k_proj.weight"])
    Vh = linear(X, W["v_proj.weight"])
    beta = sigmoid(linear(X, W["b_proj.weight"]))                  # [T, Hk]
    Z = linear(linear(X, W["f_a_proj.weight"]), W["f_b_proj.weight"])  # [T, P]
    G = linear(X, W["g_proj.weight"])                              # raw gate [T, P]
    qscale = 1 / math.sqrt(D)
    Y = []
    for t in range(X.shape[0]):
        qc, st["conv_q"] = shortconv_step(Qh[t], st["conv_q"], W["q_conv1d.weight"])
        kc, st["conv_k"] = shortconv_step(Kh[t], st["conv_k"], W["k_conv1d.weight"])
        vc, st["conv_v"] = shortconv_step(Vh[t], st["conv_v"], W["v_conv1d.weight"])
        q, k, v = kda_heads_qkv(qc, kc, vc, Hk, D)
        q = q * qscale
        _, alpha = kda_decay(Z[t], W["A_log"], W["dt_bias"], Hk, D, gmin)
        st["S"], o = kda_recurrence_step(st["S"], q, k, v, alpha.reshape(Hk, D), beta[t])
        Y.append(kda_gated_output(o, W["o_norm.weight"], G[t], eps))
    return linear(np.stack(Y), W["o_proj.weight"])


# ---- MLA (§6.7) ----

def new_mla_cache(cfg, dtype=np.float32):
    H, dn, dv, dr, Rkv = cfg["H"], cfg["dn"], cfg["dv"], cfg["dr"], cfg["Rkv"]
    return {"c_kv": np.zeros((0, Rkv), dtype), "kr": np.zeros((0, dr), dtype),
            "kn": np.zeros((0, H, dn), dtype), "v": np.zeros((0, H, dv), dtype)}


def mla_kv_latent(C, w, Rkv, eps):
    """Step 3: RMSNorm on the latent part only; the rope-slot key is raw (no norm, no rotation)."""
    return rmsnorm(C[:, :Rkv], w, eps), C[:, Rkv:]


def mla_scores(qn, qr, kn, kr, scale):
    """Step 5: score[h, t, s] = (qn_h·kn_{h,s} + qr_h·kr_s) · dq^-1/2.

    qn [T,H,dn], qr [T,H,dr], kn [N,H,dn], kr [N,dr] (rope key shared by all heads).
    """
    H = qn.shape[1]
    q = np.concatenate([qn, qr], axis=-1).transpose(1, 0, 2)               # [H, T, dq]
    krh = np.broadcast_to(kr[:, None, :], (kr.shape[0], H, kr.shape[1]))
    k = np.concatenate([kn, krh], axis=-1).transpose(1, 0, 2)              # [H, N, dq]
    return np.matmul(q, k.transpose(0, 2, 1)) * scale


def mla_layer(X, W, cfg, cache):
    """Gated NoPE MLA over T tokens X [T, E] at positions len(cache)..len(cache)+T-1.

    Appends the new positions to the cache (normalised latent, rope key, and the
    expanded per-head key content and value) and attends causally.
    """
    H, dn, dr, dv, Rkv, eps = cfg["H"], cfg["dn"], cfg["dr"], cfg["dv"], cfg["Rkv"], cfg["eps"]
    T = X.shape[0]
    pos0 = cache["kr"].shape[0]
    cq = rmsnorm(linear(X, W["q_a_proj.weight"]), W["q_a_layernorm.weight"], eps)
    Q = linear(cq, W["q_b_proj.weight"]).reshape(T, H, dn + dr)
    C = linear(X, W["kv_a_proj_with_mqa.weight"])
    ckv, kr = mla_kv_latent(C, W["kv_a_layernorm.weight"], Rkv, eps)
    KV = linear(ckv, W["kv_b_proj.weight"]).reshape(T, H, dn + dv)
    cache["c_kv"] = np.concatenate([cache["c_kv"], ckv])
    cache["kr"] = np.concatenate([cache["kr"], kr])
    cache["kn"] = np.concatenate([cache["kn"], KV[:, :, :dn]])
    cache["v"] = np.concatenate([cache["v"], KV[:, :, dn:]])
    N = pos0 + T
    scale = 1 / math.sqrt(dn + dr)
    scores = mla_scores(Q[:, :, :dn], Q[:, :, dn:], cache["kn"], cache["kr"], scale)  # [H,T,N]
    causal = np.arange(N)[None, :] > (pos0 + np.arange(T))[:, None]               # [T, N]
    scores = np.where(causal[None], -np.inf, scores)
    w = softmax(scores, axis=-1)
    O = np.matmul(w, cache["v"].transpose(1, 0, 2))                 # [H, T, dv]
    O = O.transpose(1, 0, 2).reshape(T, H * dv)                     # head-major
    if cfg["mla_gate"]:
        O = O * sigmoid(linear(X, W["g_proj.weight"]))
    return linear(O, W["o_proj.weight"])


# ---- Router and LatentMoE (§6.10-6.11), dense MLP (§6.12) ----

def topk_lowest_index(c, k):
    """Indices of the k largest values, descending; ties to the LOWEST index."""
    return np.argsort(-c, kind="stable")[:k]


def router(X, W, cfg):
    """Returns (T_idx [T, k] in descending biased-score order, weights [T, k])."""
    s = sigmoid(linear(X, W["gate.weight"]))                        # unbiased scores
    c = s + W["gate.e_score_correction_bias"]                       # biased, selection only
    idx = np.stack([topk_lowest_index(c[t], cfg["k"]) for t in range(X.shape[0])])
    w = np.take_along_axis(s, idx, axis=1)                          # UNBIASED scores
    if cfg["renorm"]:
        w = w / (np.sum(w, axis=1, keepdims=True) + 1e-20)
    w = w * cfg["rho"]
    return idx, w


def latent_moe(X, W, cfg):
    """Stable LatentMoE over T tokens X [T, E] (the post-attention-normalised hidden)."""
    b1, b2 = cfg["beta1"], cfg["beta2"]
    idx, wts = router(X, W, cfg)
    Z = linear(X, W["routed_expert_down_proj.weight"])            # [T, Λ]
    W1, W2, W3 = W["experts.w1"], W["experts.w2"], W["experts.w3"]  # [Ne,I,Λ],[Ne,Λ,I],[Ne,I,Λ]
    acc = np.zeros_like(Z)
    for j in range(idx.shape[1]):                                   # in top-k order
        d = np.zeros_like(Z)
        for e in np.unique(idx[:, j]):                              # batch tokens per expert
            rows = np.nonzero(idx[:, j] == e)[0]
            z = Z[rows]
            t = situ_glu(linear(z, W1[e]), linear(z, W3[e]), b1, b2)
            d[rows] = linear(t, W2[e])
        acc = acc + wts[:, j:j + 1] * d
    n = rmsnorm(acc, W["routed_expert_norm.weight"], cfg["eps"]) if cfg["latent_norm"] else acc
    y_r = linear(n, W["routed_expert_up_proj.weight"])
    y_s = dense_mlp(X, W["shared_experts.gate_proj.weight"], W["shared_experts.up_proj.weight"],
                    W["shared_experts.down_proj.weight"], b1, b2)
    return y_r + y_s


def dense_mlp(X, Wg, Wu, Wd, beta1, beta2):
    return linear(situ_glu(linear(X, Wg), linear(X, Wu), beta1, beta2), Wd)


# ---- Attention Residuals (§6.8) ----

def attn_res(sources, phi, eps):
    """Aggregate sources (list of [T, E]) with folded φ = norm ⊙ proj.

    Keys are RMS-normalised (no gain; the gain is folded into φ), values are RAW.
    """
    Sx = np.stack(sources)                                           # [n, T, E]
    r = 1 / np.sqrt(np.mean(Sx * Sx, axis=-1, keepdims=True) + eps)
    score = np.sum((Sx * r) * phi, axis=-1)                          # [n, T]
    p = softmax(score, axis=0)
    out = p[0][:, None] * Sx[0]
    for i in range(1, len(sources)):                                 # source order
        out = out + p[i][:, None] * Sx[i]
    return out


# --------------------------------------------------------------------------------------
# Checkpoint binding and the model (§3, §6.9, §6.13, §9)
# --------------------------------------------------------------------------------------

PFX = "language_model.model.layers.{}."
EXPERT_RE = re.compile(r"\.block_sparse_moe\.experts\.(\d+)\.")


def checkpoint_files(ckpt_dir):
    files = sorted(glob.glob(os.path.join(ckpt_dir, "model-*.safetensors")))
    if not files:
        raise FileNotFoundError(f"no model-*.safetensors in {ckpt_dir}")
    return files


def bind_layer(cfg, raw, l, dtype=np.float32):
    """Bind layer l from raw tensors {name: (dtype_code, array)} in the released layout.

    Checks element counts against the config, widens to f32 exactly, takes the first
    Hk values of A_log, folds the AttnRes vectors (φ = norm ⊙ proj, once, in f32) and
    dequantises the routed experts exactly. Returns a dict of arrays.
    """
    E, P, D, Hk, Kc = cfg["E"], cfg["P"], cfg["D"], cfg["Hk"], cfg["Kc"]
    get = _getter(raw)
    p = PFX.format(l)
    W = {"in_ln": get(p + "input_layernorm.weight", (E,)),
         "post_ln": get(p + "post_attention_layernorm.weight", (E,)),
         "phi_attn": get(p + "self_attention_res_norm.weight", (E,))
         * get(p + "self_attention_res_proj.weight", (E,)),
         "phi_mlp": get(p + "mlp_res_norm.weight", (E,)) * get(p + "mlp_res_proj.weight", (E,))}
    a = p + "self_attn."
    if cfg["is_mla"][l]:
        H, dq, dn, dv, dr, Rq, Rkv = (cfg[x] for x in ("H", "dq", "dn", "dv", "dr", "Rq", "Rkv"))
        shapes = {"q_a_proj.weight": (Rq, E), "q_a_layernorm.weight": (Rq,),
                  "q_b_proj.weight": (H * dq, Rq), "kv_a_proj_with_mqa.weight": (Rkv + dr, E),
                  "kv_a_layernorm.weight": (Rkv,), "kv_b_proj.weight": (H * (dn + dv), Rkv),
                  "o_proj.weight": (E, H * dv)}
        if cfg["mla_gate"]:
            shapes["g_proj.weight"] = (H * dv, E)
    else:
        shapes = {"q_proj.weight": (P, E), "k_proj.weight": (P, E), "v_proj.weight": (P, E),
                  "q_conv1d.weight": (P, Kc), "k_conv1d.weight": (P, Kc), "v_conv1d.weight": (P, Kc),
                  "f_a_proj.weight": (D, E), "f_b_proj.weight": (P, D), "b_proj.weight": (Hk, E),
                  "dt_bias": (P,), "g_proj.weight": (P, E), "o_norm.weight": (D,),
                  "o_proj.weight": (E, P)}
        if a + "A_log" not in raw:
            raise KeyError(f"missing tensor {a}A_log")
        alog = to_f32(*raw[a + "A_log"]).reshape(-1)
        if alog.size < Hk:
            raise ValueError(f"{a}A_log has {alog.size} < Hk elements")
        if np.any(alog[Hk:] != 0):
            print(f"warning: {a}A_log padding is not zero")
        W["attn.A_log"] = alog[:Hk].copy()
    for s, shp in shapes.items():
        W["attn." + s] = get(a + s, shp)
    if l < cfg["F"]:
        f = p + "mlp."
        Id = cfg["Id"]
        for s, shp in {"gate_proj.weight": (Id, E), "up_proj.weight": (Id, E),
                       "down_proj.weight": (E, Id)}.items():
            W["ffn." + s] = get(f + s, shp)
    else:
        f = p + "block_sparse_moe."
        Ne, Lam, I, Is = cfg["Ne"], cfg["Lam"], cfg["I"], cfg["Is"]
        for s, shp in {"gate.weight": (Ne, E), "gate.e_score_correction_bias": (Ne,),
                       "routed_expert_down_proj.weight": (Lam, E),
                       "routed_expert_up_proj.weight": (E, Lam),
                       "routed_expert_norm.weight": (Lam,),
                       "shared_experts.gate_proj.weight": (Is, E),
                       "shared_experts.up_proj.weight": (Is, E),
                       "shared_experts.down_proj.weight": (E, Is)}.items():
            W["ffn." + s] = get(f + s, shp)
        for wn, (rows, cols) in (("w1", (I, Lam)), ("w2", (Lam, I)), ("w3", (I, Lam))):
            mats = []
            for e in range(Ne):
                q = f + f"experts.{e}.{wn}."
                if q + "weight_packed" not in raw or q + "weight_scale" not in raw:
                    raise KeyError(f"missing expert tensor {q}weight_packed/_scale")
                cp, packed = raw[q + "weight_packed"]
                cs, scale = raw[q + "weight_scale"]
                if cp != "U8" or cs != "U8" or packed.shape != (rows, cols // 2) \
                        or scale.shape != (rows, cols // 32):
                    raise ValueError(f"{q}: bad MXFP4 tensor shapes/dtypes")
                mats.append(mxfp4.decode(packed, scale))
            W["ffn.experts." + wn] = np.stack(mats)
    return {k: v.astype(dtype) for k, v in W.items()}


def _getter(raw):
    def get(name, shape):
        if name not in raw:
            raise KeyError(f"missing tensor {name}")
        code, arr = raw[name]
        if int(np.prod(arr.shape)) != int(np.prod(shape)):
            raise ValueError(f"{name}: shape {arr.shape}, expected {shape}")
        return to_f32(code, arr).reshape(shape)
    return get


class Model:
    def __init__(self, ckpt_dir=None, dtype=np.float32, cfg_override=None):
        if ckpt_dir is None:   # empty shell, filled in by the caller (op fixtures)
            return
        self.cfg = cfg = load_config(ckpt_dir)
        if cfg_override:
            cfg.update(cfg_override)
        self.dtype = dtype
        raw = read_checkpoint_dir(checkpoint_files(ckpt_dir))
        get = _getter(raw)
        E, V = cfg["E"], cfg["V"]
        self.layers = [bind_layer(cfg, raw, l, dtype) for l in range(cfg["L"])]
        self.embed = get("language_model.model.embed_tokens.weight", (V, E)).astype(dtype)
        if "language_model.lm_head.weight" in raw:
            self.lm_head = get("language_model.lm_head.weight", (V, E)).astype(dtype)
        elif cfg["tie"]:
            self.lm_head = self.embed
        else:
            raise KeyError("missing tensor language_model.lm_head.weight")
        self.norm = get("language_model.model.norm.weight", (E,)).astype(dtype)
        self.phi_out = (get("language_model.model.output_attn_res_norm.weight", (E,))
                        * get("language_model.model.output_attn_res_proj.weight", (E,))).astype(dtype)

    # ---- per-sequence state (§9) ----
    def new_state(self):
        st = {"pos": 0, "layers": []}
        for l in range(self.cfg["L"]):
            st["layers"].append(new_mla_cache(self.cfg, self.dtype) if self.cfg["is_mla"][l]
                                else new_kda_state(self.cfg, self.dtype))
        return st

    # ---- modules ----
    def attention(self, l, X, st):
        Wl = self.layers[l]
        W = {k[5:]: v for k, v in Wl.items() if k.startswith("attn.")}
        if self.cfg["is_mla"][l]:
            return mla_layer(X, W, self.cfg, st["layers"][l])
        return kda_layer(X, W, self.cfg, st["layers"][l])

    def ffn(self, l, X):
        Wl = self.layers[l]
        cfg = self.cfg
        if l < cfg["F"]:
            return dense_mlp(X, Wl["ffn.gate_proj.weight"], Wl["ffn.up_proj.weight"],
                             Wl["ffn.down_proj.weight"], cfg["beta1"], cfg["beta2"])
        W = {k[4:]: v for k, v in Wl.items() if k.startswith("ffn.")}
        return latent_moe(X, W, cfg)

    def decoder_layer(self, l, h, B, st):
        """§6.9 wiring for layer l. h: layer input [T, E]; B: list of block reps.

        Returns (r, B) after the layer.
        """
        cfg, Wl = self.cfg, self.layers[l]
        r = h                                                          # 1
        a = attn_res(B + [r], Wl["phi_attn"], cfg["eps"]) if B else h  # 2
        if l % cfg["S"] == 0:                                          # 3 boundary
            B = B + [r]
            r = None
        u = self.attention(l, rmsnorm(a, Wl["in_ln"], cfg["eps"]), st)  # 4
        r = u if r is None else r + u                                  # 5
        m = attn_res(B + [r], Wl["phi_mlp"], cfg["eps"])               # 6
        f = self.ffn(l, rmsnorm(m, Wl["post_ln"], cfg["eps"]))         # 7
        return r + f, B                                                # 8

    def output_head(self, r, B):
        h_out = attn_res(B + [r], self.phi_out, self.cfg["eps"])
        n = rmsnorm(h_out, self.norm, self.cfg["eps"])
        return linear(n, self.lm_head)

    def forward(self, ids, st):
        """Run T >= 1 new tokens with the carried state; returns logits [T, V]."""
        h = self.embed[np.asarray(ids, dtype=np.int64)]
        B = []
        r = h
        for l in range(self.cfg["L"]):
            r, B = self.decoder_layer(l, r, B, st)
        st["pos"] += len(ids)
        return self.output_head(r, B)


def greedy(model, prompt, n, incremental=True):
    """Greedy decode n tokens (argmax, ties to the lowest id).

    incremental=True: prefill the prompt once, then one token per call with carried
    state. incremental=False: full recompute of the whole prefix from zeroed state at
    every step. Returns (tokens, final-position logits per step [n, V]).
    """
    toks, rows = [], []
    if incremental:
        st = model.new_state()
        logits = model.forward(prompt, st)[-1]
        for i in range(n):
            t = int(np.argmax(logits))
            toks.append(t)
            rows.append(logits)
            if i + 1 < n:
                logits = model.forward([t], st)[-1]
    else:
        ids = list(prompt)
        for _ in range(n):
            logits = model.forward(ids, model.new_state())[-1]
            t = int(np.argmax(logits))
            toks.append(t)
            rows.append(logits)
            ids.append(t)
    return toks, np.stack(rows)


def top2_gap(logits):
    """Top-1 minus top-2 logit (per row)."""
    srt = np.sort(np.asarray(logits, dtype=np.float64), axis=-1)
    return srt[..., -1] - srt[..., -2]
