#!/usr/bin/env python3
"""Regenerate everything under test/fixtures (one command, fixed seeds):

    python3 tools/reference/make_fixtures.py

Writes test/fixtures/tiny13/, test/fixtures/nested14/ and test/fixtures/ops/*.json. (The demo
model in assets/demo/ is trained and exported by tools/train-demo, not written here.) See tools/reference/README.md for the formats and what each fixture proves.
"""
import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # single-threaded BLAS: one fixed summation order

import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import k3ref  # noqa: E402
import mxfp4  # noqa: E402
import tinymodels as tm  # noqa: E402
import traps  # noqa: E402
from k3ref import Model, greedy, top2_gap  # noqa: E402
from safetensors_np import bf16_to_f32, bf16_truncate, round_to_bf16_values  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
FIX = os.path.join(REPO, "test", "fixtures")
OPS = os.path.join(FIX, "ops")

ATOL, RTOL = 1e-5, 1e-4          # op-fixture tolerance (model.md §8.5)
MIN_TRAP_SEPARATION = 100.0      # want vs wrong: >= 100x the tolerance somewhere
MIN_GAP = 2e-3                   # required top-1 vs top-2 logit gap for exact-token gates
EPS5 = float(np.float32(1e-5))   # rms_norm_eps as used (f32)
F32 = np.float32


# ------------------------------------------------------------------ JSON helpers

def tj(a, dtype="f32"):
    """Tensor to JSON: {"dtype", "shape", "data": flat row-major list}."""
    a = np.asarray(a)
    if dtype == "f32":
        a = a.astype(np.float32)
        assert np.all(np.isfinite(a)), "non-finite value in a fixture"
        data = [float(v) for v in a.ravel().tolist()]   # exact f32 value, shortest double repr
    else:
        npt = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "i32": np.int32}[dtype]
        assert np.all(a == a.astype(npt)), "integer out of range"
        data = [int(v) for v in a.astype(np.int64).ravel().tolist()]
    return {"dtype": dtype, "shape": [int(s) for s in a.shape], "data": data}


def bfv(a):
    """bf16-representable f32 values (truncation), for fixture matrices."""
    return round_to_bf16_values(np.asarray(a, dtype=np.float32))


def separation(want, wrong):
    """max over all outputs of |want - wrong| / (ATOL + RTOL |want|); inf if shapes or
    integer outputs (index sets) differ."""
    best = 0.0
    for k, w in want.items():
        x = wrong[k]
        w, x = np.asarray(w), np.asarray(x)
        if w.shape != x.shape:
            return math.inf
        if w.dtype.kind in "iu":
            if k.endswith("idx"):
                if any(set(a) != set(b) for a, b in zip(w.reshape(len(w), -1), x.reshape(len(x), -1))):
                    return math.inf
            elif np.any(w != x):
                return math.inf
            continue
        w64, x64 = w.astype(np.float64), x.astype(np.float64)
        best = max(best, float(np.max(np.abs(w64 - x64) / (ATOL + RTOL * np.abs(w64)))))
    return best


def save_op(name, fx, want, wrongs, dtypes=None, min_sep=MIN_TRAP_SEPARATION, tol_desc=None):
    """fx: dict with op, spec, description, dims, inputs/weights (already JSON).
    want: {name: array}; wrongs: {wrong_key: (description, {name: array})}."""
    dtypes = dtypes or {}
    fx = dict(fx)
    fx.setdefault("tolerance", {"atol": ATOL, "rtol": RTOL})
    fx["want"] = {k: tj(v, dtypes.get(k, "f32")) for k, v in want.items()}
    fx["traps"] = []
    for key, (desc, out) in wrongs.items():
        assert key.startswith("wrong_")
        sep = separation(want, out)
        assert sep >= min_sep, f"{name}: trap {key} not separated from want ({sep:.3g}x tolerance)"
        fx["traps"].append({"key": key, "description": desc,
                            "separation": "inf" if math.isinf(sep) else float(f"{sep:.4g}")})
        fx[key] = {k: tj(v, dtypes.get(k, "f32")) for k, v in out.items()}
    with open(os.path.join(OPS, name + ".json"), "w") as f:
        json.dump(fx, f, separators=(",", ":"))
        f.write("\n")
    return fx


# ------------------------------------------------------------------ op fixtures

def fx_rmsnorm():
    rng = np.random.default_rng(101)
    x = (rng.standard_normal((4, 128)) * np.array([[1.0], [0.01], [30.0], [0.001]])).astype(F32)
    w = (1 + 0.1 * rng.standard_normal(128)).astype(F32)
    y = k3ref.rmsnorm(x, w, EPS5)
    ms = np.mean(x * x, axis=-1, keepdims=True)
    wrong = w * (x * (1 / (np.sqrt(ms) + F32(EPS5))))
    save_op("rmsnorm", {
        "op": "rmsnorm", "spec": "model.md §6.2",
        "description": "y[r][i] = w[i] * (x[r][i] * r_r), r_r = 1/sqrt(mean_i x[r][i]^2 + eps). "
                       "Row scales 1, 0.01, 30, 0.001 (last row: eps dominates).",
        "dims": {"rows": 4, "n": 128, "eps": EPS5},
        "inputs": {"x": tj(x), "w": tj(w)},
    }, {"y": y}, {"wrong_eps_outside_sqrt": ("r = 1/(sqrt(ms) + eps)", {"y": wrong})})


def fx_l2norm():
    rng = np.random.default_rng(102)
    x = (rng.standard_normal((4, 16)) * np.array([[1.0], [1e-3], [10.0], [100.0]])).astype(F32)
    save_op("l2norm", {
        "op": "l2norm", "spec": "model.md §6.4",
        "description": "y[r][i] = x[r][i] * (1/sqrt(sum_j x[r][j]^2 + 1e-6)); SUM of squares. "
                       "Row 1 (scale 1e-3) makes the 1e-6 matter.",
        "dims": {"rows": 4, "n": 16, "eps": 1e-6},
        "inputs": {"x": tj(x)},
    }, {"y": k3ref.l2norm(x)},
        {"wrong_mean_instead_of_sum": ("mean of squares instead of the sum (scales q, k by sqrt(D))",
                                       {"y": traps.l2norm_mean(x)})})


def fx_situ():
    mags = np.array([0.1, 1.0, 4.0, 25.0, 100.0, 1000.0])
    fg = np.array([1.0, 0.9, 0.5, 0.25, -0.1, -0.5, 1.5, 2.0])
    fu = np.array([1.0, 0.3, -0.7, 1.2, 0.5, -1.0, 0.8, 2.0])
    g = (mags[:, None] * fg[None, :]).astype(F32)          # gate +m
    u = (-mags[:, None] * fu[None, :]).astype(F32)         # up   -m
    x = np.concatenate([g, u], axis=1)
    b1, b2 = 4.0, 25.0
    y = k3ref.situ_glu(g, u, b1, b2)
    assert np.all(np.abs(y) <= 100) and np.max(np.abs(y)) == 100.0, "SiTU bound not reached"
    save_op("situ_glu", {
        "op": "situ_glu", "spec": "model.md §6.3",
        "description": "x[r] = [gate(8) | up(8)]; y[r][i] = ((b1*tanh(g/b1))*sigmoid(g)) * "
                       "(b2*tanh(u/b2)), sigmoid of the UNCAPPED gate. Row magnitudes "
                       "0.1, 1, 4, 25, 100, 1000 (gate +m, up -m): both caps saturate, |y| reaches "
                       "exactly 100 (y[5][0] = -100).",
        "dims": {"rows": 6, "n": 8, "beta1": b1, "beta2": b2},
        "inputs": {"x": tj(x)},
    }, {"y": y}, {
        "wrong_capped_sigmoid_input": ("sigmoid applied to the capped gate",
                                       {"y": traps.situ_capped_sigmoid_input(g, u, b1, b2)}),
        "wrong_no_caps": ("caps omitted: SiLU(g) * u", {"y": traps.situ_no_caps(g, u, b1, b2)}),
        "wrong_swapped_halves": ("[up | gate] instead of [gate | up]",
                                 {"y": traps.situ_swapped_halves(g, u, b1, b2)}),
    })


def _conv_run(x, w, hist, silu_after=True, silu_before=False):
    ys = []
    for t in range(x.shape[0]):
        xt = k3ref.silu(x[t]) if silu_before else x[t]
        Kc = w.shape[1]
        pre = w[:, Kc - 1] * xt
        for j in range(Kc - 1):
            pre = pre + w[:, j] * hist[:, j]
        ys.append(k3ref.silu(pre) if silu_after else pre)
        hist = np.concatenate([hist[:, 1:], xt[:, None]], axis=1)
    return np.stack(ys), hist


