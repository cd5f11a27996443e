/**
 * The int8 draft container I8R through its TypeScript wrappers: quantisation by the stated rule
 * (per-row absmax / 127 in f64, round half to even, clipped), the weights f32(scale·q) that every
 * path multiplies by, and the matmul against a TypeScript transcription of the canonical order on
 * those weights; SIMD == scalar == 1, 2, 3 threads; T tokens == one at a time; and the router and
 * kv_b_proj (which read bf16 or f32 only) fed an I8R matrix give the bits of its f32 dequantisation.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { offsetPointer } from "../../../src/native/memory.ts";
import { dequantI8r, i8rRowBytes, matmul, mlaLatentAttention, quantizeI8r, route, type MatrixRef } from "../../../src/native/kernels.ts";
import { initPool } from "../../../src/native/kernel-runtime.ts";
import { bf16ToF32, bits, bytes, dotCanonical, expectBits, expectPathIdentity, f32, f32ToBf16Trunc, fr, freeTestBuffers, rng, u16 } from "../../support/kernels.ts";

afterAll(() => {
  freeTestBuffers();
  initPool();
});

/** The quantisation rule in plain TypeScript: [scale][q…] per row. */
function quantizeRef(w: Uint16Array, rows: number, cols: number): { scales: number[]; q: Int8Array } {
  const scales: number[] = [];
  const q = new Int8Array(rows * cols);
  for (let o = 0; o < rows; o++) {
    let absmax = 0;
    for (let i = 0; i < cols; i++) absmax = Math.max(absmax, Math.abs(bf16ToF32(w[o * cols + i] as number)));
    const scale = fr(absmax / 127);
    scales.push(scale);
    for (let i = 0; i < cols; i++) {
      if (scale === 0) continue;
      const v = bf16ToF32(w[o * cols + i] as number) / scale;
      const floor = Math.floor(v);
      const frac = v - floor;
      const r = frac > 0.5 || (frac === 0.5 && floor % 2 !== 0) ? floor + 1 : floor; // half to even
      q[o * cols + i] = Math.max(-127, Math.min(127, r));
    }
  }
  return { scales, q };
}

