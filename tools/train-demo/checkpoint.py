"""Between the torch model and the released checkpoint layout (model.md §3, §4, §5).

load_model: any checkpoint in the released names (tiny13, nested14, the demo) -> K3 holding the
exact stored values (bf16 widened by shift, MXFP4 dequantised exactly).
export_model: K3 -> the released layout: nested config.json, one shard per layer (its trunk
tensors as one contiguous run, then its routed experts, each expert's six tensors one run), a
last shard with the model-level tensors, and model.safetensors.index.json.
"""
from __future__ import annotations

import json
import os
import re

import torch

from config import Config, load_config, nested_config
from model import K3
from quant import bf16_bits, mxfp4_dequantize, mxfp4_quantize
from safetensors_io import read_dir, to_f32, write_file

PREFIX = "language_model."
EXPERT = re.compile(r"^model\.layers\.(\d+)\.block_sparse_moe\.experts\.(\d+)\.(w[123])\.weight_(packed|scale)$")
# The vectors the release stores as F32 (§3.1); every other float tensor is BF16.
F32_SUFFIXES = ("_conv1d.weight", ".A_log", ".dt_bias", ".o_norm.weight", ".e_score_correction_bias")


def stored_dtype(name: str) -> str:
    return "F32" if name.endswith(F32_SUFFIXES) else "BF16"


def load_model(model_dir: str) -> K3:
    c = load_config(os.path.join(model_dir, "config.json"))
    model = K3(c)
    tensors = read_dir(model_dir)
    own = dict(model.state_dict())
    filled: set[str] = set()
    experts: dict[tuple[int, int, str], dict[str, torch.Tensor]] = {}
    for full, (dtype, t) in tensors.items():
        if not full.startswith(PREFIX):
            continue
        name = full[len(PREFIX):]
        m = EXPERT.match(name)
        if m:
            if dtype != "U8":
                raise ValueError(f"{full}: routed expert tensors are U8")
            experts.setdefault((int(m[1]), int(m[2]), m[3]), {})[m[4]] = t
            continue
        if name not in own:
            raise ValueError(f"{full}: not a tensor of this model")
        value = to_f32(dtype, t)
        if value.numel() != own[name].numel():
            raise ValueError(f"{full}: {value.numel()} elements, the config implies {own[name].numel()}")
        own[name].copy_(value.reshape(own[name].shape))
        filled.add(name)
    for (l, e, w), parts in experts.items():
        stacked = own[f"model.layers.{l}.block_sparse_moe.experts_{w}"]
        stacked[e].copy_(mxfp4_dequantize(parts["packed"], parts["scale"]).reshape(stacked[e].shape))
        filled.add(f"model.layers.{l}.block_sparse_moe.experts_{w}")
    missing = [n for n in own if n not in filled]
    if missing:
        raise ValueError(f"{model_dir}: missing tensors, e.g. {missing[:3]}")
    if c.Hk < c.D:
        for l in range(c.L):
            pad = own.get(f"model.layers.{l}.self_attn.A_log")
            if pad is not None and pad.shape[0] == c.D and (pad[c.Hk:] != 0).any():
                print(f"warning: layer {l} A_log padding is not zero")
    return model


def _stored(name: str, value: torch.Tensor) -> tuple[str, str, torch.Tensor]:
    dtype = stored_dtype(name)
    v = value.detach().to(torch.float32).contiguous()
    return (PREFIX + name, dtype, v if dtype == "F32" else bf16_bits(v))


def export_model(model: K3, out_dir: str, note: str = "", extra_files: dict[str, bytes] | None = None) -> list[str]:
    c: Config = model.c
    os.makedirs(out_dir, exist_ok=True)
    # Shards of an earlier export (another model or shape) would be read as part of this one.
    for old in os.listdir(out_dir):
        if old.endswith(".safetensors") or old == "model.safetensors.index.json":
            os.remove(os.path.join(out_dir, old))
    state = {k: v for k, v in model.state_dict().items()}
    layer_of = lambda n: int(n.split(".")[2]) if n.startswith("model.layers.") else None
    n_shards = c.L + 1
    names = []
    weight_map = {}
    for l in range(c.L):
        trunk = sorted(n for n in state if layer_of(n) == l and ".experts_" not in n)
        run = [_stored(n, state[n]) for n in trunk]
        if not c.is_dense(l):
            base = f"model.layers.{l}.block_sparse_moe"
            for e in range(c.Ne):
                for w in ("w1", "w2", "w3"):
                    packed, scale = mxfp4_quantize(state[f"{base}.experts_{w}"][e])
                    run.append((f"{PREFIX}{base}.experts.{e}.{w}.weight_packed", "U8", packed))
                    run.append((f"{PREFIX}{base}.experts.{e}.{w}.weight_scale", "U8", scale))
        names.append((f"model-{l + 1:05d}-of-{n_shards:06d}.safetensors", run))
    model_level = ["model.embed_tokens.weight", "model.norm.weight", "model.output_attn_res_norm.weight",
                   "model.output_attn_res_proj.weight"] + ([] if c.tie else ["lm_head.weight"])
    names.append((f"model-{n_shards:05d}-of-{n_shards:06d}.safetensors", [_stored(n, state[n]) for n in model_level]))
    for fname, run in names:
        write_file(os.path.join(out_dir, fname), run)
        for tname, _, _ in run:
            weight_map[tname] = fname
    files = {
        "config.json": (json.dumps(nested_config(c, note), indent=2) + "\n").encode(),
        "model.safetensors.index.json": (json.dumps({"metadata": {}, "weight_map": weight_map}, indent=1) + "\n").encode(),
    }
    files.update(extra_files or {})
    for fname, data in files.items():
        tmp = os.path.join(out_dir, f"{fname}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(out_dir, fname))
    return [f for f, _ in names] + list(files)