def fx_shortconv():
    rng = np.random.default_rng(103)
    P, Kc = 16, 4
    w3 = (0.4 * rng.standard_normal((P, 1, Kc))).astype(F32)
    w = w3.reshape(P, Kc)
    x = rng.standard_normal((6, P)).astype(F32)
    h = np.zeros((P, Kc - 1), F32)
    ys = []
    for t in range(5):
        y, h = k3ref.shortconv_step(x[t], h, w)
        ys.append(y)
    h5 = h
    y6, h6 = k3ref.shortconv_step(x[5], h5, w)
    want = {"y": np.stack(ys + [y6]), "hist_after5": h5, "hist_after6": h6}

    def variant(wv, **kw):
        ya, ha = _conv_run(x[:5], wv, np.zeros((P, Kc - 1), F32), **kw)
        yb, hb = _conv_run(x[5:], wv, ha, **kw)
        return {"y": np.concatenate([ya, yb]), "hist_after5": ha, "hist_after6": hb}

    yz, hz = _conv_run(x[5:], w, np.zeros((P, Kc - 1), F32))
    save_op("shortconv", {
        "op": "shortconv", "spec": "model.md §6.5",
        "description": "Depthwise causal conv + SiLU per channel c: pre = w[c][Kc-1]*x_t + "
                       "sum_{j<Kc-1} w[c][j]*h[c][j]; y = SiLU(pre); h <- (h[1..], x_t) (raw input). "
                       "Steps 0-4 from zero history; step 5 from the carried history hist_after5.",
        "dims": {"P": P, "Kc": Kc, "steps": 6},
        "inputs": {"w": tj(w3), "x": tj(x)},
    }, want, {
        "wrong_reversed_taps": ("tap 0 applied to the current input", variant(w[:, ::-1].copy())),
        "wrong_silu_before_conv": ("SiLU on the input, none after", variant(w, silu_after=False, silu_before=True)),
        "wrong_no_silu": ("SiLU missing", variant(w, silu_after=False)),
        "wrong_history_not_carried": ("step 5 restarted from zero history",
                                      {"y": np.concatenate([want["y"][:5], yz]),
                                       "hist_after5": h5, "hist_after6": hz}),
    })


def fx_kda_decay():
    rng = np.random.default_rng(104)
    Hk, D, gmin = 4, 16, -5.0
    P = Hk * D
    z = (rng.standard_normal((3, P)) * np.array([[1.0], [3.0], [20.0]])).astype(F32)
    A_log = np.zeros(D, F32)
    A_log[:Hk] = np.linspace(-0.4, 1.2, Hk).astype(F32)
    dt_bias = (0.5 * rng.standard_normal(P)).astype(F32)
    g, alpha = k3ref.kda_decay(z, A_log, dt_bias, Hk, D, gmin)

    def out(fn):
        gg, aa = fn(z, A_log, dt_bias, Hk, D, gmin)
        return {"g": gg, "alpha": aa}

    save_op("kda_decay", {
        "op": "kda_decay", "spec": "model.md §6.6 step 5, §3.3 (A_log per head, padded to D)",
        "description": "For row r, channel i = h*D + d: a_h = exp(A_log[h]) (h < Hk only; A_log is "
                       "[D] with zero padding), u = a_h*(z[r][i] + dt_bias[i]), g = gmin*sigmoid(u), "
                       "alpha = exp(g). z is W_fb W_fa x BEFORE dt_bias. Row 2 has |z| up to ~60 "
                       "(saturation: alpha -> 1 or e^gmin).",
        "dims": {"rows": 3, "Hk": Hk, "D": D, "P": P, "gmin": gmin},
        "inputs": {"z": tj(z), "A_log": tj(A_log), "dt_bias": tj(dt_bias)},
    }, {"g": g, "alpha": alpha}, {
        "wrong_per_channel_alog": ("A_log indexed by channel d = i mod D instead of head h",
                                   out(traps.decay_per_channel_alog)),
        "wrong_kimi_linear_decay": ("Kimi Linear g = -exp(A)*softplus(z + dt_bias)",
                                    out(traps.decay_kimi_linear)),
        "wrong_dt_bias_after_scaling": ("u = a*z + dt_bias", out(traps.decay_dt_bias_after_scaling)),
    })


def fx_kda_recurrence(T, seed):
    rng = np.random.default_rng(seed)
    H, D = 2, 16
    q = rng.standard_normal((T, H, D)).astype(F32)
    k = k3ref.l2norm(rng.standard_normal((T, H, D)).astype(F32))
    v = rng.standard_normal((T, H, D)).astype(F32)
    alpha = rng.uniform(0.005, 0.995, (T, H, D)).astype(F32)
    beta = rng.uniform(0.0, 1.0, (T, H)).astype(F32)
    S0 = (0.5 * rng.standard_normal((H, D, D))).astype(F32)

    def run(step):
        S, os_ = S0.copy(), []
        for t in range(T):
            S, o = step(S, q[t], k[t], v[t], alpha[t], beta[t])
            os_.append(o)
        return {"o": np.stack(os_), "S_out": S}

    save_op(f"kda_recurrence_{T}", {
        "op": "kda_recurrence", "spec": "model.md §6.6 recurrence",
        "description": "Per token t and head h (S is [D key i][D value j]): S[i][j] *= alpha[t][h][i]; "
                       "u[j] = sum_i k[i]*S[i][j]; S[i][j] += k[i]*beta[t][h]*(v[j]-u[j]); "
                       "o[t][h][j] = sum_i q[i]*S[i][j]. q is the already-scaled q' (used as given), "
                       "k is L2-normalised, state starts at S_in (non-zero).",
        "dims": {"T": T, "H": H, "D": D},
        "inputs": {"q": tj(q), "k": tj(k), "v": tj(v), "alpha": tj(alpha), "beta": tj(beta),
                   "S_in": tj(S0)},
    }, run(k3ref.kda_recurrence_step), {
        "wrong_output_before_write": ("o read from the decayed state before the delta write",
                                      run(traps.recurrence_output_before_write)),
        "wrong_read_undecayed_state": ("u computed from the undecayed state",
                                       run(traps.recurrence_read_undecayed)),
    })


def kda_weights(rng, E, Hk, D, Kc):
    P = Hk * D
    n = lambda std, shp: (std * rng.standard_normal(shp)).astype(F32)  # noqa: E731
    A_log = np.zeros(D, F32)
    A_log[:Hk] = np.linspace(-0.4, 1.2, Hk).astype(F32)
    W = {"q_proj.weight": bfv(n(E ** -0.5, (P, E))), "k_proj.weight": bfv(n(E ** -0.5, (P, E))),
         "v_proj.weight": bfv(n(E ** -0.5, (P, E))),
         "q_conv1d.weight": n(0.4, (P, 1, Kc)), "k_conv1d.weight": n(0.4, (P, 1, Kc)),
         "v_conv1d.weight": n(0.4, (P, 1, Kc)),
         "f_a_proj.weight": bfv(n(E ** -0.5, (D, E))), "f_b_proj.weight": bfv(n(D ** -0.5, (P, D))),
         "b_proj.weight": bfv(n(E ** -0.5, (Hk, E))), "A_log": A_log, "dt_bias": n(0.5, (P,)),
         "g_proj.weight": bfv(n(E ** -0.5, (P, E))), "o_norm.weight": (1 + n(0.1, (D,))).astype(F32),
         "o_proj.weight": bfv(n(P ** -0.5, (E, P)))}
    return W


def kda_bound(W, Kc):
    B = dict(W)
    for s in ("q", "k", "v"):
        B[f"{s}_conv1d.weight"] = W[f"{s}_conv1d.weight"].reshape(-1, Kc)
    return B


def fx_kda_layer():
    rng = np.random.default_rng(107)
    E, Hk, D, Kc, gmin = 40, 4, 16, 4, -5.0
    cfg = {"Hk": Hk, "D": D, "P": Hk * D, "Kc": Kc, "gmin": gmin, "eps": EPS5}
    W = kda_weights(rng, E, Hk, D, Kc)
    Wb = kda_bound(W, Kc)
    x8 = rng.standard_normal((8, E)).astype(F32)
    x1 = rng.standard_normal((1, E)).astype(F32)

    def run(x, st_in, **patch):
        st = {k: v.copy() for k, v in st_in.items()}
        with traps.patched(**patch):
            out = k3ref.kda_layer(x, Wb, cfg, st)
        return {"out": out, "S": st["S"], "conv_q": st["conv_q"], "conv_k": st["conv_k"],
                "conv_v": st["conv_v"]}

    zero = k3ref.new_kda_state(cfg)
    want8 = run(x8, zero)
    st8 = {k: want8[k] for k in ("S", "conv_q", "conv_k", "conv_v")}
    common_traps = {
        "wrong_per_channel_alog": ("A_log indexed per channel", {"kda_decay": traps.decay_per_channel_alog}),
        "wrong_kimi_linear_decay": ("Kimi Linear decay", {"kda_decay": traps.decay_kimi_linear}),
        "wrong_l2norm_mean": ("L2Norm with the mean", {"kda_heads_qkv": traps.heads_l2norm_mean}),
        "wrong_l2norm_on_v": ("v L2-normalised too", {"kda_heads_qkv": traps.heads_l2norm_on_v}),
        "wrong_gate_before_norm": ("sigmoid gate applied before the head RMSNorm",
                                   {"kda_gated_output": traps.gated_output_gate_before_norm}),
        "wrong_output_before_write": ("recurrence output read before the delta write",
                                      {"kda_recurrence_step": traps.recurrence_output_before_write}),
    }
    desc = ("Whole KDA attention (model.md §6.6 steps 1-9) on x (the input-layernormed hidden, "
            "[T, E]) starting from state_in; weights use released names/shapes (conv [P,1,Kc], "
            "A_log [D] zero-padded beyond Hk). want.out [T, E]; want.S [Hk, D, D] (row = key channel); "
            "want.conv_* [P, Kc-1] = last Kc-1 RAW projection outputs per channel, oldest first.")
    for T, x, st_in, name in ((8, x8, zero, "kda_layer_8"), (1, x1, st8, "kda_layer_1")):
        want = run(x, st_in)
        wr = {k: (d, run(x, st_in, **p)) for k, (d, p) in common_traps.items()}
        if T == 1:
            wr["wrong_state_not_carried"] = ("state_in ignored (zero state)", run(x, zero))
        beta = k3ref.sigmoid(x @ W["b_proj.weight"].T)
        z = (x @ W["f_a_proj.weight"].T) @ W["f_b_proj.weight"].T
        _, alpha = k3ref.kda_decay(z, W["A_log"], W["dt_bias"], Hk, D, gmin)
        save_op(name, {
            "op": "kda_layer", "spec": "model.md §6.6", "description": desc,
            "dims": {"T": T, "E": E, "Hk": Hk, "D": D, "P": Hk * D, "Kc": Kc, "gmin": gmin,
                     "eps": EPS5},
            "weights": {k: tj(v) for k, v in W.items()},
            "weights_bf16_exact": sorted(k for k in W if W[k].ndim == 2),
            "inputs": {"x": tj(x), "state_in": {k: tj(v) for k, v in st_in.items()}},
            "debug": {"beta": tj(beta), "alpha": tj(alpha)},
        }, want, wr)


