"""safetensors read and write (model.md §4) for the demo trainer, with torch tensors.

BF16 tensors travel as their raw 16-bit patterns (torch.int16 views) so nothing rounds behind our
back: widening is the 16-bit shift, narrowing is done by the caller (bf16.py).
"""
from __future__ import annotations

import json
import os
import struct

import torch

ELEMENT_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1}
TORCH_DTYPE = {"BF16": torch.int16, "F16": torch.float16, "F32": torch.float32, "U8": torch.uint8}


class SafetensorsError(ValueError):
    pass


def read_header(path: str) -> tuple[int, dict]:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise SafetensorsError(f"{path}: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", raw)
        if n == 0 or 8 + n > size or n > 100_000_000:
            raise SafetensorsError(f"{path}: header length {n} does not fit a {size}-byte file")
        header = json.loads(f.read(n))
    entries = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (begin, end) = e["dtype"], e["shape"], e["data_offsets"]
        if dtype not in ELEMENT_BYTES:
            raise SafetensorsError(f"{path}: {name}: unsupported dtype {dtype}")
        numel = 1
        for d in shape:
            numel *= d
        if end - begin != numel * ELEMENT_BYTES[dtype] or 8 + n + end > size:
            raise SafetensorsError(f"{path}: {name}: byte range disagrees with its shape or the file")
        entries[name] = (dtype, tuple(shape), 8 + n + begin, end - begin)
    return 8 + n, entries


def read_dir(model_dir: str) -> dict[str, tuple[str, torch.Tensor]]:
    """Every tensor of every shard in a directory: name -> (dtype, tensor in its stored form)."""
    out: dict[str, tuple[str, torch.Tensor]] = {}
    shards = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if not shards:
        raise SafetensorsError(f"{model_dir}: no .safetensors files")
    for shard in shards:
        path = os.path.join(model_dir, shard)
        _, entries = read_header(path)
        with open(path, "rb") as f:
            data = f.read()
        for name, (dtype, shape, offset, length) in entries.items():
            if name in out:
                raise SafetensorsError(f"{name} appears in two shards")
            buf = bytearray(data[offset:offset + length])
            t = torch.frombuffer(buf, dtype=TORCH_DTYPE[dtype]).reshape(shape) if length else torch.empty(shape, dtype=TORCH_DTYPE[dtype])
            out[name] = (dtype, t.clone())
    return out


def to_f32(dtype: str, t: torch.Tensor) -> torch.Tensor:
    """Exact widening of a stored float tensor (§4: bf16 is a 16-bit left shift)."""
    if dtype == "F32":
        return t.clone()
    if dtype == "BF16":
        return (t.to(torch.int32) << 16).view(torch.float32)
    if dtype == "F16":
        return t.to(torch.float32)
    raise SafetensorsError(f"{dtype} is not a float dtype")


def write_file(path: str, tensors: list[tuple[str, str, torch.Tensor]]) -> None:
    """Write tensors in the order given (so layer runs stay contiguous), through a temp file."""
    header: dict = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, dtype, t in tensors:
        want = TORCH_DTYPE[dtype]
        if t.dtype != want:
            raise SafetensorsError(f"{name}: tensor is {t.dtype}, {dtype} needs {want}")
        blob = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
    os.replace(tmp, path)
