"""Deliberately WRONG variants of operators (model.md §7 silent traps).

Nothing here is part of the reference; it only produces the "what a trapped
implementation would output" arrays stored next to `want` in the op fixtures, so a
test can prove the fixture fails when the trap is sprung.
"""
import contextlib
import math

import numpy as np

import k3ref
from k3ref import attn_res, l2norm, rmsnorm, sigmoid, situ_glu


@contextlib.contextmanager
def patched(**fns):
    """Temporarily replace k3ref module functions by name."""
    old = {k: getattr(k3ref, k) for k in fns}
    try:
        for k, v in fns.items():
            setattr(k3ref, k, v)
        yield
    finally:
        for k, v in old.items():
            setattr(k3ref, k, v)


# ---- SiTU ----

def situ_capped_sigmoid_input(g, u, b1, b2):
    gc = b1 * np.tanh(g / b1)
    return (gc * sigmoid(gc)) * (b2 * np.tanh(u / b2))


def situ_no_caps(g, u, b1, b2):
    return (g * sigmoid(g)) * u


def situ_swapped_halves(g, u, b1, b2):
    return situ_glu(u, g, b1, b2)


# ---- L2Norm ----

def l2norm_mean(x):
    ms = np.mean(x * x, axis=-1, keepdims=True)
    return x * (1 / np.sqrt(ms + 1e-6))


# ---- KDA decay ----

def decay_per_channel_alog(z, A_log, dt_bias, Hk, D, gmin):
    """A_log indexed by the channel-within-head d (zeros beyond Hk, wrong heads below)."""
    P = z.shape[-1]
    a = np.exp(A_log[np.arange(P) % D])
    g = gmin * sigmoid(a * (z + dt_bias))
    return g, np.exp(g)


def decay_kimi_linear(z, A_log, dt_bias, Hk, D, gmin):
    """Kimi Linear form g = -exp(A) * softplus(z + dt_bias)."""
    a = np.repeat(np.exp(A_log[:Hk]), D, axis=-1)
    g = -a * np.log1p(np.exp(z + dt_bias))
    return g, np.exp(g)


def decay_dt_bias_after_scaling(z, A_log, dt_bias, Hk, D, gmin):
    a = np.repeat(np.exp(A_log[:Hk]), D, axis=-1)
    g = gmin * sigmoid(a * z + dt_bias)
    return g, np.exp(g)


# ---- KDA recurrence ----

def recurrence_output_before_write(S, q, k, v, alpha, beta):
    S = alpha[:, :, None] * S
    o = np.matmul(q[:, None, :], S)[:, 0, :]
    u = np.matmul(k[:, None, :], S)[:, 0, :]
    S = S + k[:, :, None] * (beta[:, None] * (v - u))[:, None, :]
    return S, o


def recurrence_read_undecayed(S, q, k, v, alpha, beta):
    u = np.matmul(k[:, None, :], S)[:, 0, :]
    S = alpha[:, :, None] * S
    S = S + k[:, :, None] * (beta[:, None] * (v - u))[:, None, :]
    o = np.matmul(q[:, None, :], S)[:, 0, :]
    return S, o


# ---- KDA layer pieces ----

def heads_l2norm_mean(qc, kc, vc, Hk, D):
    return l2norm_mean(qc.reshape(Hk, D)), l2norm_mean(kc.reshape(Hk, D)), vc.reshape(Hk, D)


def heads_l2norm_on_v(qc, kc, vc, Hk, D):
    return l2norm(qc.reshape(Hk, D)), l2norm(kc.reshape(Hk, D)), l2norm(vc.reshape(Hk, D))


def gated_output_gate_before_norm(o, o_norm, gate, eps):
    Hk, D = o.shape
    og = o * sigmoid(gate).reshape(Hk, D)
    return rmsnorm(og, o_norm, eps).reshape(Hk * D)


# ---- MLA ----

_correct_mla_scores = k3ref.mla_scores

def kv_latent_rope_normalised(C, w, Rkv, eps):
    """The latent RMSNorm applied over latent AND rope key (gain 1 on the rope part)."""
    wfull = np.concatenate([w, np.ones(C.shape[1] - Rkv, dtype=w.dtype)])
    n = rmsnorm(C, wfull, eps)
    return n[:, :Rkv], n[:, Rkv:]


def mla_scores_dropped_rope(qn, qr, kn, kr, scale):
    dn = qn.shape[-1]
    q = qn.transpose(1, 0, 2)
    k = kn.transpose(1, 0, 2)
    return np.matmul(q, k.transpose(0, 2, 1)) * (1 / math.sqrt(dn))