def fx_router():
    E, Ne, k, rho = 128, 8, 2, 2.5
    bias = np.linspace(-0.15, 0.15, Ne).astype(F32)
    for seed in range(108, 200):
        rng = np.random.default_rng(seed)
        Wr = (0.02 * rng.standard_normal((Ne, E))).astype(F32)
        x = rng.standard_normal((6, E)).astype(F32)
        s = k3ref.sigmoid(x @ Wr.T)
        changed = sum(set(np.argsort(-(s[t] + bias), kind="stable")[:k]) !=
                      set(np.argsort(-s[t], kind="stable")[:k]) for t in range(6))
        if changed >= 5:
            break
    W = {"gate.weight": Wr, "gate.e_score_correction_bias": bias}
    cfg = {"k": k, "rho": rho, "renorm": True}

    def run(fn):
        idx, w = fn(x, W, cfg)
        return {"topk_idx": idx.astype(np.int32), "weights": w}

    want = run(k3ref.router)
    want["scores"] = k3ref.sigmoid(x @ Wr.T)

    def wr(fn):
        out = run(fn)
        out["scores"] = want["scores"]
        return out

    save_op("router", {
        "op": "router", "spec": "model.md §6.10",
        "description": "logit = W_r x (full-width x); s = sigmoid(logit); c = s + bias; top-k of c "
                       "(ties to lowest index, descending c order); w_j = s[T_j] (UNBIASED); "
                       "w /= (sum w + 1e-20); w *= rho. Compare topk_idx as SETS per row exactly, "
                       "weights (in topk_idx order) within tolerance. The bias changes the "
                       f"selected set on {changed} of 6 rows.",
        "dims": {"rows": 6, "E": E, "Ne": Ne, "k": k, "routed_scaling_factor": rho,
                 "moe_renormalize": True, "rows_where_bias_changes_selection": int(changed)},
        "weights": {k_: tj(v) for k_, v in W.items()},
        "inputs": {"x": tj(x)},
    }, want, {
        "wrong_biased_combine_weights": ("weights taken from the biased c",
                                         wr(traps.make_router(weights="biased"))),
        "wrong_unbiased_selection": ("bias ignored for selection", wr(traps.make_router(selection="unbiased"))),
        "wrong_no_renormalize": ("renormalisation skipped", wr(traps.make_router(renorm=False))),
        "wrong_no_rho": ("routed_scaling_factor ignored", wr(traps.make_router(rho=False))),
    }, dtypes={"topk_idx": "i32"})
    assert changed >= 5


def fx_attnres():
    rng = np.random.default_rng(109)
    T, n, E = 4, 9, 64
    scales = np.array([1.0, 0.1, 10.0, 3.0, 0.5, 30.0, 2.0, 0.03, 5.0])
    src = (rng.standard_normal((n, T, E)) * scales[:, None, None]).astype(F32)
    norm_w = (np.abs(rng.standard_normal(E)) + 0.5).astype(F32)
    proj_w = (0.15 * rng.standard_normal((1, E))).astype(F32)
    phi = norm_w * proj_w.reshape(E)
    S = list(src)
    Sx = src
    r = 1 / np.sqrt(np.mean(Sx * Sx, axis=-1, keepdims=True) + EPS5)
    p = k3ref.softmax(np.sum((Sx * r) * phi, axis=-1), axis=0)
    save_op("attnres", {
        "op": "attnres", "spec": "model.md §6.8",
        "description": "phi = norm_weight * proj_weight (fold once, f32). For each token t: "
                       "r_i = 1/sqrt(mean_j s_i[t][j]^2 + eps); score_i = sum_j (s_i[t][j]*r_i)*phi[j]; "
                       "p = softmax_i(score); out[t][j] = sum_i p_i * s_i[t][j] (RAW values, source "
                       "order). sources[i] is source i ([n, T, E]; last = running partial sum). "
                       "Source scales 1, 0.1, 10, 3, 0.5, 30, 2, 0.03, 5.",
        "dims": {"T": T, "n_sources": n, "E": E, "eps": EPS5},
        "inputs": {"sources": tj(src), "norm_weight": tj(norm_w), "proj_weight": tj(proj_w)},
        "debug": {"phi": tj(phi), "p": tj(p)},
    }, {"out": k3ref.attn_res(S, phi, EPS5)}, {
        "wrong_values_normalised": ("values RMS-normalised like the keys",
                                    {"out": traps.attn_res_values_normalised(S, phi, EPS5)}),
        "wrong_keys_unnormalised": ("keys not normalised", {"out": traps.attn_res_keys_unnormalised(S, phi, EPS5)}),
        "wrong_phi_applied_to_values": ("norm*proj applied to the values",
                                        {"out": traps.attn_res_phi_on_values(S, phi, EPS5)}),
    })


def mla_weights(rng, E, H, Rq, Rkv, dn, dr, dv, std):
    n = lambda s, shp: (s * rng.standard_normal(shp)).astype(F32)  # noqa: E731
    dq = dn + dr
    return {"q_a_proj.weight": bfv(n(std, (Rq, E))), "q_a_layernorm.weight": (1 + n(0.1, (Rq,))).astype(F32),
            "q_b_proj.weight": bfv(n(std, (H * dq, Rq))),
            "kv_a_proj_with_mqa.weight": bfv(n(std, (Rkv + dr, E))),
            "kv_a_layernorm.weight": (1 + n(0.1, (Rkv,))).astype(F32),
            "kv_b_proj.weight": bfv(n(std, (H * (dn + dv), Rkv))),
            "g_proj.weight": bfv(n(std, (H * dv, E))), "o_proj.weight": bfv(n(std, (E, H * dv)))}


def fx_mla():
    rng = np.random.default_rng(110)
    E, H, Rq, Rkv, dn, dr, dv = 48, 4, 32, 32, 24, 8, 16
    cfg = {"H": H, "Rq": Rq, "Rkv": Rkv, "dn": dn, "dr": dr, "dv": dv, "eps": EPS5, "mla_gate": True}
    W = mla_weights(rng, E, H, Rq, Rkv, dn, dr, dv, 0.3)
    x = rng.standard_normal((6, E)).astype(F32)

    def run(layer=None, **patch):
        layer = layer or k3ref.mla_layer
        cache = k3ref.new_mla_cache(cfg)
        with traps.patched(**patch):
            o5 = layer(x[:5], W, cfg, cache)
            o6 = layer(x[5:], W, cfg, cache)
        return {"out": np.concatenate([o5, o6]), "cache_c_kv": cache["c_kv"], "cache_kr": cache["kr"],
                "cache_kn": cache["kn"], "cache_v": cache["v"]}

    def rotated(qn, qr, kn, kr, scale):
        N, T = kn.shape[0], qn.shape[0]
        return traps.make_mla_scores_rotated(np.arange(N - T, N))(qn, qr, kn, kr, scale)

    want = run()
    # the same tokens in one prefill call agree with prefill(5)+decode(1)
    c1 = k3ref.new_mla_cache(cfg)
    assert separation({"o": want["out"]}, {"o": k3ref.mla_layer(x, W, cfg, c1)}) < 1.0
    save_op("mla", {
        "op": "mla", "spec": "model.md §6.7, §9",
        "description": "Gated NoPE MLA. Tokens 0-4 in one prefill call from an empty cache, then "
                       "token 5 as a decode step using the cache. c_q = RMSNorm(W_qa x; q_a_layernorm); "
                       "Q = W_qb c_q, head h = Q[h*dq:(h+1)*dq] = [qn (dn) | qr (dr)]; C = W_kva x; "
                       "c_kv = RMSNorm(C[:Rkv]; kv_a_layernorm); kr = C[Rkv:] raw (shared by all "
                       "heads, no rotation); KV = W_kvb c_kv, head h = KV[h*(dn+dv):...] = [kn | v]; "
                       "score = (qn.kn + qr.kr) * (dn+dr)^-1/2, causal softmax; O head-major; "
                       "out = W_o (O * sigmoid(W_g x)). Cache after all 6 tokens: c_kv [6,Rkv], "
                       "kr [6,dr], kn [6,H,dn], v [6,H,dv].",
        "dims": {"T": 6, "T_prefill": 5, "E": E, "H": H, "Rq": Rq, "Rkv": Rkv, "dn": dn, "dr": dr,
                 "dv": dv, "dq": dn + dr, "scale": 1 / math.sqrt(dn + dr), "eps": EPS5,
                 "mla_use_output_gate": True},
        "weights": {k: tj(v) for k, v in W.items()},
        "weights_bf16_exact": sorted(k for k in W if W[k].ndim == 2),
        "inputs": {"x": tj(x)},
    }, want, {
        "wrong_dropped_rope": ("rope slots dropped: head width dn, scale dn^-1/2",
                               run(mla_scores=traps.mla_scores_dropped_rope)),
        "wrong_rotated_rope": ("RoPE (half-split, base 1e4) applied to qr and kr",
                               run(mla_scores=rotated)),
        "wrong_scale_dn": ("softmax scale dn^-1/2 instead of (dn+dr)^-1/2",
                           run(mla_scores=traps.mla_scores_scale_dn)),
        "wrong_rope_key_normalised": ("latent RMSNorm applied over the rope key too",
                                      run(mla_kv_latent=traps.kv_latent_rope_normalised)),
        "wrong_no_causal_mask": ("no causal mask in prefill", run(layer=traps.mla_layer_no_causal_mask)),
    })


