/** Exact widening of stored floats to f32 (model.md section 4: bf16 is a 16-bit shift). */
import type { Dtype } from "../checkpoint/safetensors.ts";

function f16ToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24; // zero and subnormals
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** `count` values of `bytes` (little-endian `dtype`) as f32. */
export function widenToF32(bytes: Uint8Array, dtype: Dtype, count: number): Float32Array {
  const out = new Float32Array(count);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  switch (dtype) {
    case "F32":
      for (let i = 0; i < count; i++) out[i] = view.getFloat32(4 * i, true);
      return out;
    case "BF16": {
      const bits = new Uint32Array(out.buffer);
      for (let i = 0; i < count; i++) bits[i] = view.getUint16(2 * i, true) << 16;
      return out;
    }
    case "F16":
      for (let i = 0; i < count; i++) out[i] = f16ToF32(view.getUint16(2 * i, true));
      return out;
    case "U8":
      throw new Error("U8 tensors are MXFP4 payloads, not floats");
  }
}

/** The AttnRes fold φ = norm ⊙ proj, each element rounded once to f32 (exact for bf16 inputs). */
export function foldPhi(norm: Float32Array, proj: Float32Array): Float32Array {
  const phi = new Float32Array(norm.length);
  for (let i = 0; i < phi.length; i++) phi[i] = Math.fround((norm[i] as number) * (proj[i] as number));
  return phi;
}
