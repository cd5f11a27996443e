/**
 * libk3 kernels through their TypeScript wrappers (src/native/kernels.ts):
 * - every kernel against a direct TypeScript transcription of its model.md equations (bit-exact
 *   where the documented order uses no transcendental; the §8.5 op tolerance otherwise);
 * - path bit-identity (model.md §8.4): every kernel variant this machine runs (scalar reference,
 *   v3, v4, ...) at 1, 2 and 3 threads against the scalar reference, T tokens in one call vs one
 *   at a time, bf16 vs f32 weights;
 * - the MXFP4 worked bytes of model.md §5.4, exactly, and the wrong column a reversed-nibble
 *   decoder gives.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { offsetPointer } from "../../../src/native/memory.ts";
import { attnRes, elementwise, kdaDecay, kdaGatedNorm, kdaQueryScale, kdaRecurrence, l2norm, matmul, matmulMxfp4, mlaLatentAttention, rmsnorm, route, shortConv, situGlu, widenBf16, type F32Ref, type MatrixRef, type Mxfp4Ref } from "../../../src/native/kernels.ts";
import { badScaleBytes, initPool, poolThreads, resetBadScaleBytes, threadsFromEnv } from "../../../src/native/kernel-runtime.ts";
import { mxfp4DecodeRow, setFineGrain, setIsa, isaInUse } from "../../support/kernel-hooks.ts";
import {
  bf16ToF32, bits, bytes, dotCanonical, expectBits, expectClose, expectPathIdentity, f32, f32From, f32ToBf16Trunc, fillNormal, fr, freeTestBuffers,
  mxfp4DotCanonical, mxfp4Element, rng, routedExperts, u16, type ExpertMatrices, type F32Buf,
} from "../../support/kernels.ts";

afterAll(() => {
  freeTestBuffers();
  initPool();
});

// ---------------------------------------------------------------------------------------------
// Spec transcriptions only these tests use (model.md §6), in plain TypeScript

const sigmoidRef = (x: number) => fr(1 / fr(1 + fr(Math.exp(-x))));

function rmsnormRef(x: Float32Array, off: number, n: number, w: Float32Array | undefined, eps: number, out: number[]): void {
  let ss = 0;
  for (let i = 0; i < n; i++) ss += (x[off + i] as number) * (x[off + i] as number);
  const r = fr(1 / Math.sqrt(ss / n + fr(eps)));
  for (let i = 0; i < n; i++) out.push(w ? fr(fr((w[i] as number) * (x[off + i] as number)) * r) : fr((x[off + i] as number) * r));
}

function situRef(g: number, u: number, b1: number, b2: number): number {
  const a = fr(fr(b1 * fr(Math.tanh(fr(g / b1)))) * sigmoidRef(g));
  const b = fr(b2 * fr(Math.tanh(fr(u / b2))));
  return fr(a * b);
}

// ---------------------------------------------------------------------------------------------

describe("thread pool", () => {
  test("K3_THREADS is honoured when valid and refused otherwise", () => {
    expect(threadsFromEnv({})).toBeUndefined();
    expect(threadsFromEnv({ K3_THREADS: "3" })).toBe(3);
    expect(() => threadsFromEnv({ K3_THREADS: "0" })).toThrow(/K3_THREADS/);
    expect(() => threadsFromEnv({ K3_THREADS: "two" })).toThrow(/K3_THREADS/);
    expect(threadsFromEnv({ OMP_NUM_THREADS: "2" })).toBe(2);
    expect(threadsFromEnv({ K3_THREADS: "1", OMP_NUM_THREADS: "2" })).toBe(1);
    expect(() => threadsFromEnv({ OMP_NUM_THREADS: "-4" })).toThrow(/OMP_NUM_THREADS/);
    expect(() => threadsFromEnv({ K3_THREADS: "1.5" })).toThrow(/K3_THREADS/);
    expect(initPool(3)).toBe(3);
    expect(poolThreads()).toBe(3);
    expect(initPool()).toBeGreaterThanOrEqual(1);
  });
});

describe("linear maps (bf16, f32)", () => {
  const rows = 67;
  const cols = 1031; // 64 lane blocks + a tail of 7
  const T = 5;
  const r = rng(1);
  const wb = u16(rows * cols);
  const wf = f32(rows * cols);
  for (let i = 0; i < rows * cols; i++) {
    wb.a[i] = f32ToBf16Trunc(r.normal() * 0.05);
    wf.a[i] = bf16ToF32(wb.a[i] as number);
  }
  const x = f32(T * cols);
  // activations spread over many binades so the summation order shows in the bits
  for (let i = 0; i < x.a.length; i++) x.a[i] = r.normal() * 2 ** (r.int(24) - 12);
  const y = f32(T * rows);
  const W: MatrixRef = { ptr: wb.ptr, rows, cols, dtype: "BF16" };
  const WF: MatrixRef = { ptr: wf.ptr, rows, cols, dtype: "F32" };

  test("follows the canonical 16-lane order bit for bit (and is within §8.5 of the f64 sum)", () => {
    matmul(W, x, y, T);
    const want = new Float32Array(T * rows);
    for (let t = 0; t < T; t++) for (let o = 0; o < rows; o++) want[t * rows + o] = dotCanonical(wf.a, o * cols, x.a, t * cols, cols);
    expectBits(y.a, want, "bf16 matmul vs canonical order");
  });

  test("order-sensitive inputs (cancelling ±2^45 pairs in different lanes) still match the canonical order", () => {
    // Small products added into a lane that holds 2^45 are rounded at 2^-7; the big terms only
    // cancel when the lanes are combined. Any other lane partition or combine tree changes the
    // f32 result, which a plain random test (differences at 1e-16 relative) cannot see.
    const rr = rng(11);
    const n = 1031;
    const m = 16;
    const w2 = f32(m * n);
    const x2 = f32(n);
    for (let i = 0; i < m * n; i++) w2.a[i] = bf16ToF32(f32ToBf16Trunc(rr.normal()));
    for (let i = 0; i < n; i++) x2.a[i] = rr.normal();
    for (let p = 0; p < 40; p++) {
      const i = 2 * p * 11; // pairs (i, i + 5) land in different lanes of the 16
      const big = 2 ** 45 * (1 + rr.uniform());
      x2.a[i] = big;
      x2.a[i + 5] = -(x2.a[i] as number);
      for (let o = 0; o < m; o++) {
        w2.a[o * n + i] = 1;
        w2.a[o * n + i + 5] = 1;
      }
    }
    const y2 = f32(m);
    matmul({ ptr: w2.ptr, rows: m, cols: n, dtype: "F32" }, x2, y2, 1);
    const want = Float32Array.from({ length: m }, (_, o) => dotCanonical(w2.a, o * n, x2.a, 0, n));
    expectBits(y2.a, want, "order-sensitive matmul");
    // and the order matters here: a plain sequential f64 sum gives different bits
    const sequential = Float32Array.from({ length: m }, (_, o) => {
      let acc = 0;
      for (let i = 0; i < n; i++) acc += (w2.a[o * n + i] as number) * (x2.a[i] as number);
      return acc;
    });
    expect(Array.from(bits(sequential))).not.toEqual(Array.from(bits(want)));
    expectPathIdentity("order-sensitive matmul", () => {
      matmul({ ptr: w2.ptr, rows: m, cols: n, dtype: "F32" }, x2, y2, 1);
      return [y2.a];
    });
  });

  test("bf16 and f32 weights give identical bits; T tokens in one call == one at a time", () => {
    matmul(W, x, y, T);
    const yb = y.a.slice();
    matmul(WF, x, y, T);
    expectBits(y.a, yb, "f32 weights vs bf16 weights");
    const one = f32(rows);
    for (let t = 0; t < T; t++) {
      matmul(W, { ptr: offsetPointer(x.ptr, t * cols * 4), length: cols }, one, 1);
      expectBits(one.a, yb.subarray(t * rows, (t + 1) * rows), `token ${t} alone`);
    }
  });

  test("SIMD == scalar == 1, 2, 3 threads", () => {
    expectPathIdentity("bf16 matmul", () => {
      matmul(W, x, y, T);
      return [y.a];
    });
    expectPathIdentity("f32 matmul", () => {
      matmul(WF, x, y, T);
      return [y.a];
    });
  });

  test("argument checks throw", () => {
    expect(() => matmul(W, x, f32(3), T)).toThrow(/y holds 3 floats/);
    expect(() => matmul({ ...W, rows: 0 }, x, y, T)).toThrow(/rows must be a positive/);
    expect(() => matmul(W, x, y, 1.5)).toThrow(/tokens/);
  });

  test("widenBf16 is the exact 16-bit shift", () => {
    const out = f32(rows);
    widenBf16(wb.ptr, out, rows);
    expectBits(out.a, wf.a.subarray(0, rows), "widened bf16");
  });
});

describe("MXFP4", () => {
  test("the worked bytes of model.md §5.4 decode exactly; the reversed-nibble reading gives the wrong column", () => {
    // Row 0 of layers.1.block_sparse_moe.experts.0.w1 at the documented byte indices; 256 columns.
    const cols = 256;
    const packed = bytes(cols / 2);
    const scales = bytes(cols / 32);
    scales.a.fill(121);
    scales.a[7] = 120;
    const known: [number, number][] = [[0, 0x16], [1, 0xb9], [2, 0xce], [3, 0x23], [4, 0x85], [63, 0xfa], [112, 0x4c], [113, 0xb1]];
    for (const [i, b] of known) packed.a[i] = b;
    const out = f32(cols);
    expect(mxfp4DecodeRow(packed.ptr, scales.ptr, cols, out)).toBe(0);
    const want: [number, number][] = [
      [0, 0.0625], [1, 0.0078125], [2, -0.0078125], [3, -0.0234375], [4, -0.0625], [5, -0.03125], [6, 0.0234375],
      [7, 0.015625], [8, 0.046875], [9, -0], [126, -0.015625], [127, -0.09375], [224, -0.015625], [225, 0.015625],
      [226, 0.00390625], [227, -0.01171875],
    ];
    for (const [c, v] of want) expect(Object.is(out.a[c], v)).toBe(true); // exact, including the sign of −0
    // high nibble = even element (the trap): the documented wrong start 0.0078125, 0.0625, −0.0234375, −0.0078125
    const swapped = bytes(cols / 2);
    for (let i = 0; i < cols / 2; i++) swapped.a[i] = ((packed.a[i] as number) << 4 | (packed.a[i] as number) >> 4) & 0xff;
    const wrong = f32(cols);
    mxfp4DecodeRow(swapped.ptr, scales.ptr, cols, wrong);
    expect(Array.from(wrong.a.subarray(0, 4))).toEqual([0.0078125, 0.0625, -0.0234375, -0.0078125]);
    expect(Array.from(wrong.a.subarray(0, 4))).not.toEqual(Array.from(out.a.subarray(0, 4)));
  });

  const rows = 45;
  const cols = 352; // 11 groups: two blocks of four, three left over
  const T = 3;
  const r = rng(2);
  const packed = bytes((rows * cols) / 2);
  const scales = bytes((rows * cols) / 32);
  for (let i = 0; i < packed.a.length; i++) packed.a[i] = r.int(256);
  for (let i = 0; i < scales.a.length; i++) scales.a[i] = 118 + r.int(8);
  scales.a[3] = 255;
  scales.a[200] = 255;
  const x = f32(T * cols);
  for (let i = 0; i < x.a.length; i++) x.a[i] = r.normal() * 2 ** (r.int(16) - 8);
  const y = f32(T * rows);
  const M: Mxfp4Ref = { packed: packed.ptr, scales: scales.ptr, rows, cols };

  test("matvec follows the §8.3 group order bit for bit, counts 255 scales, matches decode-then-dot", () => {
    resetBadScaleBytes();
    expect(matmulMxfp4(M, x, y, T)).toBe(2);
    expect(matmulMxfp4(M, x, y, T)).toBe(2);
    expect(badScaleBytes()).toBe(4); // the running count a run reports adds every call's
    resetBadScaleBytes();
    expect(badScaleBytes()).toBe(0);
    const want = new Float32Array(T * rows);
    const dense = new Float32Array(T * rows);
    for (let t = 0; t < T; t++) {
      for (let o = 0; o < rows; o++) {
        want[t * rows + o] = mxfp4DotCanonical(packed.a, scales.a, cols, o, x.a, t * cols);
        let s = 0;
        for (let c = 0; c < cols; c++) s += mxfp4Element(packed.a, scales.a, cols, o, c) * (x.a[t * cols + c] as number);
        dense[t * rows + o] = s;
      }
    }
    expectBits(y.a, want, "MXFP4 matvec vs canonical order");
    expectClose(y.a, dense, "MXFP4 matvec vs dequantise-then-dot");
  });

  test("order-sensitive inputs (cancelling ±2^45 within and across groups) match the §8.3 order", () => {
    const rr = rng(12);
    const m = 12;
    const n = 256;
    const pk = bytes((m * n) / 2);
    const sc = bytes((m * n) / 32);
    for (let i = 0; i < pk.a.length; i++) pk.a[i] = rr.int(256);
    sc.a.fill(126); // one scale everywhere, so ±B products cancel exactly across groups too
    const xs = f32(n);
    for (let i = 0; i < n; i++) xs.a[i] = rr.normal();
    for (let o = 0; o < m; o++) {
      for (let g = 0; g < n / 32; g++) {
        // elements 32g+0 and 32g+3 (lanes 0 and 3) carry ±B with code 2 (1.0) and equal scale
        pk.a[o * (n / 2) + 16 * g] = ((pk.a[o * (n / 2) + 16 * g] as number) & 0xf0) | 2;
        pk.a[o * (n / 2) + 16 * g + 1] = ((pk.a[o * (n / 2) + 16 * g + 1] as number) & 0x0f) | (2 << 4);
      }
    }
    // groups 0-3: +B in group 2h, −B in group 2h+1 (cancel only when groups are summed);
    // groups 4-7: +B and −B in lanes 0 and 3 of the same group (cancel at the lane combine).
    for (let h = 0; h < 2; h++) {
      xs.a[64 * h] = 2 ** 45 * (1 + rr.uniform());
      xs.a[64 * h + 32 + 3] = -(xs.a[64 * h] as number);
    }
    for (let g = 4; g < n / 32; g++) {
      xs.a[32 * g] = 2 ** 45 * (1 + rr.uniform());
      xs.a[32 * g + 3] = -(xs.a[32 * g] as number);
    }
    const ys = f32(m);
    matmulMxfp4({ packed: pk.ptr, scales: sc.ptr, rows: m, cols: n }, xs, ys, 1);
    const want = Float32Array.from({ length: m }, (_, o) => mxfp4DotCanonical(pk.a, sc.a, n, o, xs.a, 0));
    expectBits(ys.a, want, "order-sensitive MXFP4");
    const sequential = Float32Array.from({ length: m }, (_, o) => {
      let acc = 0;
      for (let c = 0; c < n; c++) acc += mxfp4Element(pk.a, sc.a, n, o, c) * (xs.a[c] as number);
      return acc;
    });
    expect(Array.from(bits(sequential))).not.toEqual(Array.from(bits(want)));
    expectPathIdentity("order-sensitive MXFP4", () => {
      matmulMxfp4({ packed: pk.ptr, scales: sc.ptr, rows: m, cols: n }, xs, ys, 1);
      return [ys.a];
    });
  });

  test("a block with a 255 scale after blocks of eight groups: groups still added to the row total in order", () => {
    // The one-token wide path adds a block's scaled group sums to the total while decoding the
    // next block, and a block holding a 255 scale takes its groups one at a time. Row totals:
    // group 8 gives +2^60, group 9 gives +1 (lost against 2^60), group 17 gives −2^60, group 16
    // is a 255 scale. In group order the total is 0; adding group 17 before groups 8-9 gives 1.
    const m = 4; // two row pairs of the wide path
    const n = 32 * 24;
    const pk = bytes((m * n) / 2);
    const sc = bytes((m * n) / 32);
    pk.a.fill(0); // code 0: +0
    sc.a.fill(127); // 2^0
    const xs = f32(n);
    xs.a.fill(0);
    xs.a[32 * 8] = 2 ** 60;
    xs.a[32 * 9] = 1;
    xs.a[32 * 17] = 2 ** 60;
    for (let o = 0; o < m; o++) {
      pk.a[o * (n / 2) + 16 * 8] = 2; // +1.0 (element 0 is the low nibble)
      pk.a[o * (n / 2) + 16 * 9] = 2;
      pk.a[o * (n / 2) + 16 * 17] = 10; // −1.0
      sc.a[o * (n / 32) + 16] = 255;
    }
    const M4: Mxfp4Ref = { packed: pk.ptr, scales: sc.ptr, rows: m, cols: n };
    const ys = f32(m);
    const want = Float32Array.from({ length: m }, (_, o) => mxfp4DotCanonical(pk.a, sc.a, n, o, xs.a, 0));
    expect(Array.from(want)).toEqual([0, 0, 0, 0]);
    expectPathIdentity("255 scale after deferred blocks", () => {
      expect(matmulMxfp4(M4, xs, ys, 1)).toBe(m);
      expectBits(ys.a, want, "group order across a 255 block");
      return [ys.a];
    });
  });

  test("SIMD == scalar == 1, 2, 3 threads; T tokens == one at a time", () => {
    const base = expectPathIdentity("MXFP4 matvec", () => {
      matmulMxfp4(M, x, y, T);
      return [y.a];
    })[0] as Float32Array;
    const one = f32(rows);
    for (let t = 0; t < T; t++) {
      matmulMxfp4(M, { ptr: offsetPointer(x.ptr, t * cols * 4), length: cols }, one, 1);
      expectBits(one.a, base.subarray(t * rows, (t + 1) * rows), `token ${t} alone`);
    }
  });
});

describe("norms", () => {
  const r = rng(3);
  const n = 133;
  const rows = 4;
  const x = f32(rows * n);
  fillNormal(x, r, 3);
  const w = f32(n);
  fillNormal(w, r, 0.1, 1);
  const y = f32(rows * n);

  test("RMSNorm: f64 Σx², f32 scale, (w·x)·r — bit for bit; without gain too", () => {
    rmsnorm(x, w, y, rows, n, 1e-5);
    const want: number[] = [];
    for (let i = 0; i < rows; i++) rmsnormRef(x.a, i * n, n, w.a, 1e-5, want);
    expectBits(y.a, Float32Array.from(want), "rmsnorm");
    rmsnorm(x, undefined, y, rows, n, 1e-6);
    const want2: number[] = [];
    for (let i = 0; i < rows; i++) rmsnormRef(x.a, i * n, n, undefined, 1e-6, want2);
    expectBits(y.a, Float32Array.from(want2), "rmsnorm without gain");
  });

  test("L2Norm: SUM of squares, eps 1e-6 inside the root", () => {
    l2norm(x, y, rows, n);
    const want: number[] = [];
    for (let i = 0; i < rows; i++) {
      let ss = 0;
      for (let j = 0; j < n; j++) ss += (x.a[i * n + j] as number) ** 2;
      const rr = fr(1 / Math.sqrt(ss + 1e-6));
      for (let j = 0; j < n; j++) want.push(fr((x.a[i * n + j] as number) * rr));
    }
    expectBits(y.a, Float32Array.from(want), "l2norm");
  });

  test("path identity", () => {
    expectPathIdentity("norms", () => {
      rmsnorm(x, w, y, rows, n, 1e-5);
      const a = y.a.slice();
      l2norm(x, y, rows, n);
      return [a, y.a];
    });
  });
});

describe("elementwise", () => {
  const r = rng(4);
  const n = 40_013; // several parallel chunks plus a ragged tail
  const x = f32(n);
  const g = f32(n);
  for (let i = 0; i < n; i++) {
    x.a[i] = r.normal() * 10 ** (r.int(6) - 2);
    g.a[i] = r.normal() * 10 ** (r.int(6) - 2);
  }
  const y = f32(n);

  test("transcendentals against Math (within the op tolerance)", () => {
    const cases: [Parameters<typeof elementwise>[0], (v: number) => number][] = [
      ["exp", (v) => Math.exp(Math.max(Math.min(v, 80), -80))],
      ["sigmoid", (v) => 1 / (1 + Math.exp(-v))],
      ["tanh", Math.tanh],
      ["silu", (v) => v / (1 + Math.exp(-v))],
      ["softplus", (v) => (v > 20 ? v : Math.log1p(Math.exp(v)))],
    ];
    const xc = f32(n);
    for (let i = 0; i < n; i++) xc.a[i] = Math.max(Math.min(x.a[i] as number, 80), -80);
    for (const [op, ref] of cases) {
      elementwise(op, xc, undefined, y, n);
      expectClose(y.a, Array.from(xc.a, ref), op, 1e-30, 2e-7);
    }
  });

  test("SiTU-GLU: caps engage at large magnitudes, |y| ≤ β1·β2 with 100 attained; σ of the uncapped gate", () => {
    const mags = [0.1, 1, 4, 25, 100, 1000];
    const gate = f32From(mags.flatMap((m) => Array(8).fill(m)));
    const up = f32From(mags.flatMap((m) => Array(8).fill(-m)));
    const out = f32(gate.length);
    situGlu(gate, up, out, gate.length, 4, 25);
    expectClose(out.a, Array.from(gate.a, (gv, i) => situRef(gv, up.a[i] as number, 4, 25)), "situ");
    for (const v of out.a) expect(Math.abs(v)).toBeLessThanOrEqual(100);
    expect(out.a[out.length - 1]).toBe(-100);
    // random inputs too
    situGlu(x, g, y, n, 4, 25);
    expectClose(y.a, Array.from(x.a, (xv, i) => situRef(xv, g.a[i] as number, 4, 25)), "situ random");
  });

  test("gate, add and axpy round like f32 (no fused multiply-add)", () => {
    elementwise("gate", x, g, y, n);
    expectClose(y.a, Array.from(x.a, (xv, i) => fr(xv * sigmoidRef(g.a[i] as number))), "gate");
    elementwise("add", x, g, y, n);
    expectBits(y.a, Float32Array.from(x.a, (xv, i) => xv + (g.a[i] as number)), "add");
    elementwise("axpy", x, g, y, n, 0.3);
    expectBits(y.a, Float32Array.from(x.a, (xv, i) => xv + fr(fr(0.3) * (g.a[i] as number))), "axpy");
  });

  test("path identity (every op)", () => {
    expectPathIdentity("elementwise", () =>
      (["exp", "sigmoid", "tanh", "silu", "gate", "add", "axpy", "situ"] as const).map((op) => {
        elementwise(op, x, g, y, n, 0.7, 25);
        return y.a.slice();
      }),
    );
  });
});

describe("ShortConv", () => {
  const r = rng(5);
  const C = 37;
  const K = 4;
  const steps = 5;
  const taps = f32(C * K);
  fillNormal(taps, r, 0.4);
  const x = f32((steps + 1) * C);
  fillNormal(x, r);

  function reference(): { y: number[]; hist: number[] } {
    const hist = new Array(C * (K - 1)).fill(0);
    const y: number[] = [];
    for (let t = 0; t <= steps; t++) {
      for (let c = 0; c < C; c++) {
        let pre = fr((taps.a[c * K + K - 1] as number) * (x.a[t * C + c] as number));
        for (let j = 0; j < K - 1; j++) pre = fr(pre + fr((taps.a[c * K + j] as number) * (hist[c * (K - 1) + j] as number)));
        y.push(fr(pre * sigmoidRef(pre)));
      }
      for (let c = 0; c < C; c++) {
        for (let j = 0; j < K - 2; j++) hist[c * (K - 1) + j] = hist[c * (K - 1) + j + 1];
        hist[c * (K - 1) + K - 2] = x.a[t * C + c];
      }
    }
    return { y, hist };
  }

  test("5 steps from zero history then a continuation step match the spec; history carried", () => {
    const hist = f32(C * (K - 1));
    const y = f32((steps + 1) * C);
    shortConv(x, taps, hist, y, steps, C, K);
    shortConv({ ptr: offsetPointer(x.ptr, steps * C * 4), length: C }, taps, hist, { ptr: offsetPointer(y.ptr, steps * C * 4), length: C }, 1, C, K);
    const want = reference();
    expectClose(y.a, want.y, "shortconv outputs");
    expectBits(hist.a, Float32Array.from(want.hist), "shortconv history");
  });

  test("path identity; all steps in one call == one per call", () => {
    const hist = f32(C * (K - 1));
    const y = f32((steps + 1) * C);
    const base = expectPathIdentity("shortconv", () => {
      hist.a.fill(0);
      shortConv(x, taps, hist, y, steps + 1, C, K);
      return [y.a, hist.a];
    });
    hist.a.fill(0);
    for (let t = 0; t <= steps; t++) {
      shortConv({ ptr: offsetPointer(x.ptr, t * C * 4), length: C }, taps, hist, { ptr: offsetPointer(y.ptr, t * C * 4), length: C }, 1, C, K);
    }
    expectBits(y.a, base[0] as Float32Array, "one step per call");
  });
});

describe("KDA", () => {
  const r = rng(6);
  const H = 4;
  const D = 24; // vector lanes plus a tail
  const P = H * D;
  const T = 8;

  test("decay: A_log per HEAD, dt_bias inside, gmin·σ, exp", () => {
    const z = f32(T * P);
    fillNormal(z, r);
    const aLog = f32From([-0.4, 0.1333, 0.6667, 1.2]);
    const dt = f32(P);
    fillNormal(dt, r, 0.5);
    const alpha = f32(T * P);
    const g = f32(T * P);
    kdaDecay(z, aLog, dt, alpha, g, T, H, D, -5);
    const wantG: number[] = [];
    for (let t = 0; t < T; t++) {
      for (let h = 0; h < H; h++) {
        const a = fr(Math.exp(aLog.a[h] as number));
        for (let d = 0; d < D; d++) {
          const u = fr(a * fr((z.a[t * P + h * D + d] as number) + (dt.a[h * D + d] as number)));
          wantG.push(fr(-5 * sigmoidRef(u)));
        }
      }
    }
    expectClose(g.a, wantG, "log-decay g");
    expectClose(alpha.a, wantG.map((v) => fr(Math.exp(v))), "retention α");
    expectPathIdentity("kda decay", () => {
      kdaDecay(z, aLog, dt, alpha, g, T, H, D, -5);
      return [alpha.a, g.a];
    });
  });

  const q = f32(T * P);
  const k = f32(T * P);
  const v = f32(T * P);
  const alpha = f32(T * P);
  const beta = f32(T * H);
  fillNormal(q, r);
  fillNormal(k, r);
  fillNormal(v, r);
  for (let i = 0; i < alpha.a.length; i++) alpha.a[i] = 0.005 + 0.99 * r.uniform();
  for (let i = 0; i < beta.a.length; i++) beta.a[i] = r.uniform();
  l2norm(q, q, T * H, D);
  l2norm(k, k, T * H, D);
  const state = f32(H * D * D);
  const out = f32(T * P);

  /** §6.6 recurrence in f32 (fround every step): decay, read u, write, output from the updated state. */
  function recurrenceRef(steps: number): { o: Float32Array; S: Float32Array } {
    const S = new Float32Array(H * D * D);
    const o = new Float32Array(steps * P);
    const qs = kdaQueryScale(D);
    for (let t = 0; t < steps; t++) {
      for (let h = 0; h < H; h++) {
        const off = t * P + h * D;
        const s = S.subarray(h * D * D, (h + 1) * D * D);
        for (let i = 0; i < D; i++) for (let j = 0; j < D; j++) s[i * D + j] = fr((alpha.a[off + i] as number) * (s[i * D + j] as number));
        const u = new Float32Array(D);
        for (let i = 0; i < D; i++) for (let j = 0; j < D; j++) u[j] = fr((u[j] as number) + fr((k.a[off + i] as number) * (s[i * D + j] as number)));
        const b = beta.a[t * H + h] as number;
        for (let i = 0; i < D; i++) {
          const kb = fr((k.a[off + i] as number) * b);
          for (let j = 0; j < D; j++) s[i * D + j] = fr((s[i * D + j] as number) + fr(kb * fr((v.a[off + j] as number) - (u[j] as number))));
        }
        for (let i = 0; i < D; i++) {
          const qi = fr((q.a[off + i] as number) * qs);
          for (let j = 0; j < D; j++) o[off + j] = fr((o[off + j] as number) + fr(qi * (s[i * D + j] as number)));
        }
      }
    }
    return { o, S };
  }

  test("recurrence at 1 step and 8 steps equals the §6.6 order bit for bit (state too)", () => {
    for (const steps of [1, 8]) {
      state.a.fill(0);
      kdaRecurrence(q, k, v, alpha, beta, state, out, steps, H, D);
      const want = recurrenceRef(steps);
      expectBits(out.a.subarray(0, steps * P), want.o, `recurrence output, ${steps} steps`);
      expectBits(state.a, want.S, `recurrence state, ${steps} steps`);
    }
  });

  test("recurrence: path identity; 8 tokens in one call == one per call", () => {
    const base = expectPathIdentity("kda recurrence", () => {
      state.a.fill(0);
      kdaRecurrence(q, k, v, alpha, beta, state, out, T, H, D);
      return [out.a, state.a];
    });
    state.a.fill(0);
    const at = (b: F32Buf, t: number, w: number): F32Ref => ({ ptr: offsetPointer(b.ptr, t * w * 4), length: w });
    for (let t = 0; t < T; t++) kdaRecurrence(at(q, t, P), at(k, t, P), at(v, t, P), at(alpha, t, P), at(beta, t, H), state, at(out, t, P), 1, H, D);
    expectBits(out.a, base[0] as Float32Array, "one token per call");
    expectBits(state.a, base[1] as Float32Array, "state, one token per call");
  });

  test("gated norm: RMSNorm per head with the shared gain FIRST, then σ(gate)", () => {
    const gain = f32(D);
    fillNormal(gain, r, 0.1, 1);
    const gate = f32(T * P);
    fillNormal(gate, r, 2);
    const y = f32(T * P);
    kdaGatedNorm(out, gain, gate, y, T, H, D, 1e-5);
    const normed: number[] = [];
    for (let row = 0; row < T * H; row++) rmsnormRef(out.a, row * D, D, gain.a, 1e-5, normed);
    expectClose(y.a, normed.map((nv, i) => fr(nv * sigmoidRef(gate.a[i] as number))), "gated norm");
    expectPathIdentity("kda gated norm", () => {
      kdaGatedNorm(out, gain, gate, y, T, H, D, 1e-5);
      return [y.a];
    });
  });
});