def moe_weights(rng, E, Ne, Lam, I, Is, w13_std=1.1, w2_std=0.3):
    n = lambda s, shp: (s * rng.standard_normal(shp)).astype(F32)  # noqa: E731
    W = {"gate.weight": n(0.02, (Ne, E)),
         "gate.e_score_correction_bias": np.linspace(-0.15, 0.15, Ne).astype(F32),
         "routed_expert_down_proj.weight": bfv(n(E ** -0.5, (Lam, E))),
         "routed_expert_up_proj.weight": bfv(n(Lam ** -0.5, (E, Lam))),
         "routed_expert_norm.weight": (1 + n(0.1, (Lam,))).astype(F32),
         "shared_experts.gate_proj.weight": bfv(n(3 * E ** -0.5, (Is, E))),
         "shared_experts.up_proj.weight": bfv(n(3 * E ** -0.5, (Is, E))),
         "shared_experts.down_proj.weight": bfv(n(Is ** -0.5, (E, Is)))}
    packed = {}
    for wn, shp, std in (("w1", (I, Lam), w13_std), ("w2", (Lam, I), w2_std), ("w3", (I, Lam), w13_std)):
        ps, ss = [], []
        for e in range(Ne):
            p, s = mxfp4.quantise(n(std, shp), f"{wn}[{e}]")
            ps.append(p)
            ss.append(s)
        packed[wn] = (np.stack(ps), np.stack(ss))
    return W, packed


def moe_bound(W, packed, decoder=mxfp4.decode):
    B = dict(W)
    for wn, (p, s) in packed.items():
        B["experts." + wn] = np.stack([decoder(p[e], s[e]) for e in range(p.shape[0])])
    return B


def fx_moe():
    E, Ne, k, Lam, I, Ns, rho = 96, 8, 2, 64, 64, 2, 2.5
    Is = Ns * I
    cfg = {"k": k, "rho": rho, "renorm": True, "latent_norm": True, "eps": EPS5,
           "beta1": 4.0, "beta2": 25.0}
    for seed in range(111, 200):
        rng = np.random.default_rng(seed)
        W, packed = moe_weights(rng, E, Ne, Lam, I, Is)
        x = rng.standard_normal((3, E)).astype(F32)
        s = k3ref.sigmoid(x @ W["gate.weight"].T)
        changed = sum(set(np.argsort(-(s[t] + W["gate.e_score_correction_bias"]), kind="stable")[:k])
                      != set(np.argsort(-s[t], kind="stable")[:k]) for t in range(3))
        if changed >= 2:
            break
    Wb = moe_bound(W, packed)
    out = k3ref.latent_moe(x, Wb, cfg)
    idx, wts = k3ref.router(x, Wb, cfg)
    Z = x @ W["routed_expert_down_proj.weight"].T
    g = np.stack([Wb["experts.w1"][idx[t, j]] @ Z[t] for t in range(3) for j in range(k)])
    assert np.mean(np.abs(g) > 4.0) > 0.3, "SiTU gate cap not engaged in the MoE fixture"
    ref_loop = traps.latent_moe_variant(x, Wb, cfg)
    assert separation({"o": out}, {"o": ref_loop}) < 1.0

    def variant(**kw):
        return {"out": traps.latent_moe_variant(x, Wb, cfg, **kw)}

    def patched(**p):
        with traps.patched(**p):
            return {"out": k3ref.latent_moe(x, Wb, cfg)}

    weights = {k_: tj(v) for k_, v in W.items()}
    for wn, (p, s) in packed.items():
        weights[f"experts.{wn}.weight_packed"] = tj(p, "u8")
        weights[f"experts.{wn}.weight_scale"] = tj(s, "u8")
    save_op("moe", {
        "op": "latent_moe", "spec": "model.md §6.10-6.11",
        "description": "Stable LatentMoE on x [T, E] (the post-attention-normalised hidden). Router "
                       "as in router.json on the FULL x; z = W_down x (Lam); acc = sum_j w_j * "
                       "W2_e SiTU([W1_e z | W3_e z]) in top-k order; n = RMSNorm(acc; "
                       "routed_expert_norm); y = W_up n + W_sd SiTU([W_sg x | W_su x]) (shared, fused "
                       "width Is, on x, unweighted). Experts are MXFP4: experts.wN.weight_packed "
                       "[Ne, rows, cols/2] U8 and weight_scale [Ne, rows, cols/32] U8; w1/w3 logical "
                       "[I, Lam] (gate/up), w2 logical [Lam, I] (down).",
        "dims": {"T": 3, "E": E, "Ne": Ne, "k": k, "Lam": Lam, "I": I, "Ns": Ns, "Is": Is,
                 "routed_scaling_factor": rho, "moe_renormalize": True, "latent_moe_use_norm": True,
                 "eps": EPS5, "beta1": 4.0, "beta2": 25.0,
                 "tokens_where_bias_changes_selection": int(changed)},
        "weights": weights,
        "weights_bf16_exact": sorted(k_ for k_ in W if W[k_].ndim == 2 and k_ != "gate.weight"),
        "inputs": {"x": tj(x)},
        "debug": {"topk_idx": tj(idx, "i32"), "weights": tj(wts), "z": tj(Z)},
    }, {"out": out}, {
        "wrong_norm_per_expert": ("RMSNorm applied to each expert output instead of the aggregate",
                                  variant(norm_per_expert=True)),
        "wrong_biased_combine_weights": ("weights from the biased scores",
                                         patched(router=traps.make_router(weights="biased"))),
        "wrong_unbiased_selection": ("bias ignored for selection",
                                     patched(router=traps.make_router(selection="unbiased"))),
        "wrong_shared_weighted": ("shared expert output multiplied by the first routing weight",
                                  variant(shared_weighted=True)),
        "wrong_swapped_w2_w3": ("w3 used as down and w2 as up", variant(swap_w2_w3=True)),
        "wrong_reversed_nibbles": ("experts decoded with swapped nibbles",
                                   {"out": k3ref.latent_moe(x, moe_bound(W, packed, mxfp4.decode_swapped_nibbles), cfg)}),
    })


def fx_dense_mlp():
    rng = np.random.default_rng(112)
    E, Id = 40, 72
    n = lambda s, shp: (s * rng.standard_normal(shp)).astype(F32)  # noqa: E731
    W = {"gate_proj.weight": bfv(n(1.2, (Id, E))), "up_proj.weight": bfv(n(1.2, (Id, E))),
         "down_proj.weight": bfv(n(0.1, (E, Id)))}
    x = rng.standard_normal((2, E)).astype(F32)
    b1, b2 = 4.0, 25.0
    y = k3ref.dense_mlp(x, W["gate_proj.weight"], W["up_proj.weight"], W["down_proj.weight"], b1, b2)
    with traps.patched(situ_glu=traps.situ_capped_sigmoid_input):
        yc = k3ref.dense_mlp(x, W["gate_proj.weight"], W["up_proj.weight"], W["down_proj.weight"], b1, b2)
    ys = k3ref.dense_mlp(x, W["up_proj.weight"], W["gate_proj.weight"], W["down_proj.weight"], b1, b2)
    save_op("dense_mlp", {
        "op": "dense_mlp", "spec": "model.md §6.12",
        "description": "y = W_down SiTU([W_gate x | W_up x]); gate/up std 1.2 so both caps engage.",
        "dims": {"T": 2, "E": E, "Id": Id, "beta1": b1, "beta2": b2},
        "weights": {k: tj(v) for k, v in W.items()},
        "weights_bf16_exact": sorted(W),
        "inputs": {"x": tj(x)},
    }, {"y": y}, {"wrong_capped_sigmoid_input": ("sigmoid of the capped gate", {"y": yc}),
                  "wrong_swapped_gate_up": ("gate_proj and up_proj swapped", {"y": ys})})


