"""The two roundings the export applies, and their straight-through forms for training.

* bf16: truncation, dropping the low 16 bits (model.md §10.3).
* MXFP4 (§5, quantiser of §10.3): per row and 32-element input group, e = floor(log2 max|w|) - 2,
  scale byte e + 127; each element the nearest E2M1 magnitude of w / 2^e, ties to the smaller,
  above 6 saturating to 6, the sign bit set for every negative w; low nibble = even element.
"""
from __future__ import annotations

import torch

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
# Midpoints between consecutive magnitudes: a value equal to a midpoint takes the smaller one.
MIDPOINTS = (E2M1[1:] + E2M1[:-1]) / 2


def bf16_bits(x: torch.Tensor) -> torch.Tensor:
    """float32 -> bf16 bit patterns (int16) by truncation."""
    return (x.detach().to(torch.float32).contiguous().view(torch.int32) >> 16).to(torch.int16)


def bf16_truncate(x: torch.Tensor) -> torch.Tensor:
    """The float32 values bf16 truncation leaves."""
    bits = x.detach().to(torch.float32).contiguous().view(torch.int32) & ~0xFFFF
    return bits.view(torch.float32)


def mxfp4_quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[rows, cols] float -> (packed u8 [rows, cols/2], scale u8 [rows, cols/32])."""
    w = w.detach().to(torch.float32)
    rows, cols = w.shape
    if cols % 32:
        raise ValueError(f"MXFP4 needs whole 32-element groups, got {cols} columns")
    g = w.reshape(rows, cols // 32, 32)
    gmax = g.abs().amax(dim=2)
    if (gmax == 0).any():
        raise ValueError("an all-zero MXFP4 group has no exponent")
    e = torch.floor(torch.log2(gmax)) - 2
    if (e < -127).any() or (e > 127).any():
        raise ValueError("an MXFP4 group exponent is outside -127..127")
    scaled = g.abs() / torch.pow(2.0, e)[..., None]
    # index of the nearest magnitude, ties to the smaller: count midpoints strictly below.
    code = (scaled[..., None] > MIDPOINTS).sum(dim=-1).to(torch.uint8)
    code = code | ((g < 0).to(torch.uint8) << 3)
    code = code.reshape(rows, cols)
    packed = code[:, 0::2] | (code[:, 1::2] << 4)
    if not (code & 7).any():
        raise ValueError("refusing an MXFP4 tensor whose every element rounds to zero")
    return packed.contiguous(), (e + 127).to(torch.uint8).contiguous()


def mxfp4_dequantize(packed: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    rows = packed.shape[0]
    lo = (packed & 0x0F).to(torch.int64)
    hi = (packed >> 4).to(torch.int64)
    code = torch.stack([lo, hi], dim=-1).reshape(rows, -1)
    mag = E2M1[code & 7]
    val = torch.where((code & 8) != 0, -mag, mag)
    s = scale.to(torch.float32)
    mult = torch.where(scale == 255, torch.zeros_like(s), torch.pow(2.0, s - 127))
    return (val.reshape(rows, -1, 32) * mult[..., None]).reshape(rows, -1)


def mxfp4_round(w: torch.Tensor) -> torch.Tensor:
    """What a [.., rows, cols] weight becomes after an MXFP4 round trip (any leading dims)."""
    flat = w.detach().reshape(-1, w.shape[-1])
    packed, scale = mxfp4_quantize(flat)
    return mxfp4_dequantize(packed, scale).reshape(w.shape)


def straight_through(w: torch.Tensor, rounded: torch.Tensor) -> torch.Tensor:
    """Forward sees the rounded weight, backward passes the gradient to w unchanged."""
    return w + (rounded - w).detach()