describe("MLA attention in the latent space (kv_b_proj absorbed)", () => {
  // Three shapes (zig/kernels/mla.zig's tiles: head vectors of 4 or 8 lanes, 32-position
  // blocks, channel tiles of 3 or 6 vectors). The first: 10 heads (a whole vector and a part),
  // R = 37 (tiles, a part tile and a scalar tail; the v-out dot 2 x 16 lanes + 5), dv odd. The
  // second has no rope slot, R = 70 and 3 heads. The third runs 70 positions (two whole blocks
  // and a part, whole and part tiles of positions) over 37 heads (a whole score tile of head
  // vectors and a rest; value head groups and a rest) and R = 101, dn 9 (absorb rows 4 + 4 + 1).
  const shapes = [
    { heads: 10, dn: 24, dr: 8, dv: 21, rank: 37, positions: 13 },
    { heads: 3, dn: 5, dr: 0, dv: 7, rank: 70, positions: 13 },
    { heads: 37, dn: 9, dr: 3, dv: 5, rank: 101, positions: 70 },
  ];

  function setup(shape: (typeof shapes)[number], seed: number) {
    const r = rng(seed);
    const { heads: H, dn, dr, dv, rank: R, positions: N } = shape;
    const q = f32(N * H * (dn + dr));
    const ckv = f32(N * R);
    const kr = f32(N * dr);
    fillNormal(q, r, 2);
    fillNormal(ckv, r, 1);
    fillNormal(kr, r, 2);
    const rows = H * (dn + dv);
    const wb = u16(rows * R);
    const wf = f32(rows * R);
    for (let i = 0; i < rows * R; i++) {
      wb.a[i] = f32ToBf16Trunc(r.normal() * 0.3);
      wf.a[i] = bf16ToF32(wb.a[i] as number);
    }
    const W: MatrixRef = { ptr: wb.ptr, rows, cols: R, dtype: "BF16" };
    const WF: MatrixRef = { ptr: wf.ptr, rows, cols: R, dtype: "F32" };
    return { q, ckv, kr, wf, W, WF, out: f32(N * H * dv) };
  }

  /** exp of each value through libk3's one exp (numerics.zig), as the kernel's softmax takes it. */
  function libExp(values: number[]): number[] {
    const x = f32From(values);
    elementwise("exp", x, undefined, x, values.length);
    return Array.from(x.a.subarray(0, values.length));
  }

  /** zig/kernels/mla.zig's documented order, steps 1-5, transcribed with plain f64 numbers. */
  function latentReference(shape: (typeof shapes)[number], s: ReturnType<typeof setup>): Float32Array {
    const { heads: H, dn, dr, dv, rank: R, positions: N } = shape;
    const dq = dn + dr;
    const w = s.wf.a;
    const scale = fr(1 / Math.sqrt(dq)); // dq = dn + dr: NOT dn, NOT R
    const o = new Float32Array(N * H * dv);
    for (let t = 0; t < N; t++) {
      for (let h = 0; h < H; h++) {
        const qOff = (t * H + h) * dq;
        const wk = h * (dn + dv) * R;
        const ql = Array.from({ length: R }, (_, r) => {
          let acc = 0;
          for (let i = 0; i < dn; i++) acc += (w[wk + i * R + r] as number) * (s.q.a[qOff + i] as number);
          return fr(acc);
        });
        const scores: number[] = [];
        for (let p = 0; p <= t; p++) {
          let acc = 0;
          for (let r = 0; r < R; r++) acc += (ql[r] as number) * (s.ckv.a[p * R + r] as number);
          for (let i = 0; i < dr; i++) acc += (s.q.a[qOff + dn + i] as number) * (s.kr.a[p * dr + i] as number);
          scores.push(fr(fr(acc) * scale));
        }
        const m = Math.max(...scores);
        const e = libExp(scores.map((v) => fr(v - m)));
        let Z = 0;
        for (const ev of e) Z += ev;
        const wts = e.map((ev) => fr(ev / Z));
        const ol = Array.from({ length: R }, (_, r) => {
          let acc = 0;
          for (let p = 0; p <= t; p++) acc += (wts[p] as number) * (s.ckv.a[p * R + r] as number);
          return fr(acc);
        });
        for (let j = 0; j < dv; j++) o[(t * H + h) * dv + j] = dotCanonical(w, (h * (dn + dv) + dn + j) * R, ol, 0, R);
      }
    }
    return o;
  }

  /** The expanded formulation of model.md 6.7 steps 4-7, all in f64 (keys and values re-expanded). */
  function expandedReference(shape: (typeof shapes)[number], s: ReturnType<typeof setup>): Float64Array {
    const { heads: H, dn, dr, dv, rank: R, positions: N } = shape;
    const dq = dn + dr;
    const w = s.wf.a;
    const expand = (row: number, p: number) => {
      let acc = 0;
      for (let r = 0; r < R; r++) acc += (w[row * R + r] as number) * (s.ckv.a[p * R + r] as number);
      return acc;
    };
    const o = new Float64Array(N * H * dv);
    for (let t = 0; t < N; t++) {
      for (let h = 0; h < H; h++) {
        const qOff = (t * H + h) * dq;
        const scores: number[] = [];
        for (let p = 0; p <= t; p++) {
          let acc = 0;
          for (let i = 0; i < dn; i++) acc += (s.q.a[qOff + i] as number) * expand(h * (dn + dv) + i, p);
          for (let i = 0; i < dr; i++) acc += (s.q.a[qOff + dn + i] as number) * (s.kr.a[p * dr + i] as number);
          scores.push(acc / Math.sqrt(dq));
        }
        const m = Math.max(...scores);
        const e = scores.map((v) => Math.exp(v - m));
        const Z = e.reduce((x, y) => x + y, 0);
        for (let j = 0; j < dv; j++) {
          let acc = 0;
          for (let p = 0; p <= t; p++) acc += ((e[p] as number) / Z) * expand(h * (dn + dv) + dn + j, p);
          o[(t * H + h) * dv + j] = acc;
        }
      }
    }
    return o;
  }

  shapes.forEach((shape, k) => {
    const { heads: H, dn, dr, dv, positions: N } = shape;
    const dq = dn + dr;
    const name = `H ${H}, dn ${dn}, dr ${dr}, dv ${dv}, R ${shape.rank}, ${N} positions`;

    test(`${name}: the documented order bit for bit; scalar = SIMD = 1, 2, 3 threads; bf16 = f32 weights`, () => {
      const s = setup(shape, 70 + k);
      const want = latentReference(shape, s);
      mlaLatentAttention(s.q, s.W, s.ckv, s.kr, s.out, N, 0, shape);
      expectBits(s.out.a, want, "latent attention vs its documented order");
      const loaded = isaInUse();
      setIsa("scalar");
      try {
        mlaLatentAttention(s.q, s.W, s.ckv, s.kr, s.out, N, 0, shape);
        expectBits(s.out.a, want, "the scalar path vs its documented order");
      } finally {
        setIsa(loaded);
      }
      expectPathIdentity("latent attention", () => {
        mlaLatentAttention(s.q, s.W, s.ckv, s.kr, s.out, N, 0, shape);
        return [s.out.a];
      });
      mlaLatentAttention(s.q, s.WF, s.ckv, s.kr, s.out, N, 0, shape);
      expectBits(s.out.a, want, "f32 kv_b_proj vs bf16");
    });

    test(`${name}: within 2e-6 relative of the expanded formulation in f64`, () => {
      const s = setup(shape, 80 + k);
      mlaLatentAttention(s.q, s.W, s.ckv, s.kr, s.out, N, 0, shape);
      const ref = expandedReference(shape, s);
      const largest = ref.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
      let worst = 0;
      ref.forEach((v, i) => {
        worst = Math.max(worst, Math.abs((s.out.a[i] as number) - v));
      });
      // One f32 rounding of ql and of ol, f32 scores and probabilities: a few f32 ulps of the
      // largest output (measured: 1.2e-7 and 2.0e-7). The expanded f32 form errs alike.
      expect(worst / largest).toBeLessThan(2e-6);
    });

    test(`${name}: prefill == one position per call == a continued prefill; future positions invisible`, () => {
      const s = setup(shape, 90 + k);
      mlaLatentAttention(s.q, s.W, s.ckv, s.kr, s.out, N, 0, shape);
      const base = s.out.a.slice();
      const one = f32(H * dv);
      for (let t = 0; t < N; t++) {
        mlaLatentAttention({ ptr: offsetPointer(s.q.ptr, t * H * dq * 4), length: H * dq }, s.W, s.ckv, s.kr, one, 1, t, shape);
        expectBits(one.a, base.subarray(t * H * dv, (t + 1) * H * dv), `position ${t} incrementally`);
      }
      const rest = f32((N - 5) * H * dv);
      mlaLatentAttention({ ptr: offsetPointer(s.q.ptr, 5 * H * dq * 4), length: (N - 5) * H * dq }, s.W, s.ckv, s.kr, rest, N - 5, 5, shape);
      expectBits(rest.a, base.subarray(5 * H * dv), "continued prefill");
      s.ckv.a[(N - 1) * shape.rank] = (s.ckv.a[(N - 1) * shape.rank] as number) + 100;
      if (dr > 0) s.kr.a[(N - 1) * dr] = (s.kr.a[(N - 1) * dr] as number) + 100;
      mlaLatentAttention(s.q, s.W, s.ckv, s.kr, s.out, N, 0, shape);
      expectBits(s.out.a.subarray(0, (N - 1) * H * dv), base.subarray(0, (N - 1) * H * dv), "earlier positions after changing the last");
      expect(Array.from(bits(s.out.a.subarray((N - 1) * H * dv)))).not.toEqual(Array.from(bits(base.subarray((N - 1) * H * dv))));
    });
  });

  test("argument checks: kv_b_proj of the wrong shape, a short cache", () => {
    const shape = shapes[0] as (typeof shapes)[number];
    const s = setup(shape, 99);
    const N = shape.positions;
    expect(() => mlaLatentAttention(s.q, { ...s.W, rows: s.W.rows - 1 }, s.ckv, s.kr, s.out, N, 0, shape)).toThrow(/kv_b_proj is/);
    expect(() => mlaLatentAttention(s.q, s.W, s.ckv, s.kr, s.out, N, 1, shape)).toThrow(/(ckv|kr) holds \d+ floats, needs/);
  });
});