def fx_bf16():
    rng = np.random.default_rng(113)
    rows, cols = 7, 133
    bits = bf16_truncate((0.1 * rng.standard_normal((rows, cols))).astype(F32))
    w = bf16_to_f32(bits)
    x = rng.standard_normal((cols,)).astype(F32)
    y = w @ x
    y_f16 = bits.view(np.float16).astype(F32) @ x
    save_op("bf16_matvec", {
        "op": "bf16_matvec", "spec": "model.md §4 (bf16 widening), §6.1",
        "description": "y[o] = sum_i W[o][i]*x[i] with W given as bf16 bit patterns (u16); widen by "
                       "a 16-bit left shift (w_f32 holds the widened values, exact). cols = 133 is not "
                       "a multiple of 16 (lane tail).",
        "dims": {"rows": rows, "cols": cols},
        "inputs": {"w_bf16_bits": tj(bits, "u16"), "w_f32": tj(w), "x": tj(x)},
    }, {"y": y}, {"wrong_read_as_f16": ("bit patterns read as IEEE f16", {"y": y_f16})})

    special = [0x0000, 0x8000, 0x0001, 0x807F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x7F80,
               0xFF80, 0x7FC0, 0x4049, 0x3C23, 0xC2F7]
    sb = np.array(special + list(rng.integers(0, 65536, 17)), dtype=np.uint16)
    want_bits = sb.astype(np.uint32) << 16
    f16bits = sb.view(np.float16).astype(np.float32).view(np.uint32)
    save_op("bf16_widen", {
        "op": "bf16_widen", "spec": "model.md §4, §8.1",
        "description": "f32 bit pattern = bf16 bits << 16 (exact; includes -0, subnormals, max, "
                       "inf, NaN). Compare u32 bit patterns exactly.",
        "dims": {"n": int(sb.size)},
        "tolerance": {"exact": True},
        "inputs": {"bits": tj(sb, "u16")},
    }, {"f32_bits": want_bits}, {"wrong_via_f16": ("bits reinterpreted as f16 then widened",
                                                   {"f32_bits": f16bits})},
        dtypes={"f32_bits": "u32"})


# §5.4 worked bytes (row 0 of layers.1...experts.0.w1): (byte index, packed byte, scale byte,
# decoded even element, decoded odd element)
WORKED = [(0, 0x16, 121, 0.0625, 0.0078125), (1, 0xB9, 121, -0.0078125, -0.0234375),
          (2, 0xCE, 121, -0.0625, -0.03125), (3, 0x23, 121, 0.0234375, 0.015625),
          (4, 0x85, 121, 0.046875, -0.0), (63, 0xFA, 121, -0.015625, -0.09375),
          (112, 0x4C, 120, -0.015625, 0.015625), (113, 0xB1, 120, 0.00390625, -0.01171875)]


def fx_mxfp4():
    rng = np.random.default_rng(114)
    # the worked bytes, checked against the spec's own decoded column
    wi = np.array([w[0] for w in WORKED], np.int32)
    wp = np.array([[w[1]] for w in WORKED], np.uint8)
    ws = np.array([w[2] for w in WORKED], np.uint8)
    worked = np.zeros((8, 2), F32)
    worked_sw = np.zeros((8, 2), F32)
    for i, (bi, pb, sb, e0, e1) in enumerate(WORKED):
        row_p = np.full((1, 16), pb, np.uint8)      # one group of 32 elements from the byte
        row_s = np.array([[sb]], np.uint8)
        d = mxfp4.decode(row_p, row_s)[0, :2]
        ds = mxfp4.decode_swapped_nibbles(row_p, row_s)[0, :2]
        assert d[0] == e0 and d[1] == e1 and np.signbit(d[1]) == np.signbit(np.float32(e1)), (bi, d)
        worked[i], worked_sw[i] = d, ds
    assert np.all(worked_sw[:2].ravel() == np.array([0.0078125, 0.0625, -0.0234375, -0.0078125], F32))
    # one 256-element row assembled around the published bytes (others synthetic)
    row_p = rng.integers(0, 256, (1, 128)).astype(np.uint8)
    for bi, pb, _, _, _ in WORKED:
        row_p[0, bi] = pb
    row_s = np.array([[121, 122, 120, 121, 122, 121, 120, 120]], np.uint8)
    row = mxfp4.decode(row_p, row_s)
    for i, (bi, _, _, e0, e1) in enumerate(WORKED):
        assert row[0, 2 * bi] == e0 and row[0, 2 * bi + 1] == e1
    # random rows, including edge scale bytes 0 (2^-127, subnormal), 1, 127 and 252
    rp = rng.integers(0, 256, (8, 64)).astype(np.uint8)
    rs = rng.integers(118, 125, (8, 4)).astype(np.uint8)
    rs[7] = [0, 1, 127, 252]
    rd = mxfp4.decode(rp, rs)

    def bias128(p, s):
        return (mxfp4.decode(p, s) * F32(0.5)).astype(F32)

    want = {"worked_elements": worked, "row_decoded": row, "rand_decoded": rd}
    save_op("mxfp4_decode", {
        "op": "mxfp4_decode", "spec": "model.md §5",
        "description": "Exact decode, zero tolerance, sign of -0 included. element (r, c) = "
                       "E2M1[nibble] * 2^(scale[r][c/32] - 127), nibble = packed[r][c/2] & 0xF for even c "
                       "(LOW nibble = EVEN element), >> 4 for odd c. worked_*: the 8 published bytes of "
                       "§5.4 (row 0 of layers.1.block_sparse_moe.experts.0.w1): worked_elements[i] = "
                       "[even, odd] decoded from worked_packed[i] with worked_scale[i]. row_*: a "
                       "256-element row holding those bytes at their published byte indices "
                       "(worked_byte_index) and synthetic bytes elsewhere; its scale bytes for groups "
                       "0, 3, 7 are the published 121, 121, 120 (others synthetic). rand_*: random "
                       "bytes; row 7 uses scale bytes 0, 1, 127, 252.",
        "dims": {"row_cols": 256, "rand_rows": 8, "rand_cols": 128, "group": 32},
        "tolerance": {"exact": True},
        "inputs": {"worked_byte_index": tj(wi, "i32"), "worked_packed": tj(wp.ravel(), "u8"),
                   "worked_scale": tj(ws, "u8"), "row_packed": tj(row_p, "u8"), "row_scale": tj(row_s, "u8"),
                   "rand_packed": tj(rp, "u8"), "rand_scale": tj(rs, "u8")},
    }, want, {
        "wrong_reversed_nibbles": ("HIGH nibble taken as the even element", {
            "worked_elements": worked_sw, "row_decoded": mxfp4.decode_swapped_nibbles(row_p, row_s),
            "rand_decoded": mxfp4.decode_swapped_nibbles(rp, rs)}),
        "wrong_e8m0_bias_128": ("multiplier 2^(s-128)", {
            "worked_elements": worked * F32(0.5), "row_decoded": bias128(row_p, row_s),
            "rand_decoded": bias128(rp, rs)}),
    })

    # matvec
    mp = rng.integers(0, 256, (6, 64)).astype(np.uint8)
    ms = rng.integers(118, 125, (6, 4)).astype(np.uint8)
    x = rng.standard_normal(128).astype(F32)
    y = mxfp4.matvec_reference(mp, ms, x)
    save_op("mxfp4_matvec", {
        "op": "mxfp4_matvec", "spec": "model.md §5.5",
        "description": "y[r] = sum_g 2^(s[r][g]-127) * sum_{i<32} E2M1(nibble(r, 32g+i)) * x[32g+i], "
                       "multiplied straight from the packed bytes (layout as in mxfp4_decode). "
                       "want.y is dequantise-then-dot in f32; op tolerance applies.",
        "dims": {"rows": 6, "cols": 128, "group": 32},
        "inputs": {"packed": tj(mp, "u8"), "scale": tj(ms, "u8"), "x": tj(x)},
    }, {"y": y}, {
        "wrong_reversed_nibbles": ("nibbles swapped", {"y": mxfp4.decode_swapped_nibbles(mp, ms) @ x}),
        "wrong_e8m0_bias_128": ("multiplier 2^(s-128)", {"y": (y * F32(0.5)).astype(F32)}),
    })


# ------------------------------------------------------------------ layer wiring fixtures

LAYER_CFG = {
    "model_type": "kimi_k3", "hidden_size": 40, "num_hidden_layers": 4, "vocab_size": 16,
    "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "kda_num_heads": 4, "kda_head_dim": 8,
    "short_conv_kernel_size": 4, "gate_lower_bound": -5.0, "num_attention_heads": 2,
    "q_lora_rank": 24, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
    "v_head_dim": 8, "mla_use_output_gate": True, "num_experts": 4, "num_experts_per_token": 2,
    "num_shared_experts": 1, "routed_expert_hidden_size": 32, "moe_intermediate_size": 32,
    "routed_scaling_factor": 1.0, "moe_renormalize": True, "latent_moe_use_norm": True,
    "first_k_dense_replace": 1, "intermediate_size": 48, "attn_res_block_size": 3,
    "situ_beta": 4.0, "situ_linear_beta": 25.0, "full_attn_layers": [4],
}