describe("I8R: the int8 draft container", () => {
  const rows = 41;
  const cols = 1031; // 64 lane blocks and a tail of 7
  const T = 5;
  const r = rng(13);
  const wb = u16(rows * cols);
  for (let i = 0; i < rows * cols; i++) wb.a[i] = f32ToBf16Trunc(r.normal() * 0.05);
  for (let i = 0; i < cols; i++) wb.a[3 * cols + i] = 0; // an all-zero row
  const packed = bytes(rows * i8rRowBytes(cols));
  const x = f32(T * cols);
  for (let i = 0; i < x.a.length; i++) x.a[i] = r.normal() * 2 ** (r.int(24) - 12);
  const W: MatrixRef = { ptr: packed.ptr, rows, cols, dtype: "I8R" };

  test("quantisation follows the rule: absmax / 127 per row, half to even, clipped; a zero row has scale 0", () => {
    expect(quantizeI8r(wb.ptr, rows, cols, packed.ptr)).toBe(0);
    const want = quantizeRef(wb.a, rows, cols);
    const view = new DataView(packed.a.buffer, packed.a.byteOffset, packed.a.byteLength);
    for (let o = 0; o < rows; o++) {
      const at = o * i8rRowBytes(cols);
      expect(view.getFloat32(at, true)).toBe(want.scales[o] as number);
      expect(new Int8Array(packed.a.buffer, packed.a.byteOffset + at + 4, cols)).toEqual(want.q.subarray(o * cols, (o + 1) * cols));
    }
    expect(want.scales[3]).toBe(0);
    // the largest weight of every row is ±127
    for (let o = 0; o < rows; o++) if (o !== 3) expect(Math.max(...want.q.subarray(o * cols, (o + 1) * cols).map(Math.abs))).toBe(127);
  });

  test("non-finite weights are counted", () => {
    const bad = u16(4);
    bad.a.set([0x3f80, 0x7f80, 0x7fc0, 0xff80]); // 1, +inf, NaN, -inf
    const out = bytes(i8rRowBytes(4));
    expect(quantizeI8r(bad.ptr, 1, 4, out.ptr)).toBe(3);
  });

  test("dequantised weights are f32(scale·q); the matmul is the canonical order on them", () => {
    quantizeI8r(wb.ptr, rows, cols, packed.ptr);
    const wf = f32(rows * cols);
    dequantI8r(W, wf);
    const { scales, q } = quantizeRef(wb.a, rows, cols);
    for (let o = 0; o < rows; o++) for (let i = 0; i < cols; i++) {
      if (wf.a[o * cols + i] !== fr((scales[o] as number) * (q[o * cols + i] as number))) throw new Error(`weight ${o},${i}`);
    }
    const y = f32(T * rows);
    matmul(W, x, y, T);
    const want = new Float32Array(T * rows);
    for (let t = 0; t < T; t++) for (let o = 0; o < rows; o++) want[t * rows + o] = dotCanonical(wf.a, o * cols, x.a, t * cols, cols);
    expectBits(y.a, want, "I8R matmul vs the canonical order");
    const yf = f32(T * rows);
    matmul({ ptr: wf.ptr, rows, cols, dtype: "F32" }, x, yf, T);
    expectBits(y.a, yf.a, "I8R matmul vs the f32 matmul on the dequantised weights");
  });

  test("SIMD == scalar == 1, 2, 3 threads; T tokens == one at a time", () => {
    quantizeI8r(wb.ptr, rows, cols, packed.ptr);
    const y = f32(T * rows);
    const [all] = expectPathIdentity("I8R matmul", () => {
      matmul(W, x, y, T);
      return [y.a.slice()];
    });
    const one = f32(rows);
    for (let t = 0; t < T; t++) {
      matmul(W, { ptr: offsetPointer(x.ptr, t * cols * 4), length: cols }, one, 1);
      expect(bits(one.a)).toEqual(bits((all as Float32Array).subarray(t * rows, (t + 1) * rows)));
    }
  });

  test("the router and kv_b_proj read an I8R matrix as its f32 dequantisation, bit for bit", () => {
    const experts = 24;
    const E = 64;
    const k = 4;
    const wr = u16(experts * E);
    for (let i = 0; i < wr.a.length; i++) wr.a[i] = f32ToBf16Trunc(r.normal() * 0.2);
    const router = bytes(experts * i8rRowBytes(E));
    quantizeI8r(wr.ptr, experts, E, router.ptr);
    const routerF = f32(experts * E);
    dequantI8r({ ptr: router.ptr, rows: experts, cols: E, dtype: "I8R" }, routerF);
    const bias = f32(experts);
    const xs = f32(3 * E);
    for (let i = 0; i < xs.a.length; i++) xs.a[i] = r.normal();
    const outs = [0, 1].map(() => ({ experts: new Int32Array(3 * k), weights: new Float32Array(3 * k) }));
    route({ ptr: router.ptr, rows: experts, cols: E, dtype: "I8R" }, bias, xs, 3, k, true, 2.5, outs[0]!);
    route({ ptr: routerF.ptr, rows: experts, cols: E, dtype: "F32" }, bias, xs, 3, k, true, 2.5, outs[1]!);
    expect(outs[0]!.experts).toEqual(outs[1]!.experts);
    expect(bits(outs[0]!.weights)).toEqual(bits(outs[1]!.weights));

    const shape = { heads: 2, dn: 8, dr: 4, dv: 8, rank: 16 };
    const kvRows = shape.heads * (shape.dn + shape.dv);
    const wk = u16(kvRows * shape.rank);
    for (let i = 0; i < wk.a.length; i++) wk.a[i] = f32ToBf16Trunc(r.normal() * 0.3);
    const kvb = bytes(kvRows * i8rRowBytes(shape.rank));
    quantizeI8r(wk.ptr, kvRows, shape.rank, kvb.ptr);
    const kvbF = f32(kvRows * shape.rank);
    dequantI8r({ ptr: kvb.ptr, rows: kvRows, cols: shape.rank, dtype: "I8R" }, kvbF);
    const positions = 3;
    const q = f32(positions * shape.heads * (shape.dn + shape.dr));
    const ckv = f32(positions * shape.rank);
    const kr = f32(positions * shape.dr);
    for (const b of [q, ckv, kr]) for (let i = 0; i < b.a.length; i++) b.a[i] = r.normal();
    const [a, b] = [f32(positions * shape.heads * shape.dv), f32(positions * shape.heads * shape.dv)];
    mlaLatentAttention(q, { ptr: kvb.ptr, rows: kvRows, cols: shape.rank, dtype: "I8R" }, ckv, kr, a, positions, 0, shape);
    mlaLatentAttention(q, { ptr: kvbF.ptr, rows: kvRows, cols: shape.rank, dtype: "F32" }, ckv, kr, b, positions, 0, shape);
    expectBits(a.a, b.a, "MLA with I8R kv_b_proj vs its dequantisation");
  });
});
