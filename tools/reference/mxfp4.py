"""MXFP4 (E2M1 elements, E8M0 scales, group 32 along the input dimension), model.md §5.

Layout of a logical W[rows][cols]:
    weight_packed U8 [rows][cols/2]   byte b holds element 2b in the LOW nibble, 2b+1 in the HIGH
    weight_scale  U8 [rows][cols/32]  byte g scales elements 32g..32g+31 by 2^(s-127)
"""
import numpy as np

GROUP = 32

# E2M1 code -> value (code 8 is -0.0)
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                 -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], dtype=np.float32)
E2M1_MAG = E2M1[:8]
# midpoints between consecutive magnitudes; a magnitude exactly on a midpoint goes DOWN
MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float64)


class QuantiseError(ValueError):
    pass


def e8m0_multiplier(s):
    """2^(s-127) as f32; s = 255 (NaN under OCP MX) is treated as 0, like the original."""
    s = np.asarray(s, dtype=np.int32)
    m = np.ldexp(np.float32(1.0), s - 127).astype(np.float32)
    return np.where(s == 255, np.float32(0.0), m).astype(np.float32)


def unpack_codes(packed):
    """U8 [rows, cols/2] -> codes [rows, cols]; low nibble = even element."""
    packed = np.asarray(packed, dtype=np.uint8)
    rows, half = packed.shape
    codes = np.empty((rows, half * 2), dtype=np.uint8)
    codes[:, 0::2] = packed & 0x0F
    codes[:, 1::2] = packed >> 4
    return codes


def pack_codes(codes):
    codes = np.asarray(codes, dtype=np.uint8)
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def decode(packed, scale):
    """Dequantise to f32 [rows, cols], exactly (every value is E2M1 * 2^(s-127))."""
    codes = unpack_codes(packed)
    rows, cols = codes.shape
    scale = np.asarray(scale, dtype=np.uint8)
    if scale.shape != (rows, cols // GROUP) or cols % GROUP:
        raise ValueError(f"scale shape {scale.shape} does not match packed {packed.shape}")
    mult = np.repeat(e8m0_multiplier(scale), GROUP, axis=1)
    return (E2M1[codes] * mult).astype(np.float32)


def decode_swapped_nibbles(packed, scale):
    """The WRONG decoder (high nibble = even element); used only to build trap fixtures."""
    p = np.asarray(packed, dtype=np.uint8)
    swapped = ((p & 0x0F) << 4 | (p >> 4)).astype(np.uint8)
    return decode(swapped, scale)


def quantise(w, name="tensor"):
    """Quantise f32 W[rows, cols] per model.md §10.3.

    Per row and 32-element group: e = floor(log2(max|w|)) - 2 (refuse e outside
    -127..127), scale byte e+127; code = nearest E2M1 magnitude of |w|/2^e (ties to the
    smaller magnitude, > 6 saturates to 6), sign bit set for negative w.
    Refuses a tensor whose every element rounds to zero.
    Returns (packed U8 [rows, cols/2], scale U8 [rows, cols/32]).
    """
    w = np.asarray(w, dtype=np.float32)
    rows, cols = w.shape
    if cols % GROUP:
        raise QuantiseError(f"{name}: cols {cols} not a multiple of {GROUP}")
    groups = w.reshape(rows, cols // GROUP, GROUP)
    gmax = np.abs(groups).max(axis=2)
    if np.any(gmax == 0) or not np.all(np.isfinite(gmax)):
        raise QuantiseError(f"{name}: a group is all zero or non-finite; exponent undefined")
    # floor(log2(m)) exactly: m = f * 2^x with f in [0.5, 1)  =>  floor(log2 m) = x - 1
    _, x = np.frexp(gmax)
    e = x.astype(np.int32) - 1 - 2
    if e.min() < -127 or e.max() > 127:
        raise QuantiseError(f"{name}: exponent outside -127..127")
    scaled = np.abs(groups).astype(np.float64) / np.ldexp(1.0, e)[:, :, None]
    mag_code = np.searchsorted(MIDPOINTS, scaled, side="left")  # counts midpoints < value
    mag_code = np.minimum(mag_code, 7)
    sign = (groups < 0) | ((groups == 0) & np.signbit(groups))
    codes = (mag_code | (sign.astype(np.int64) << 3)).astype(np.uint8).reshape(rows, cols)
    if np.all((codes & 0x7) == 0):
        raise QuantiseError(f"{name}: every element rounds to zero; refusing to emit it")
    scale = (e + 127).astype(np.uint8)
    return pack_codes(codes), scale


def matvec_reference(packed, scale, x):
    """y = W x using the dequantised matrix, f32 (the reference's way)."""
    return decode(packed, scale) @ np.asarray(x, dtype=np.float32)