describe("Attention Residuals", () => {
  test("9 sources of different scales: keys normalised, values raw, softmax over sources", () => {
    const r = rng(8);
    const E = 96;
    const T = 4;
    const n = 9;
    const sources = Array.from({ length: n }, (_, i) => {
      const s = f32(T * E);
      fillNormal(s, r, 0.05 * 3 ** i);
      return s;
    });
    const phi = f32(E);
    for (let j = 0; j < E; j++) phi.a[j] = fr((Math.abs(r.normal()) + 0.5) * r.normal());
    const out = f32(T * E);
    const probs = f32(T * n);
    attnRes(sources, phi, out, probs, T, E, 1e-5);
    const want: number[] = [];
    const wantP: number[] = [];
    for (let t = 0; t < T; t++) {
      const scores = sources.map((s) => {
        const row = s.a.subarray(t * E, (t + 1) * E);
        let ss = 0;
        for (const v of row) ss += v * v;
        const rr = fr(1 / Math.sqrt(ss / E + fr(1e-5)));
        let acc = 0;
        for (let j = 0; j < E; j++) acc += fr((row[j] as number) * rr) * (phi.a[j] as number);
        return fr(acc);
      });
      const m = Math.max(...scores);
      const e = scores.map((sv) => fr(Math.exp(fr(sv - m))));
      const Z = e.reduce((a, b) => a + b, 0);
      const p = e.map((ev) => fr(ev / Z));
      wantP.push(...p);
      for (let j = 0; j < E; j++) {
        let acc = 0;
        for (let i = 0; i < n; i++) acc = fr(acc + fr((p[i] as number) * ((sources[i] as F32Buf).a[t * E + j] as number)));
        want.push(acc);
      }
    }
    expectClose(probs.a, wantP, "attnres probabilities");
    expectClose(out.a, want, "attnres output");
    expectPathIdentity("attnres", () => {
      attnRes(sources, phi, out, undefined, T, E, 1e-5);
      return [out.a];
    });
    // a single source is the identity, bit for bit
    attnRes([sources[4] as F32Buf], phi, out, undefined, T, E, 1e-5);
    expectBits(out.a, (sources[4] as F32Buf).a, "single source");
  });
});

