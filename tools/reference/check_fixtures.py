#!/usr/bin/env python3
"""Independent re-check of test/fixtures/ops/*.json, reading ONLY the JSON files (as an
engine test would, following tools/reference/README.md) and recomputing every `want`
in float64 from the stored inputs.

    python3 tools/reference/check_fixtures.py

For each fixture it prints the largest |want - f64| in units of the fixture tolerance
(atol + rtol*|want|). This is the justification of the op tolerance: an engine that
accumulates in f64 lands where this f64 recomputation lands, so a ratio well below 1
means the tolerance has room for it. Exact fixtures must match bit for bit.
make_fixtures.py runs this at the end and fails if any ratio reaches 0.5.
"""
import glob
import json
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import k3ref  # noqa: E402
import mxfp4  # noqa: E402

F64 = np.float64
PFX = "language_model.model.layers.{}."


def arr(t, dtype=None):
    np_dtype = {"f32": np.float32, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
                "i32": np.int32}[t["dtype"]]
    a = np.array(t["data"], dtype=np_dtype).reshape(t["shape"])
    return a.astype(dtype) if dtype is not None else a


def ratio(fx, name, got):
    want = arr(fx["want"][name]).astype(F64)
    tol = fx["tolerance"]
    got = np.asarray(got, dtype=F64).reshape(want.shape)
    return float(np.max(np.abs(want - got) / (tol["atol"] + tol["rtol"] * np.abs(want))))


def ins(fx, dtype=F64):
    return {k: arr(v, dtype) for k, v in fx["inputs"].items() if "shape" in v}


def wts(fx, dtype=F64):
    return {k: (arr(v, dtype) if v["dtype"] == "f32" else arr(v)) for k, v in fx["weights"].items()}


def check_rmsnorm(fx):
    i, d = ins(fx), fx["dims"]
    return {"y": k3ref.rmsnorm(i["x"], i["w"], d["eps"])}


def check_l2norm(fx):
    return {"y": k3ref.l2norm(ins(fx)["x"])}


def check_situ_glu(fx):
    x, d = ins(fx)["x"], fx["dims"]
    n = d["n"]
    return {"y": k3ref.situ_glu(x[:, :n], x[:, n:], d["beta1"], d["beta2"])}


def check_shortconv(fx):
    i, d = ins(fx), fx["dims"]
    w = i["w"].reshape(d["P"], d["Kc"])
    h = np.zeros((d["P"], d["Kc"] - 1))
    ys, out = [], {}
    for t in range(d["steps"]):
        y, h = k3ref.shortconv_step(i["x"][t], h, w)
        ys.append(y)
        if t == 4:
            out["hist_after5"] = h
    out["hist_after6"] = h
    out["y"] = np.stack(ys)
    return out


def check_kda_decay(fx):
    i, d = ins(fx), fx["dims"]
    g, a = k3ref.kda_decay(i["z"], i["A_log"], i["dt_bias"], d["Hk"], d["D"], d["gmin"])
    return {"g": g, "alpha": a}


def check_kda_recurrence(fx):
    i, d = ins(fx), fx["dims"]
    S, os_ = i["S_in"], []
    for t in range(d["T"]):
        S, o = k3ref.kda_recurrence_step(S, i["q"][t], i["k"][t], i["v"][t], i["alpha"][t], i["beta"][t])
        os_.append(o)
    return {"o": np.stack(os_), "S_out": S}


def check_kda_layer(fx):
    d = fx["dims"]
    W = wts(fx)
    for s in ("q", "k", "v"):
        W[f"{s}_conv1d.weight"] = W[f"{s}_conv1d.weight"].reshape(d["P"], d["Kc"])
    st = {k: arr(v, F64) for k, v in fx["inputs"]["state_in"].items()}
    cfg = {k: d[k] for k in ("Hk", "D", "Kc", "gmin", "eps")}
    out = k3ref.kda_layer(arr(fx["inputs"]["x"], F64), W, cfg, st)
    return {"out": out, **st}