def mla_scores_scale_dn(qn, qr, kn, kr, scale):
    """Rope slots kept but the softmax scale taken as dn^-1/2 instead of (dn+dr)^-1/2."""
    return _correct_mla_scores(qn, qr, kn, kr, 1 / math.sqrt(qn.shape[-1]))


def rope(x, pos, base=10000.0):
    """Standard half-split (NeoX) rotary embedding over the last axis; x [N, ..., dr]."""
    dr = x.shape[-1]
    half = dr // 2
    inv = base ** (-np.arange(half, dtype=np.float64) / half)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]          # [N, half]
    shape = (len(pos),) + (1,) * (x.ndim - 2) + (half,)
    cos = np.cos(ang).reshape(shape).astype(x.dtype)
    sin = np.sin(ang).reshape(shape).astype(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def make_mla_scores_rotated(qpos):
    """Scores with RoPE applied to the query rope slots (positions qpos) and to the
    shared rope key (positions 0..N-1)."""
    def f(qn, qr, kn, kr, scale):
        N = kr.shape[0]
        return _correct_mla_scores(qn, rope(qr, qpos), kn, rope(kr, np.arange(N)), scale)
    return f


def mla_layer_no_causal_mask(X, W, cfg, cache):
    """MLA without the causal mask (prefill leaks future tokens)."""
    H, dn, dr, dv, Rkv, eps = cfg["H"], cfg["dn"], cfg["dr"], cfg["dv"], cfg["Rkv"], cfg["eps"]
    T = X.shape[0]
    cq = rmsnorm(X @ W["q_a_proj.weight"].T, W["q_a_layernorm.weight"], eps)
    Q = (cq @ W["q_b_proj.weight"].T).reshape(T, H, dn + dr)
    C = X @ W["kv_a_proj_with_mqa.weight"].T
    ckv, kr = rmsnorm(C[:, :Rkv], W["kv_a_layernorm.weight"], eps), C[:, Rkv:]
    KV = (ckv @ W["kv_b_proj.weight"].T).reshape(T, H, dn + dv)
    for key, val in (("c_kv", ckv), ("kr", kr), ("kn", KV[:, :, :dn]), ("v", KV[:, :, dn:])):
        cache[key] = np.concatenate([cache[key], val])
    scores = _correct_mla_scores(Q[:, :, :dn], Q[:, :, dn:], cache["kn"], cache["kr"],
                                 1 / math.sqrt(dn + dr))
    w = k3ref.softmax(scores, axis=-1)
    O = np.matmul(w, cache["v"].transpose(1, 0, 2)).transpose(1, 0, 2).reshape(T, H * dv)
    O = O * sigmoid(X @ W["g_proj.weight"].T)
    return O @ W["o_proj.weight"].T


# ---- Router / MoE ----

def make_router(selection="biased", weights="unbiased", renorm=True, rho=True):
    def router(X, W, cfg):
        s = sigmoid(X @ W["gate.weight"].T)
        c = s + W["gate.e_score_correction_bias"]
        sel = c if selection == "biased" else s
        idx = np.stack([k3ref.topk_lowest_index(sel[t], cfg["k"]) for t in range(X.shape[0])])
        w = np.take_along_axis(s if weights == "unbiased" else c, idx, axis=1)
        if renorm and cfg["renorm"]:
            w = w / (np.sum(w, axis=1, keepdims=True) + 1e-20)
        if rho:
            w = w * cfg["rho"]
        return idx, w
    return router


def latent_moe_variant(X, W, cfg, norm_per_expert=False, shared_weighted=False,
                       swap_w2_w3=False):
    b1, b2 = cfg["beta1"], cfg["beta2"]
    idx, wts = k3ref.router(X, W, cfg)
    Z = X @ W["routed_expert_down_proj.weight"].T
    W1, W2, W3 = W["experts.w1"], W["experts.w2"], W["experts.w3"]
    if swap_w2_w3:
        W2, W3 = W3, W2
    acc = np.zeros_like(Z)
    for t in range(X.shape[0]):
        for j in range(idx.shape[1]):
            e = idx[t, j]
            d = W2[e] @ situ_glu(W1[e] @ Z[t], W3[e] @ Z[t], b1, b2)
            if norm_per_expert:
                d = rmsnorm(d, W["routed_expert_norm.weight"], cfg["eps"])
            acc[t] = acc[t] + wts[t, j] * d
    n = acc if norm_per_expert else rmsnorm(acc, W["routed_expert_norm.weight"], cfg["eps"])
    y_r = n @ W["routed_expert_up_proj.weight"].T
    y_s = k3ref.dense_mlp(X, W["shared_experts.gate_proj.weight"], W["shared_experts.up_proj.weight"],
                          W["shared_experts.down_proj.weight"], b1, b2)
    if shared_weighted:
        y_s = y_s * wts[:, :1]
    return y_r + y_s


# ---- AttnRes ----

def attn_res_values_normalised(sources, phi, eps):
    Sx = np.stack(sources)
    r = 1 / np.sqrt(np.mean(Sx * Sx, axis=-1, keepdims=True) + eps)
    p = k3ref.softmax(np.sum((Sx * r) * phi, axis=-1), axis=0)
    return np.sum(p[:, :, None] * (Sx * r), axis=0)


def attn_res_keys_unnormalised(sources, phi, eps):
    Sx = np.stack(sources)
    p = k3ref.softmax(np.sum(Sx * phi, axis=-1), axis=0)
    return np.sum(p[:, :, None] * Sx, axis=0)


def attn_res_phi_on_values(sources, phi, eps):
    Sx = np.stack(sources)
    r = 1 / np.sqrt(np.mean(Sx * Sx, axis=-1, keepdims=True) + eps)
    p = k3ref.softmax(np.sum((Sx * r) * phi, axis=-1), axis=0)
    return np.sum(p[:, :, None] * (Sx * phi), axis=0)


# ---- decoder wiring (§6.9) ----

WIRING_TRAPS = {
    "wrong_push_before_aggregate": "at a boundary, r is pushed to B before the pre-attention "
                                   "aggregation, so the just-completed block is counted twice",
    "wrong_no_clear_at_boundary": "at a boundary, r is pushed but not cleared (r <- r + u)",
    "wrong_embedding_not_a_source": "layer 0 is not treated as a boundary: the embedding is "
                                    "never pushed as block b0",
    "wrong_residual_into_aggregate": "the attention/FFN outputs are added to the aggregated "
                                     "a / m instead of the running sum r",
    "wrong_running_sum_not_a_source": "the running partial sum r is not included as the last "
                                      "source of the aggregations",
    "wrong_values_normalised": "AttnRes values are RMS-normalised like the keys",
    "wrong_no_output_aggregator": "the model-level output aggregator is skipped (final norm "
                                  "reads r directly)",
}


def wired_layer(model, variant, l, h, B, st):
    """Decoder layer with one wiring trap (variant) or the correct wiring (None)."""
    cfg, Wl = model.cfg, model.layers[l]
    eps = cfg["eps"]
    ar = attn_res_values_normalised if variant == "wrong_values_normalised" else attn_res

    def sources(B, r):
        if variant == "wrong_running_sum_not_a_source" and B:
            return B
        return B + [r]

    boundary = l % cfg["S"] == 0
    if variant == "wrong_embedding_not_a_source" and l == 0:
        boundary = False
    r = h
    if boundary and variant == "wrong_push_before_aggregate":
        B = B + [r]
        a = ar(B + [r], Wl["phi_attn"], eps)
        r = None
    else:
        a = ar(sources(B, r), Wl["phi_attn"], eps) if B else h
        if boundary:
            B = B + [r]
            r = None if variant != "wrong_no_clear_at_boundary" else r
    u = model.attention(l, rmsnorm(a, Wl["in_ln"], eps), st)
    if variant == "wrong_residual_into_aggregate":
        r = a + u
    else:
        r = u if r is None else r + u
    m = ar(sources(B, r), Wl["phi_mlp"], eps)
    f = model.ffn(l, rmsnorm(m, Wl["post_ln"], eps))
    if variant == "wrong_residual_into_aggregate":
        return m + f, B
    return r + f, B


def wired_forward(model, variant, ids):
    st = model.new_state()
    h = model.embed[np.asarray(ids)]
    B, r = [], h
    for l in range(model.cfg["L"]):
        r, B = wired_layer(model, variant, l, r, B, st)
    eps = model.cfg["eps"]
    if variant == "wrong_no_output_aggregator":
        hout = r
    elif variant == "wrong_values_normalised":
        hout = attn_res_values_normalised(B + [r], model.phi_out, eps)
    elif variant == "wrong_running_sum_not_a_source":
        hout = attn_res(B, model.phi_out, eps)
    else:
        hout = attn_res(B + [r], model.phi_out, eps)
    return rmsnorm(hout, model.norm, eps) @ model.lm_head.T