describe("router", () => {
  const r = rng(9);
  const E = 128;
  const Ne = 8;
  const K = 2;
  const T = 6;
  const wf = f32(Ne * E);
  fillNormal(wf, r, 0.02); // clustered scores: the bias decides
  const wb = u16(Ne * E);
  for (let i = 0; i < Ne * E; i++) {
    wb.a[i] = f32ToBf16Trunc(wf.a[i] as number);
    wf.a[i] = bf16ToF32(wb.a[i] as number);
  }
  const bias = f32From(Array.from({ length: Ne }, (_, i) => -0.15 + (0.3 * i) / (Ne - 1)));
  const x = f32(T * E);
  fillNormal(x, r);

  function reference(useBias: boolean, rho: number): { idx: number[][]; w: number[][] } {
    const idx: number[][] = [];
    const w: number[][] = [];
    for (let t = 0; t < T; t++) {
      const s: number[] = [];
      for (let e = 0; e < Ne; e++) {
        let acc = 0;
        for (let i = 0; i < E; i++) acc += (wf.a[e * E + i] as number) * (x.a[t * E + i] as number); // sequential
        s.push(sigmoidRef(fr(acc)));
      }
      const c = s.map((sv, e) => (useBias ? fr(sv + (bias.a[e] as number)) : sv));
      const order = c.map((cv, e) => [cv, e] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]).slice(0, K).map(([, e]) => e);
      const ws = order.map((e) => s[e] as number);
      const sum = ws.reduce((a, b) => a + b, 0);
      const inv = fr(1 / (sum + 1e-20));
      idx.push(order);
      w.push(ws.map((wv) => fr(fr(wv * inv) * fr(rho))));
    }
    return { idx, w };
  }

  test("bias selects (sets exact), weights are the unbiased renormalised scores × ρ", () => {
    const experts = new Uint32Array(T * K);
    const weights = new Float32Array(T * K);
    const scores = f32(T * Ne);
    route({ ptr: wb.ptr, rows: Ne, cols: E, dtype: "BF16" }, bias, x, T, K, true, 2.5, { experts, weights, scores });
    const want = reference(true, 2.5);
    const unbiased = reference(false, 2.5);
    let changed = 0;
    for (let t = 0; t < T; t++) {
      expect(Array.from(experts.subarray(t * K, (t + 1) * K))).toEqual(want.idx[t] as number[]);
      if ((want.idx[t] as number[]).join() !== (unbiased.idx[t] as number[]).join()) changed++;
    }
    expect(changed).toBeGreaterThan(0); // the fixture can fail: the bias changes selections
    expectClose(weights, want.w.flat(), "router weights");
    // the f32 copy of the same matrix gives identical bits
    const experts2 = new Uint32Array(T * K);
    const weights2 = new Float32Array(T * K);
    route({ ptr: wf.ptr, rows: Ne, cols: E, dtype: "F32" }, bias, x, T, K, true, 2.5, { experts: experts2, weights: weights2 });
    expect(Array.from(experts2)).toEqual(Array.from(experts));
    expectBits(weights2, weights, "router f32 vs bf16");
    // path identity
    expectPathIdentity("router", () => {
      route({ ptr: wb.ptr, rows: Ne, cols: E, dtype: "BF16" }, bias, x, T, K, true, 2.5, { experts: experts2, weights: weights2, scores });
      return [weights2.slice(), Float32Array.from(experts2), scores.a];
    });
  });

  test("logits are the strictly sequential f64 sum (2^53 swallows every 1 before −2^53 cancels it)", () => {
    const n = 18;
    const w1 = f32From(new Array(n).fill(1));
    const x1 = f32From([2 ** 53, ...new Array(16).fill(1), -(2 ** 53)]);
    const experts = new Uint32Array(1);
    const weights = new Float32Array(1);
    const scores = f32(1);
    route({ ptr: w1.ptr, rows: 1, cols: n, dtype: "F32" }, f32(1), x1, 1, 1, false, 1, { experts, weights, scores });
    expect(scores.a[0]).toBe(0.5); // σ(0); any lane order would keep some of the 1s
  });

  test("ties go to the lowest index", () => {
    const zeros = f32(Ne * E);
    const experts = new Uint32Array(K);
    const weights = new Float32Array(K);
    route({ ptr: zeros.ptr, rows: Ne, cols: E, dtype: "F32" }, f32(Ne), x, 1, K, false, 1, { experts, weights });
    expect(Array.from(experts)).toEqual([0, 1]);
    expect(Array.from(weights)).toEqual([0.5, 0.5]);
  });
});