def check_router(fx):
    d = fx["dims"]
    idx, w = k3ref.router(ins(fx)["x"], wts(fx), {"k": d["k"], "rho": d["routed_scaling_factor"],
                                                  "renorm": d["moe_renormalize"]})
    want_idx = arr(fx["want"]["topk_idx"])
    assert all(set(a) == set(b) for a, b in zip(idx, want_idx)), "router index sets differ"
    assert np.array_equal(idx, want_idx), "router order differs"
    x = ins(fx)["x"]
    return {"weights": w, "scores": k3ref.sigmoid(x @ wts(fx)["gate.weight"].T)}


def check_attnres(fx):
    i, d = ins(fx), fx["dims"]
    phi = (arr(fx["inputs"]["norm_weight"]) * arr(fx["inputs"]["proj_weight"]).reshape(-1)).astype(F64)
    return {"out": k3ref.attn_res(list(i["sources"]), phi, d["eps"])}


def check_mla(fx):
    d = fx["dims"]
    cfg = {k: d[k] for k in ("H", "Rq", "Rkv", "dn", "dr", "dv", "eps")}
    cfg["mla_gate"] = d["mla_use_output_gate"]
    W, x = wts(fx), ins(fx)["x"]
    cache = k3ref.new_mla_cache(cfg, F64)
    o1 = k3ref.mla_layer(x[:d["T_prefill"]], W, cfg, cache)
    o2 = k3ref.mla_layer(x[d["T_prefill"]:], W, cfg, cache)
    return {"out": np.concatenate([o1, o2]), "cache_c_kv": cache["c_kv"], "cache_kr": cache["kr"],
            "cache_kn": cache["kn"], "cache_v": cache["v"]}


def check_moe(fx):
    d = fx["dims"]
    W = wts(fx)
    for wn in ("w1", "w2", "w3"):
        p, s = W.pop(f"experts.{wn}.weight_packed"), W.pop(f"experts.{wn}.weight_scale")
        W["experts." + wn] = np.stack([mxfp4.decode(p[e], s[e]) for e in range(d["Ne"])]).astype(F64)
    cfg = {"k": d["k"], "rho": d["routed_scaling_factor"], "renorm": d["moe_renormalize"],
           "latent_norm": d["latent_moe_use_norm"], "eps": d["eps"], "beta1": d["beta1"],
           "beta2": d["beta2"]}
    return {"out": k3ref.latent_moe(ins(fx)["x"], W, cfg)}


def check_dense_mlp(fx):
    W, d = wts(fx), fx["dims"]
    return {"y": k3ref.dense_mlp(ins(fx)["x"], W["gate_proj.weight"], W["up_proj.weight"],
                                 W["down_proj.weight"], d["beta1"], d["beta2"])}


def check_bf16_matvec(fx):
    bits = arr(fx["inputs"]["w_bf16_bits"])
    w = (bits.astype(np.uint32) << 16).view(np.float32)
    assert np.array_equal(w, arr(fx["inputs"]["w_f32"])), "w_f32 is not the widened bits"
    return {"y": w.astype(F64) @ arr(fx["inputs"]["x"], F64)}


def check_bf16_widen(fx):
    bits = arr(fx["inputs"]["bits"])
    assert np.array_equal(bits.astype(np.uint32) << 16, arr(fx["want"]["f32_bits"]))
    return None


def check_mxfp4_decode(fx):
    i = {k: arr(v) for k, v in fx["inputs"].items()}
    got = {"worked_elements": np.stack([mxfp4.decode(np.full((1, 16), p, np.uint8), np.array([[s]], np.uint8))[0, :2]
                                        for p, s in zip(i["worked_packed"], i["worked_scale"])]),
           "row_decoded": mxfp4.decode(i["row_packed"], i["row_scale"]),
           "rand_decoded": mxfp4.decode(i["rand_packed"], i["rand_scale"])}
    for k, v in got.items():
        w = arr(fx["want"][k])
        assert np.array_equal(w.view(np.uint32), v.astype(np.float32).view(np.uint32)), k
    row = arr(fx["want"]["row_decoded"])[0]
    for bi, e in zip(i["worked_byte_index"], arr(fx["want"]["worked_elements"])):
        assert row[2 * bi] == e[0] and row[2 * bi + 1] == e[1]
    return None


def check_mxfp4_matvec(fx):
    i = {k: arr(v) for k, v in fx["inputs"].items()}
    return {"y": mxfp4.decode(i["packed"], i["scale"]).astype(F64) @ i["x"].astype(F64)}