def init_fixture_params(c, seed):
    """Generic O(1)-signal init for the layer fixtures (std ~ fan_in^-1/2, gains 1+N(0,0.1),
    AttnRes projections N(0, 0.15), SiTU caps engaged, routing bias linspace)."""
    rng = np.random.default_rng(seed)
    p = {}
    for name, shp in tm.all_param_shapes(c):
        if name.endswith("_res_proj.weight"):
            p[name] = tm.normal(rng, 0.15, shp)
        elif name.endswith("gate.weight"):
            p[name] = tm.normal(rng, 0.02, shp)
        elif name.endswith(".w1") or name.endswith(".w3"):
            p[name] = tm.normal(rng, 1.1, shp)
        elif "conv1d" in name:
            p[name] = tm.normal(rng, 0.4, shp)
        elif tm.is_gate_or_up(name):
            p[name] = tm.normal(rng, 3 * shp[1] ** -0.5, shp)
        elif len(shp) >= 2:
            p[name] = tm.normal(rng, shp[-1] ** -0.5, shp)
        elif name.endswith(".weight"):
            p[name] = (1 + tm.normal(rng, 0.1, shp)).astype(F32)
        elif name.endswith("A_log"):
            p[name] = np.linspace(-0.4, 1.2, c["Hk"]).astype(F32)
        elif name.endswith("dt_bias"):
            p[name] = tm.normal(rng, 0.5, shp)
        elif name.endswith("e_score_correction_bias"):
            p[name] = np.linspace(-0.15, 0.15, c["Ne"]).astype(F32)
        else:
            raise AssertionError(name)
    return p


def fx_layers():
    c = k3ref.parse_config(LAYER_CFG)
    p = init_fixture_params(c, 115)
    rng = np.random.default_rng(116)
    T, E = 3, c["E"]
    model = Model()
    model.cfg, model.dtype = c, np.float32
    model.layers = [None] * c["L"]
    for l, name, kind in ((1, "layer_kda", "non-boundary KDA layer"), (3, "layer_mla", "boundary MLA layer")):
        trunk, experts = tm.layer_tensors(c, p, l)
        raw = {n: (code, arr) for n, code, arr in trunk + experts}
        model.layers[l] = k3ref.bind_layer(c, raw, l)
        blocks = [(rng.standard_normal((T, E)) * s).astype(F32) for s in (1.0, 4.0)]
        h = (3.0 * rng.standard_normal((T, E))).astype(F32)

        def run(variant):
            st = model.new_state()
            r, B = traps.wired_layer(model, variant, l, h, list(blocks), st)
            return {"blocks_out": np.stack(B), "out": r}

        want = run(None)
        st = model.new_state()
        r_ref, B_ref = model.decoder_layer(l, h, list(blocks), st)
        assert np.array_equal(r_ref, want["out"]) and np.array_equal(np.stack(B_ref), want["blocks_out"])
        variants = (["wrong_push_before_aggregate", "wrong_no_clear_at_boundary"] if l % c["S"] == 0
                    else []) + ["wrong_residual_into_aggregate", "wrong_running_sum_not_a_source",
                                "wrong_values_normalised"]
        wr = {v: (traps.WIRING_TRAPS[v], run(v)) for v in variants}
        pre = tm.PFX.format(l)
        weights, wdt = {}, {}
        for n, code, arr in trunk:
            weights[n[len(pre):]] = tj(k3ref.to_f32(code, arr) if code == "BF16" else arr)
            wdt[n[len(pre):]] = code
        for wn in ("w1", "w2", "w3"):
            for part in ("weight_packed", "weight_scale"):
                stack = np.stack([dict((n, a) for n, _, a in experts)[
                    f"{pre}block_sparse_moe.experts.{e}.{wn}.{part}"] for e in range(c["Ne"])])
                weights[f"block_sparse_moe.experts.{wn}.{part}"] = tj(stack, "u8")
        a_dbg = k3ref.attn_res(blocks + [h], model.layers[l]["phi_attn"], c["eps"])
        save_op(name, {
            "op": "decoder_layer", "spec": "model.md §6.9 (AttnRes wiring), §6.6/6.7, §6.11",
            "description": f"One {kind} (layer index {l}, attn_res_block_size 3, first_k_dense_replace 1 "
                           "=> MoE FFN) run on T=3 tokens from a fresh attention state with 2 incoming "
                           "blocks. inputs.blocks_in [2, T, E] = B (b0 first), inputs.h [T, E] = layer "
                           "input (running partial sum of the previous layer). Steps: r=h; a = AR(B++[r]; "
                           "phi_attn) (B non-empty); if l mod S == 0: push r to B, r = empty; u = Attn("
                           "RMSNorm(a; input_layernorm)); r = r+u (or u); m = AR(B++[r]; phi_mlp); "
                           "r = r + FFN(RMSNorm(m; post_attention_layernorm)). want.blocks_out = B after "
                           "the layer, want.out = r. Weights keyed by the released suffix after "
                           "'language_model.model.layers.{l}.'; stored dtype in weights_dtype (BF16 "
                           "values are exact bf16); experts stacked over e as "
                           "block_sparse_moe.experts.wN.weight_packed [Ne, rows, cols/2] / weight_scale.",
            "dims": {"layer": l, "T": T, "config": LAYER_CFG, "is_mla": bool(c["is_mla"][l]),
                     "boundary": l % c["S"] == 0, "n_blocks_in": 2, "n_blocks_out": len(want["blocks_out"])},
            "weights": weights, "weights_dtype": wdt,
            "inputs": {"blocks_in": tj(np.stack(blocks)), "h": tj(h)},
            "debug": {"a": tj(a_dbg)},
        }, want, wr)


# ------------------------------------------------------------------ tiny models

def write_logits(path, arr):
    np.asarray(arr, dtype="<f4").tofile(path)


def mechanism_stats(model, ids):
    """Evidence that every mechanism matters on this model, for expected.json."""
    rec = {"router_changed": 0, "router_total": 0, "g": [], "u": []}
    real_router, real_situ = k3ref.router, k3ref.situ_glu

    def router(X, W, cfg):
        idx, w = real_router(X, W, cfg)
        s = k3ref.sigmoid(X @ W["gate.weight"].T)
        for t in range(X.shape[0]):
            rec["router_total"] += 1
            rec["router_changed"] += set(idx[t]) != set(np.argsort(-s[t], kind="stable")[:cfg["k"]])
        return idx, w

    def situ(g, u, b1, b2):
        rec["g"].append(np.abs(g).ravel())
        rec["u"].append(np.abs(u).ravel())
        return real_situ(g, u, b1, b2)

    with traps.patched(router=router, situ_glu=situ):
        model.forward(ids, model.new_state())
    g, u = np.concatenate(rec["g"]), np.concatenate(rec["u"])
    nz = []
    for lw in model.layers:
        for wn in ("w1", "w2", "w3"):
            if "ffn.experts." + wn in lw:
                nz.append(float(np.mean(lw["ffn.experts." + wn] != 0)))
    c = model.cfg
    return {
        "router_bias_changes_selection_fraction": rec["router_changed"] / max(rec["router_total"], 1),
        "situ_gate_abs_gt_beta1_fraction": float(np.mean(g > c["beta1"])),
        "situ_up_abs_gt_5_fraction": float(np.mean(u > 5.0)),
        "situ_max_abs_gate": float(g.max()), "situ_max_abs_up": float(u.max()),
        "mxfp4_min_nonzero_fraction_per_expert_stack": min(nz),
        "kda_a_per_head": {str(l): [float(v) for v in np.exp(model.layers[l]["attn.A_log"])]
                           for l in range(c["L"]) if not c["is_mla"][l]},
    }


