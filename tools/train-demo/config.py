"""The Kimi K3 config (model.md §1), read from either shape into the §0 symbols.

A second reading of the spec, independent of tools/reference and of the engine: every required
field must be present with the right JSON type; nothing is defaulted except the three booleans
§1.2 allows.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Config:
    E: int
    L: int
    V: int
    eps: float
    Hk: int
    D: int
    Kc: int
    gmin: float
    H: int
    Rq: int
    Rkv: int
    dn: int
    dr: int
    dv: int
    Ne: int
    k: int
    Ns: int
    Lam: int
    I: int
    rho: float
    F: int
    Id: int
    S: int
    beta1: float
    beta2: float
    full_attn_layers: tuple[int, ...]  # one-based, as in the file
    mla_gate: bool = True
    renorm: bool = True
    latent_norm: bool = True
    tie: bool = False

    @property
    def P(self) -> int:
        return self.Hk * self.D

    @property
    def dq(self) -> int:
        return self.dn + self.dr

    @property
    def Is(self) -> int:
        return self.Ns * self.I

    def is_mla(self, layer: int) -> bool:
        return (layer + 1) in self.full_attn_layers

    def is_dense(self, layer: int) -> bool:
        return layer < self.F

    def is_boundary(self, layer: int) -> bool:
        return layer % self.S == 0


# symbol -> (nested key relative to text_config, "lac." = linear_attn_config; flat key; kind)
FIELDS: dict[str, tuple[str, str, str]] = {
    "E": ("hidden_size", "hidden_size", "int"),
    "L": ("num_hidden_layers", "num_hidden_layers", "int"),
    "V": ("vocab_size", "vocab_size", "int"),
    "eps": ("rms_norm_eps", "rms_norm_eps", "float"),
    "Hk": ("lac.num_heads", "kda_num_heads", "int"),
    "D": ("lac.head_dim", "kda_head_dim", "int"),
    "Kc": ("lac.short_conv_kernel_size", "short_conv_kernel_size", "int"),
    "gmin": ("lac.gate_lower_bound", "gate_lower_bound", "float"),
    "H": ("num_attention_heads", "num_attention_heads", "int"),
    "Rq": ("q_lora_rank", "q_lora_rank", "int"),
    "Rkv": ("kv_lora_rank", "kv_lora_rank", "int"),
    "dn": ("qk_nope_head_dim", "qk_nope_head_dim", "int"),
    "dr": ("qk_rope_head_dim", "qk_rope_head_dim", "int"),
    "dv": ("v_head_dim", "v_head_dim", "int"),
    "Ne": ("num_experts", "num_experts", "int"),
    "k": ("num_experts_per_token", "num_experts_per_token", "int"),
    "Ns": ("num_shared_experts", "num_shared_experts", "int"),
    "Lam": ("routed_expert_hidden_size", "routed_expert_hidden_size", "int"),
    "I": ("moe_intermediate_size", "moe_intermediate_size", "int"),
    "rho": ("routed_scaling_factor", "routed_scaling_factor", "float"),
    "F": ("first_k_dense_replace", "first_k_dense_replace", "int"),
    "Id": ("intermediate_size", "intermediate_size", "int"),
    "S": ("attn_res_block_size", "attn_res_block_size", "int"),
    "beta1": ("activation_situ_beta", "situ_beta", "float"),
    "beta2": ("activation_situ_linear_beta", "situ_linear_beta", "float"),
}
BOOLEANS = {"mla_gate": "mla_use_output_gate", "renorm": "moe_renormalize", "latent_norm": "latent_moe_use_norm"}
# The spellings of §1.3: either is accepted in either shape; both present and different is refused.
ALIASES = {"activation_situ_beta": "situ_beta", "situ_beta": "activation_situ_beta",
           "activation_situ_linear_beta": "situ_linear_beta", "situ_linear_beta": "activation_situ_linear_beta",
           "num_heads": "kda_num_heads", "kda_num_heads": "num_heads",
           "head_dim": "kda_head_dim", "kda_head_dim": "head_dim"}


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def parse_config(doc: dict) -> Config:
    nested = "text_config" in doc
    text = doc["text_config"] if nested else doc
    lac = text.get("linear_attn_config", {}) if nested else doc
    if not isinstance(text, dict) or not isinstance(lac, dict):
        raise ConfigError("text_config / linear_attn_config must be objects")
    problems: list[str] = []
    values: dict = {}

    def lookup(obj: dict, key: str):
        alias = ALIASES.get(key)
        here = key in obj
        there = alias is not None and alias in obj
        if here and there and obj[key] != obj[alias]:
            problems.append(f"{key} and {alias} disagree")
        return obj[key] if here else obj.get(alias) if there else None

    for sym, (nkey, fkey, kind) in FIELDS.items():
        if nested:
            obj, key = (lac, nkey[4:]) if nkey.startswith("lac.") else (text, nkey)
        else:
            obj, key = doc, fkey
        v = lookup(obj, key)
        if v is None:
            problems.append(f"missing {key}")
        elif not _is_number(v):
            problems.append(f"{key} is not a number")
        elif kind == "int" and not float(v).is_integer():
            problems.append(f"{key} is not an integer")
        else:
            values[sym] = int(v) if kind == "int" else float(v)
    for sym, key in BOOLEANS.items():
        v = text.get(key, True)
        if not isinstance(v, bool):
            problems.append(f"{key} is not a boolean")
        values[sym] = v is True
    fal = lac.get("full_attn_layers")
    if not isinstance(fal, list) or not fal or not all(_is_number(x) and float(x).is_integer() for x in fal):
        problems.append("full_attn_layers must be a non-empty array of integers")
    if problems:
        raise ConfigError("; ".join(problems))
    fal = tuple(int(x) for x in fal)
    L = values["L"]
    if any(x < 1 or x > L for x in fal):
        raise ConfigError(f"full_attn_layers is one-based 1..{L}: {list(fal)}")
    if len(set(fal)) != len(fal) or len(fal) >= L:
        raise ConfigError("full_attn_layers has duplicates or leaves no KDA layer")
    kda = lac.get("kda_layers")
    if kda is not None and (set(kda) & set(fal) or set(kda) | set(fal) != set(range(1, L + 1))):
        raise ConfigError("kda_layers is not the complement of full_attn_layers")
    if lac.get("use_full_rank_gate", True) is not True:
        raise ConfigError("use_full_rank_gate must be true")
    if text.get("num_nextn_predict_layers", 0) != 0:
        raise ConfigError("num_nextn_predict_layers must be 0")
    quant = text.get("quantization_config", doc.get("quantization_config"))
    if isinstance(quant, dict) and quant.get("group_size", 32) != 32:
        raise ConfigError("quantization group size must be 32")
    tie = text.get("tie_word_embeddings", False)
    c = Config(**values, full_attn_layers=fal, tie=tie is True)
    if c.E <= 0 or c.L <= 0 or c.V <= 0 or c.S <= 0 or c.Kc < 1 or not (1 <= c.k <= c.Ne) or not (0 <= c.F <= c.L):
        raise ConfigError("a size is out of range")
    if c.Lam % 32 or c.I % 32:
        raise ConfigError("routed_expert_hidden_size and moe_intermediate_size must be multiples of 32")
    return c


def load_config(path: str) -> Config:
    with open(path, "rb") as f:
        return parse_config(json.loads(f.read()))


def f32(x: float) -> float:
    """The float a config value becomes in the engine (§1.2: floats are f32)."""
    import struct
    return struct.unpack("<f", struct.pack("<f", x))[0]


def nested_config(c: Config, note: str = "") -> dict:
    """The released nested shape (§1.1) for a config, as the export writes it."""
    kda = [l for l in range(1, c.L + 1) if l not in c.full_attn_layers]
    text = {
        "model_type": "kimi_k3_text",
        "hidden_size": c.E, "num_hidden_layers": c.L, "vocab_size": c.V, "rms_norm_eps": c.eps,
        "tie_word_embeddings": c.tie,
        "num_attention_heads": c.H, "q_lora_rank": c.Rq, "kv_lora_rank": c.Rkv,
        "qk_nope_head_dim": c.dn, "qk_rope_head_dim": c.dr, "v_head_dim": c.dv,
        "mla_use_output_gate": c.mla_gate, "mla_use_nope": True,
        "num_experts": c.Ne, "num_experts_per_token": c.k, "num_shared_experts": c.Ns,
        "routed_expert_hidden_size": c.Lam, "moe_intermediate_size": c.I,
        "routed_scaling_factor": c.rho, "moe_renormalize": c.renorm, "latent_moe_use_norm": c.latent_norm,
        "first_k_dense_replace": c.F, "intermediate_size": c.Id, "attn_res_block_size": c.S,
        "activation_situ_beta": c.beta1, "activation_situ_linear_beta": c.beta2,
        "num_nextn_predict_layers": 0, "num_expert_group": 1, "topk_group": 1, "moe_layer_freq": 1,
        "hidden_act": "situ", "moe_router_activation_func": "sigmoid",
        "eos_token_id": c.V - 256 + 2,
        "linear_attn_config": {
            "num_heads": c.Hk, "head_dim": c.D, "short_conv_kernel_size": c.Kc, "gate_lower_bound": c.gmin,
            "use_full_rank_gate": True, "full_attn_layers": list(c.full_attn_layers), "kda_layers": kda,
        },
        "quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized", "num_bits": 4,
                                "group_size": 32, "scale_dtype": "uint8", "targets": "routed experts w1/w2/w3"},
    }
    doc = {"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "kimi_k3", "text_config": text}
    if note:
        doc["k3_note"] = note
    return doc