def check_decoder_layer(fx):
    d = fx["dims"]
    cfg = k3ref.parse_config(d["config"])
    l = d["layer"]
    pre = PFX.format(l)
    raw = {}
    for k, v in fx["weights"].items():
        a = arr(v)
        if ".experts." in k:
            base, wn, part = k.rsplit(".", 2)
            for e in range(a.shape[0]):
                raw[f"{pre}block_sparse_moe.experts.{e}.{wn}.{part}"] = ("U8", a[e])
        else:
            raw[pre + k] = ("F32", a)
    m = k3ref.Model()
    m.cfg, m.dtype = cfg, F64
    m.layers = [None] * cfg["L"]
    m.layers[l] = k3ref.bind_layer(cfg, raw, l, F64)
    r, B = m.decoder_layer(l, arr(fx["inputs"]["h"], F64), list(arr(fx["inputs"]["blocks_in"], F64)),
                           m.new_state())
    return {"out": r, "blocks_out": np.stack(B)}


def check_attnres_model(fx):
    name = fx["dims"]["model"]
    m = k3ref.Model(os.path.join(FIX, name), dtype=F64)
    return {"logits": m.forward(fx["dims"]["ids"], m.new_state())[-1]}


def check_config(fx):
    for case in fx["cases"]:
        if case["expect"] == "refuse":
            try:
                k3ref.parse_config(case["config"])
            except k3ref.ConfigError:
                continue
            raise AssertionError(f"config {case['name']} accepted")
        c = k3ref.parse_config(case["config"])
        for k, v in case["dims"].items():
            assert c[k] == v, (case["name"], k)
        assert case["mla_layers"] == [l for l in range(c["L"]) if c["is_mla"][l]]
    return None


def check_tensor_names(fx):
    for case in fx["cases"]:
        assert bool(k3ref.EXPERT_RE.search(case["name"])) == (case["class"] == "routed_expert")
    return None


CHECKS = {
    "rmsnorm": check_rmsnorm, "l2norm": check_l2norm, "situ_glu": check_situ_glu,
    "shortconv": check_shortconv, "kda_decay": check_kda_decay,
    "kda_recurrence": check_kda_recurrence, "kda_layer": check_kda_layer, "router": check_router,
    "attnres": check_attnres, "mla": check_mla, "latent_moe": check_moe,
    "dense_mlp": check_dense_mlp, "bf16_matvec": check_bf16_matvec, "bf16_widen": check_bf16_widen,
    "mxfp4_decode": check_mxfp4_decode, "mxfp4_matvec": check_mxfp4_matvec,
    "decoder_layer": check_decoder_layer, "attnres_model": check_attnres_model,
    "config": check_config, "tensor_names": check_tensor_names,
}

FIX = os.path.abspath(os.path.join(HERE, "..", "..", "test", "fixtures"))


def main(limit=None):
    worst = {}
    for path in sorted(glob.glob(os.path.join(FIX, "ops", "*.json"))):
        with open(path) as f:
            fx = json.load(f)
        got = CHECKS[fx["op"]](fx)
        name = os.path.basename(path)
        if got is None:
            worst[name] = 0.0
            print(f"{name:32s} exact/structural OK")
            continue
        r = max(ratio(fx, k, v) for k, v in got.items())
        # every trap must also be far outside the tolerance around the f64 recomputation
        trap_min = math.inf
        for t in fx["traps"]:
            wrong = fx[t["key"]]
            sep = max(float(np.max(np.abs(arr(wrong[k]).astype(F64) - np.asarray(v, F64).reshape(wrong[k]["shape"]))
                                   / (fx["tolerance"]["atol"] + fx["tolerance"]["rtol"] * np.abs(arr(fx["want"][k]).astype(F64)))))
                      for k, v in got.items() if k in wrong)
            trap_min = min(trap_min, sep)
        worst[name] = r
        print(f"{name:32s} max |want - f64| = {r:.3g} x tol; nearest trap from f64 = {trap_min:.3g} x tol")
        if limit is not None:
            assert r < limit, f"{name}: f64 recomputation is {r:.3g}x the tolerance"
            assert trap_min > 10, f"{name}: a trap is within 10x tolerance of the f64 recomputation"
    return worst


if __name__ == "__main__":
    main(limit=0.5)
    print("all fixtures re-checked")