def model_fixture(name, config, init_fn, wseed, layer_shards, prompt_seed, long_seed, long_len=320):
    t0 = time.time()
    out = os.path.join(FIX, name)
    c = k3ref.parse_config(config)
    p = init_fn(c, wseed)
    shards, written = tm.write_released(out, config, c, p, layer_shards)
    m = Model(out)
    V, E = c["V"], c["E"]

    def search(seed0, length, n_new, check_tf):
        for seed in range(seed0, seed0 + 200):
            ids = [int(v) for v in np.random.default_rng(seed).integers(0, V, length)]
            gen, glog = greedy(m, ids, n_new)
            gaps = top2_gap(glog)
            if gaps.min() < MIN_GAP:
                continue
            if check_tf:
                full = ids + gen
                tfl = m.forward(full, m.new_state())
                if top2_gap(tfl).min() < MIN_GAP:
                    continue
                return seed, ids, gen, glog, full, tfl
            return seed, ids, gen, glog, None, None
        raise RuntimeError("no seed with a comfortable top-2 gap")

    pseed, prompt, gen, glog, full, tfl = search(prompt_seed, 12, 20, True)
    gen_rc, glog_rc = greedy(m, prompt, 20, incremental=False)
    assert gen_rc == gen, "incremental and full-recompute greedy tokens differ"
    tf_arg = [int(v) for v in np.argmax(tfl, axis=1)]
    assert tf_arg[11:31] == gen[:20], "teacher forcing disagrees with greedy"
    lseed, lprompt, lgen, llog, _, _ = search(long_seed, long_len, 20, False)
    lgen_rc, _ = greedy(m, lprompt, 20, incremental=False)
    assert lgen_rc == lgen, "long: incremental and full recompute differ"
    lp_ids = [3, 7, 11, 5, 9]
    l0 = m.forward(lp_ids, m.new_state())[-1]
    write_logits(os.path.join(out, "logits_step0.f32"), l0)
    write_logits(os.path.join(out, "logits_greedy.f32"), glog)
    write_logits(os.path.join(out, "logits_tf.f32"), tfl)
    back = np.fromfile(os.path.join(out, "logits_step0.f32"), dtype="<f4")
    assert np.array_equal(back, l0)

    # f64 evaluation of the same stored weights: a proxy for an f64-accumulating engine
    m64 = Model(out, dtype=np.float64)
    l0_64 = m64.forward(lp_ids, m64.new_state())[-1]
    tf64 = m64.forward(full, m64.new_state())
    g64, _ = greedy(m64, prompt, 20)
    assert g64 == gen and [int(v) for v in np.argmax(tf64, axis=1)] == tf_arg

    max_abs = float(np.max(np.abs(l0)))
    rel = 1.2e-7 * math.sqrt(E) * 50
    gaps_all = np.concatenate([top2_gap(glog), top2_gap(tfl), top2_gap(llog)])
    min_gap = float(gaps_all.min())
    tol_abs = rel * max(max_abs, float(np.max(np.abs(tfl))), float(np.max(np.abs(glog))))
    assert min_gap >= MIN_GAP and min_gap > 10 * tol_abs
    f6 = lambda v: float(f"{v:.6g}")  # noqa: E731
    exp = {
        "model": name,
        "config_shape": "nested" if c["nested"] else "flat",
        "shards": shards,
        "layer_map": {
            "mla_layers": [l for l in range(c["L"]) if c["is_mla"][l]],
            "kda_layers": [l for l in range(c["L"]) if not c["is_mla"][l]],
            "dense_layers": list(range(c["F"])),
            "attn_res_boundaries": [l for l in range(c["L"]) if l % c["S"] == 0],
            "output_aggregator_sources": 1 + len([l for l in range(c["L"]) if l % c["S"] == 0]),
        },
        "seeds": {"weights": wseed, "prompt": pseed, "long_prompt": lseed},
        "prompt_ids": prompt,
        "generated_ids": gen,
        "generated_ids_recompute": gen_rc,
        "greedy_top2_gaps": [f6(v) for v in top2_gap(glog)],
        "greedy_logits_file": "logits_greedy.f32",
        "greedy_logits_shape": [20, V],
        "tf": {"ids": full, "argmax": tf_arg, "top2_gaps": [f6(v) for v in top2_gap(tfl)],
               "logits_file": "logits_tf.f32", "logits_shape": [len(full), V]},
        "long": {"prompt_ids": lprompt, "generated_ids": lgen, "generated_ids_recompute": lgen_rc,
                 "top2_gaps": [f6(v) for v in top2_gap(llog)]},
        "logits_prompt_ids": lp_ids,
        "logits_file": "logits_step0.f32",
        "logits_shape": [V],
        "logits_argmax": int(np.argmax(l0)),
        "logits_top2_gap": f6(top2_gap(l0)),
        "max_abs_logit": max_abs,
        "min_top2_gap": min_gap,
        "tolerance": {
            "rule": "max|engine - ref| <= rel * max|ref| (model.md §8.5, w = E)",
            "w": E, "rel": rel, "abs_for_logits_step0": rel * max_abs,
        },
        "f64_estimate": {
            "note": "same stored weights evaluated in float64; estimates an f64-accumulating engine",
            "max_abs_diff_logits_step0": float(np.max(np.abs(l0_64 - l0))),
            "max_abs_diff_tf_logits": float(np.max(np.abs(tf64 - tfl))),
            "relative_to_max_abs_logit": float(np.max(np.abs(l0_64 - l0))) / max_abs,
            "max_rel_diff_per_position_tf": float(np.max(np.max(np.abs(tf64 - tfl), axis=1)
                                                         / np.max(np.abs(tf64), axis=1))),
            "tokens_equal": True,
        },
        "reference_incremental_vs_recompute_max_abs_logit_diff": float(np.max(np.abs(glog - glog_rc))),
        "mechanisms": mechanism_stats(m, full),
    }
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    print(f"{name}: min_top2_gap={min_gap:.4g} f64diff={exp['f64_estimate']['max_abs_diff_logits_step0']:.3g} "
          f"tol={rel * max_abs:.3g} ({time.time() - t0:.1f}s)")
    return m, exp


def wired_greedy(model, variant, prompt, n):
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(np.argmax(traps.wired_forward(model, variant, ids)[-1])))
    return ids[len(prompt):]


def fx_attnres_model(name, m, exp):
    """Model-level AttnRes wiring traps on a deep model (tiny13: 13 layers, S=3, blocks
    0-2, 3-5, 6-8, 9-11 complete and 12 in progress; nested14: 14 layers, S=4) and the
    same traps on a 5-layer S=12 truncation, which cannot see some of them (§7,
    'fixture too shallow')."""
    ids = exp["logits_prompt_ids"]
    want = m.forward(ids, m.new_state())[-1]
    assert np.array_equal(traps.wired_forward(m, None, ids)[-1], want)
    tol = exp["tolerance"]["abs_for_logits_step0"]
    shallow = Model(os.path.join(FIX, name), cfg_override={"L": 5, "S": 12})
    sh_want = traps.wired_forward(shallow, None, ids)[-1]
    wr, shallow_sep, tok_changed = {}, {}, {}
    for v, desc in traps.WIRING_TRAPS.items():
        lv = traps.wired_forward(m, v, ids)[-1]
        wr[v] = (desc, {"logits": lv})
        shallow_sep[v] = float(np.max(np.abs(traps.wired_forward(shallow, v, ids)[-1] - sh_want)) / tol)
        tok_changed[v] = wired_greedy(m, v, exp["prompt_ids"], 20) != exp["generated_ids"]
    invisible = [v for v, s in shallow_sep.items() if s < 1.0]
    assert invisible, "expected at least one trap the shallow model cannot see"
    fx = {
        "op": "attnres_model", "spec": "model.md §6.9, §7 (AttnRes: fixture too shallow)",
        "description": f"{name} final-position logits for logits_prompt_ids with the correct wiring "
                       f"(want.logits, identical to {name}/logits_step0.f32) and with each AttnRes "
                       "wiring trap (wrong_*.logits). An engine's logits must be within tolerance of "
                       "want and outside it for every wrong_*. greedy_tokens_changed[trap]: whether "
                       "the trapped wiring also changes the 20 greedy tokens of expected.json. "
                       "shallow_5layer_S12_separation: the same traps on the first 5 layers with "
                       "S=12 (only layer 0 is a boundary), in units of the tolerance; < 1 means a "
                       f"5-layer fixture cannot tell: {invisible}.",
        "dims": {"model": name, "V": len(want), "ids": ids},
        "tolerance": {"atol": tol, "rtol": 0.0},
        "greedy_tokens_changed": tok_changed,
        "shallow_5layer_S12_separation": {k: float(f"{v:.4g}") for k, v in shallow_sep.items()},
    }
    global ATOL, RTOL
    saved = (ATOL, RTOL)
    ATOL, RTOL = tol, 0.0
    try:
        save_op(f"attnres_model_{name}", fx, {"logits": want}, wr, min_sep=20.0)
    finally:
        ATOL, RTOL = saved


# ------------------------------------------------------------------ config and names

def released_config():
    """The released nested config.json as far as model.md §1 describes it."""
    full = list(range(4, 93, 4)) + [93]
    tc = {
        "hidden_size": 7168, "num_hidden_layers": 93, "vocab_size": 163840, "rms_norm_eps": 1e-5,
        "num_attention_heads": 96, "q_lora_rank": 1536, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "mla_use_output_gate": True, "num_experts": 896, "num_experts_per_token": 16,
        "num_shared_experts": 2, "routed_expert_hidden_size": 3584, "moe_intermediate_size": 3072,
        "routed_scaling_factor": 1.0, "moe_renormalize": True, "latent_moe_use_norm": True,
        "first_k_dense_replace": 1, "intermediate_size": 33792, "attn_res_block_size": 12,
        "activation_situ_beta": 4.0, "activation_situ_linear_beta": 25.0,
        "num_nextn_predict_layers": 0, "tie_word_embeddings": False, "num_expert_group": 1,
        "topk_group": 1, "mla_use_nope": True,
        "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized",
                                "group_size": 32},
        "linear_attn_config": {"num_heads": 96, "head_dim": 128, "short_conv_kernel_size": 4,
                               "gate_lower_bound": -5.0, "use_full_rank_gate": True,
                               "full_attn_layers": full,
                               "kda_layers": [i for i in range(1, 94) if i not in full]},
    }
    return {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3",
            "vision_config": {"num_heads": 16, "head_dim": 72, "hidden_size": 1152},
            "text_config": tc}