describe("routed experts (LatentMoE step 3)", () => {
  test("the kernels composed as the model composes them == the spec loop over experts in top-k order", () => {
    const r = rng(10);
    const lam = 64;
    const inter = 96;
    const T = 3;
    const K = 2;
    const makeMatrix = (rows: number, cols: number) => {
      const p = bytes((rows * cols) / 2);
      const s = bytes((rows * cols) / 32);
      for (let i = 0; i < p.a.length; i++) p.a[i] = r.int(256);
      for (let i = 0; i < s.a.length; i++) s.a[i] = 123 + r.int(4);
      return { p, s, rows, cols };
    };
    const experts = Array.from({ length: 3 }, () => ({ w1: makeMatrix(inter, lam), w3: makeMatrix(inter, lam), w2: makeMatrix(lam, inter) }));
    const sel = [2, 0, 1, 2, 0, 1];
    const mx = (m: ReturnType<typeof makeMatrix>) => ({ packed: m.p.ptr, scales: m.s.ptr, rows: m.rows, cols: m.cols });
    const picks: ExpertMatrices[] = sel.map((e) => {
      const m = experts[e] as (typeof experts)[number];
      return { w1: mx(m.w1), w3: mx(m.w3), w2: mx(m.w2) };
    });
    const weights = Float32Array.from([0.7, 0.3, 0.6, 0.4, 0.5, 0.5]);
    const z = f32(T * lam);
    fillNormal(z, r);
    const acc = f32(T * lam);
    routedExperts(z, picks, weights, acc, T, K, lam, inter, 4, 25);
    const dense = (m: ReturnType<typeof makeMatrix>, v: ArrayLike<number>) =>
      Array.from({ length: m.rows }, (_, o) => {
        let s = 0;
        for (let c = 0; c < m.cols; c++) s += mxfp4Element(m.p.a, m.s.a, m.cols, o, c) * (v[c] as number);
        return fr(s);
      });
    const want: number[] = [];
    for (let t = 0; t < T; t++) {
      const a = new Array(lam).fill(0);
      for (let j = 0; j < K; j++) {
        const m = experts[sel[t * K + j] as number] as (typeof experts)[number];
        const zt = z.a.subarray(t * lam, (t + 1) * lam);
        const gv = dense(m.w1, zt);
        const uv = dense(m.w3, zt);
        const h = gv.map((g, i) => situRef(g, uv[i] as number, 4, 25));
        const d = dense(m.w2, h);
        for (let i = 0; i < lam; i++) a[i] = fr(a[i] + fr((weights[t * K + j] as number) * (d[i] as number)));
      }
      want.push(...a);
    }
    expectClose(acc.a, want, "routed experts");
    expectPathIdentity("routed experts", () => {
      routedExperts(z, picks, weights, acc, T, K, lam, inter, 4, 25);
      return [acc.a];
    });
  });
});
