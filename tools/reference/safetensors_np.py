"""Minimal safetensors writer/reader in numpy (model.md §4).

File layout:
    u64 little-endian N | N bytes of UTF-8 JSON header | data section
Header entries: name -> {"dtype", "shape", "data_offsets": [begin, end)} with offsets
relative to the start of the data section. "__metadata__" is skipped.

BF16 tensors are handled as raw uint16 bit patterns; `bf16_truncate` makes them from
f32 by dropping the low 16 bits (model.md §10.3) and `bf16_to_f32` widens them by a
16-bit left shift (exact, §4).
"""
import json
import struct

import numpy as np

# dtype code -> (numpy storage dtype, element size)
DTYPES = {
    "F32": (np.dtype("<f4"), 4),
    "F16": (np.dtype("<f2"), 2),
    "BF16": (np.dtype("<u2"), 2),  # raw bit patterns
    "U8": (np.dtype("u1"), 1),
}

MAX_HEADER = 100 * 1000 * 1000


def bf16_truncate(x):
    """f32 -> bf16 bit patterns (uint16) by truncation (drop the low 16 bits)."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return (bits >> np.uint32(16)).astype(np.uint16)


def bf16_to_f32(bits):
    """bf16 bit patterns (uint16) -> f32, exact 16-bit left shift."""
    b = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return b.view(np.float32)


def round_to_bf16_values(x):
    """The f32 values a bf16-truncated store would hold (truncate then widen)."""
    return bf16_to_f32(bf16_truncate(x))


def write_safetensors(path, tensors, metadata=None):
    """Write tensors in the given order, back to back.

    tensors: list of (name, dtype_code, array). For BF16 the array must be uint16 bit
    patterns; for F32 float32; for U8 uint8.
    Returns the header dict that was written (with data_offsets).
    """
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    blobs = []
    offset = 0
    for name, code, arr in tensors:
        if name in header:
            raise ValueError(f"duplicate tensor name {name}")
        storage, _ = DTYPES[code]
        a = np.ascontiguousarray(arr)
        if a.dtype != storage:
            if code == "BF16" and a.dtype == np.uint16:
                pass
            else:
                raise TypeError(f"{name}: array dtype {a.dtype} does not match {code}")
        data = a.astype(storage, copy=False).tobytes(order="C")
        header[name] = {
            "dtype": code,
            "shape": [int(s) for s in a.shape],
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    hjson = json.dumps(header, separators=(",", ":")).encode("utf-8")
    pad = (8 - len(hjson) % 8) % 8  # pad with spaces so the data section is 8-aligned
    hjson += b" " * pad
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for b in blobs:
            f.write(b)
    return header


def read_header(path):
    """Return (header dict without __metadata__, metadata, data_start, file_size)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: too short")
        (n,) = struct.unpack("<Q", raw)
        f.seek(0, 2)
        size = f.tell()
        if n == 0 or n > MAX_HEADER or 8 + n > size:
            raise ValueError(f"{path}: bad header length {n}")
        f.seek(8)
        hdr = json.loads(f.read(n).decode("utf-8"))
    meta = hdr.pop("__metadata__", None)
    data_start = 8 + n
    for name, ent in hdr.items():
        if "dtype" not in ent or "data_offsets" not in ent or "shape" not in ent:
            raise ValueError(f"{path}: entry {name} lacks dtype/shape/data_offsets")
        if ent["dtype"] not in DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {ent['dtype']}")
        begin, end = ent["data_offsets"]
        numel = int(np.prod(ent["shape"], dtype=np.int64)) if ent["shape"] else 1
        if end - begin != numel * DTYPES[ent["dtype"]][1]:
            raise ValueError(f"{path}: tensor {name} byte length does not match shape")
        if data_start + end > size:
            raise ValueError(f"{path}: tensor {name} extends beyond end of file")
    return hdr, meta, data_start, size


def read_safetensors(path):
    """Read every tensor: returns dict name -> (dtype_code, array in storage dtype)."""
    hdr, _, data_start, _ = read_header(path)
    with open(path, "rb") as f:
        blob = f.read()
    out = {}
    for name, ent in hdr.items():
        storage, _ = DTYPES[ent["dtype"]]
        begin, end = ent["data_offsets"]
        arr = np.frombuffer(blob, dtype=storage, count=(end - begin) // storage.itemsize,
                            offset=data_start + begin).reshape(ent["shape"]).copy()
        out[name] = (ent["dtype"], arr)
    return out


def read_checkpoint_dir(files):
    """Read several shards; a tensor name present in two shards is an error."""
    out = {}
    where = {}
    for p in files:
        for name, v in read_safetensors(p).items():
            if name in out:
                raise ValueError(f"tensor {name} in two shards: {where[name]} and {p}")
            out[name] = v
            where[name] = p
    return out


def to_f32(code, arr):
    """Widen a stored tensor to f32 exactly."""
    if code == "F32":
        return arr.astype(np.float32)
    if code == "BF16":
        return bf16_to_f32(arr)
    if code == "F16":
        return arr.astype(np.float32)
    raise TypeError(f"cannot widen dtype {code} to f32")