def fx_config():
    import copy
    rel = released_config()
    tiny = copy.deepcopy(tm.TINY13_CONFIG)
    n14 = tm.nested14_config()

    def expect(cfgj):
        c = k3ref.parse_config(cfgj)
        L = c["L"]
        keys = ("E", "L", "V", "eps", "Hk", "D", "Kc", "gmin", "H", "Rq", "Rkv", "dn", "dr", "dv",
                "Ne", "k", "Ns", "Lam", "I", "rho", "F", "Id", "S", "beta1", "beta2", "P", "dq", "Is",
                "mla_gate", "renorm", "latent_norm")
        return {"dims": {k: c[k] for k in keys},
                "layer_kinds": "".join("M" if c["is_mla"][l] else "K" for l in range(L)),
                "mla_layers": [l for l in range(L) if c["is_mla"][l]],
                "dense_layers": list(range(c["F"])),
                "attn_res_boundaries": [l for l in range(L) if l % c["S"] == 0]}

    def mutate(base, fn):
        d = copy.deepcopy(base)
        fn(d)
        return d

    def tc(d):
        return d["text_config"]

    def lac(d):
        return d["text_config"]["linear_attn_config"]

    refuse = [
        ("flat_missing_full_attn_layers", "MUST", mutate(tiny, lambda d: d.pop("full_attn_layers"))),
        ("nested_missing_full_attn_layers", "MUST", mutate(rel, lambda d: lac(d).pop("full_attn_layers"))),
        ("flat_missing_hidden_size", "MUST", mutate(tiny, lambda d: d.pop("hidden_size"))),
        ("nested_missing_num_heads", "MUST", mutate(rel, lambda d: lac(d).pop("num_heads"))),
        ("nested_missing_situ_beta", "MUST", mutate(rel, lambda d: tc(d).pop("activation_situ_beta"))),
        ("flat_full_attn_layer_999", "MUST", mutate(tiny, lambda d: d.update(full_attn_layers=[4, 8, 12, 999]))),
        ("flat_full_attn_layers_zero_based", "MUST", mutate(tiny, lambda d: d.update(full_attn_layers=[0, 3, 7, 11, 12]))),
        ("flat_full_attn_layer_L_plus_1", "MUST", mutate(tiny, lambda d: d.update(full_attn_layers=[4, 8, 12, 14]))),
        ("flat_full_attn_layers_empty", "MUST", mutate(tiny, lambda d: d.update(full_attn_layers=[]))),
        ("flat_all_layers_mla", "MUST", mutate(tiny, lambda d: d.update(full_attn_layers=list(range(1, 14))))),
        ("flat_topk_gt_num_experts", "MUST", mutate(tiny, lambda d: d.update(num_experts_per_token=9))),
        ("flat_attn_res_block_size_0", "MUST", mutate(tiny, lambda d: d.update(attn_res_block_size=0))),
        ("flat_short_conv_kernel_0", "MUST", mutate(tiny, lambda d: d.update(short_conv_kernel_size=0))),
        ("flat_hidden_size_string", "MUST", mutate(tiny, lambda d: d.update(hidden_size="128"))),
        ("flat_alias_conflict", "MUST", mutate(tiny, lambda d: d.update(activation_situ_beta=5.0))),
        ("flat_duplicate_full_attn_layer", "SHOULD", mutate(tiny, lambda d: d.update(full_attn_layers=[4, 8, 12, 13, 13]))),
        ("nested_kda_layers_disagree", "SHOULD", mutate(rel, lambda d: lac(d).update(kda_layers=lac(d)["kda_layers"][:-1]))),
        ("flat_topk_0", "SHOULD", mutate(tiny, lambda d: d.update(num_experts_per_token=0))),
        ("flat_non_integral_int", "SHOULD", mutate(tiny, lambda d: d.update(hidden_size=128.5))),
        ("flat_bool_wrong_type", "SHOULD", mutate(tiny, lambda d: d.update(moe_renormalize="yes"))),
        ("flat_moe_intermediate_not_32_multiple", "SHOULD", mutate(tiny, lambda d: d.update(moe_intermediate_size=48))),
        ("flat_first_k_dense_gt_L", "SHOULD", mutate(tiny, lambda d: d.update(first_k_dense_replace=14))),
        ("nested_group_size_64", "SHOULD", mutate(rel, lambda d: tc(d)["quantization_config"].update(group_size=64))),
        ("nested_use_full_rank_gate_false", "SHOULD", mutate(rel, lambda d: lac(d).update(use_full_rank_gate=False))),
        ("nested_nextn_layers_1", "SHOULD", mutate(rel, lambda d: tc(d).update(num_nextn_predict_layers=1))),
    ]
    accept = [
        ("released_nested", rel),
        ("tiny13_flat", tiny),
        ("nested14", n14),
        ("flat_with_canonical_aliases", mutate(tiny, lambda d: d.update(
            activation_situ_beta=d.pop("situ_beta"), activation_situ_linear_beta=d.pop("situ_linear_beta")))),
        ("flat_defaults_for_three_booleans", mutate(tiny, lambda d: [d.pop(k) for k in (
            "mla_use_output_gate", "moe_renormalize", "latent_moe_use_norm")])),
    ]
    cases = []
    for name, cfgj in accept:
        cases.append({"name": name, "config": cfgj, "expect": "accept", **expect(cfgj)})
    for name, level, cfgj in refuse:
        try:
            k3ref.parse_config(cfgj)
        except k3ref.ConfigError:
            pass
        else:
            raise AssertionError(f"config case {name} was not refused")
        cases.append({"name": name, "config": cfgj, "expect": "refuse", "level": level})
    rel_exp = expect(rel)
    assert rel_exp["mla_layers"][-2:] == [91, 92] and 3 in rel_exp["mla_layers"]
    assert len(rel_exp["mla_layers"]) == 24 and rel_exp["attn_res_boundaries"] == list(range(0, 93, 12))
    assert expect(tiny)["layer_kinds"] == "KKKMKKKMKKKMM"
    with open(os.path.join(OPS, "config.json"), "w") as f:
        json.dump({"op": "config", "spec": "model.md §1, §2",
                   "description": "Config parsing cases. expect 'accept': dims (symbols of model.md "
                                  "§0, floats as f32 values), layer_kinds (K/M per zero-based layer), "
                                  "mla_layers, dense_layers, attn_res_boundaries (zero-based). expect "
                                  "'refuse': the reader must refuse (level MUST or SHOULD per §1.5). "
                                  "released_nested carries a vision_config with num_heads/head_dim "
                                  "decoys that must not be read.",
                   "cases": cases}, f, indent=1)
        f.write("\n")


def fx_names():
    names = [
        ("language_model.model.layers.1.block_sparse_moe.experts.0.w1.weight_packed", "routed_expert"),
        ("language_model.model.layers.1.block_sparse_moe.experts.895.w3.weight_scale", "routed_expert"),
        ("language_model.model.layers.92.block_sparse_moe.experts.17.w2.weight_packed", "routed_expert"),
        ("language_model.model.layers.1.block_sparse_moe.shared_experts.gate_proj.weight", "trunk"),
        ("language_model.model.layers.1.block_sparse_moe.shared_experts.down_proj.weight", "trunk"),
        ("language_model.model.layers.1.block_sparse_moe.gate.weight", "trunk"),
        ("language_model.model.layers.1.block_sparse_moe.gate.e_score_correction_bias", "trunk"),
        ("language_model.model.layers.1.block_sparse_moe.routed_expert_down_proj.weight", "trunk"),
        ("language_model.model.layers.1.block_sparse_moe.routed_expert_norm.weight", "trunk"),
        ("language_model.model.layers.0.mlp.gate_proj.weight", "trunk"),
        ("language_model.model.layers.0.self_attn.A_log", "trunk"),
        ("language_model.model.layers.3.self_attn.kv_a_proj_with_mqa.weight", "trunk"),
        ("language_model.model.layers.12.self_attention_res_proj.weight", "trunk"),
        ("language_model.model.embed_tokens.weight", "model"),
        ("language_model.lm_head.weight", "model"),
        ("language_model.model.norm.weight", "model"),
        ("language_model.model.output_attn_res_norm.weight", "model"),
        ("language_model.model.output_attn_res_proj.weight", "model"),
        ("vision_tower.encoder.blocks.0.attn.qkv.weight", "non_text"),
        ("mm_projector.proj.0.weight", "non_text"),
    ]
    for n, cls in names:
        if cls == "routed_expert":
            assert k3ref.EXPERT_RE.search(n)
        else:
            assert not k3ref.EXPERT_RE.search(n)
    with open(os.path.join(OPS, "tensor_names.json"), "w") as f:
        json.dump({"op": "tensor_names", "spec": "model.md §3.1, §3.7",
                   "description": "Residency class per tensor name: routed_expert (infix "
                                  "'.block_sparse_moe.experts.<number>.'), trunk (every other per-layer "
                                  "tensor, including shared_experts), model (§3.6, note the lm_head "
                                  "prefix), non_text (vision_tower.*, mm_projector.*).",
                   "cases": [{"name": n, "class": c} for n, c in names]}, f, indent=1)
        f.write("\n")


# ------------------------------------------------------------------ main

def main():
    t0 = time.time()
    os.makedirs(FIX, exist_ok=True)
    if os.path.isdir(OPS):
        shutil.rmtree(OPS)
    os.makedirs(OPS)
    m13, e13 = model_fixture("tiny13", tm.TINY13_CONFIG, tm.init_recipe_10_2, 1234,
                             [list(range(13))], 1235, 2235)
    m14, e14 = model_fixture("nested14", tm.nested14_config(), tm.init_recipe_nested14, 4321,
                             [list(range(0, 7)), list(range(7, 14))], 4322, 5322)
    print(f"models done ({time.time() - t0:.1f}s)")
    fx_rmsnorm()
    fx_l2norm()
    fx_situ()
    fx_shortconv()
    fx_kda_decay()
    fx_kda_recurrence(1, 105)
    fx_kda_recurrence(8, 106)
    fx_kda_layer()
    fx_router()
    fx_attnres()
    fx_mla()
    fx_moe()
    fx_dense_mlp()
    fx_bf16()
    fx_mxfp4()
    fx_layers()
    fx_attnres_model("tiny13", m13, e13)
    fx_attnres_model("nested14", m14, e14)
    fx_config()
    fx_names()
    import check_fixtures
    check_fixtures.main(limit=0.5)
    total = 0
    for root, _, files in os.walk(FIX):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    assert total < 20e6, f"fixtures too large: {total} bytes"
    print(f"all fixtures written: {total / 1e6:.2f} MB in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
