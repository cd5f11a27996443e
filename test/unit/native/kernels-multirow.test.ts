/**
 * Multi-token matmuls: with T > 1 the bf16/f32 and MXFP4 kernels load and widen (or decode)
 * each weight once for several tokens, and every y[t][o] must still be the one-token result,
 * bit for bit (model.md §8.3, §8.4). For T in {1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 32, 33, 64}
 * (token tiles of the kernels up to AVX2 bf16's 12, and balanced groups of them, each group a
 * panel of its own) and shapes that are multiples of none of the kernels' blocks (bf16: rows
 * across AVX-512's 3-row tiles and the 64- and 66-row blocks, cols of every residue 1 … 15 mod 16, some
 * across one or two column blocks of 768 (AVX-512) or 1,024; MXFP4: rows across
 * the 32-row blocks, group counts across the 4-group blocks, 255 scales), one call equals:
 * - T calls with T = 1, which equal the TypeScript transcription of the canonical order;
 * - every kernel variant this machine runs (the scalar reference, v3, v4, ...) at 1, 2 and 3
 *   threads, the pool splitting jobs into one-item chunks at 2 and 3;
 * - for bf16, the same call with the weights widened to f32.
 * The routed experts as the model computes them (each expert's matmuls over every token that
 * chose it, in one multi-token call; src/model/blocks.ts) equal the kernels called one token
 * at a time, and the hidden activations match expert by expert.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { offsetPointer } from "../../../src/native/memory.ts";
import { axpy, matmul, matmulMxfp4, situGlu, type F32Ref, type MatrixRef, type Mxfp4Ref } from "../../../src/native/kernels.ts";
import { initPool } from "../../../src/native/kernel-runtime.ts";
import {
  bf16ToF32, bytes, dotCanonical, executionPaths, expectBits, f32, f32ToBf16Trunc, freeTestBuffers, mxfp4DotCanonical, onPath, rng, u16, type F32Buf,
} from "../../support/kernels.ts";

afterAll(() => {
  freeTestBuffers();
  initPool();
});

const tokenCounts = [1, 2, 3, 4, 5, 7, 8, 9, 12, 16, 32, 33, 64];
const maxTokens = Math.max(...tokenCounts);

/** The execution paths every multi-token result must be identical across (every variant, 1-3 threads). */
const paths = executionPaths();

/**
 * On every execution path, the call of each token count T (`call`, writing y) gives the first T
 * rows of `want`, bit for bit; y is filled with NaN before each call, so a row it skipped shows.
 */
function expectEveryPath(call: (T: number) => void, y: F32Buf, rows: number, want: Float32Array, counts: readonly number[], label: string): void {
  for (const path of paths) {
    onPath(path, () => {
      for (const T of counts) {
        y.a.fill(NaN);
        call(T);
        expectBits(y.a.subarray(0, T * rows), want.subarray(0, T * rows), `${label}, T = ${T}, ${path.name}`);
      }
    });
  }
}

/** Token t's row of a [T][n] activation buffer, as its own reference. */
function tokenRow(x: F32Ref, t: number, n: number): F32Ref {
  return { ptr: offsetPointer(x.ptr, t * n * 4), length: n };
}

/** Activations over many binades, so any change of summation order shows in the bits. */
function spreadActivations(n: number, r: ReturnType<typeof rng>, binades: number): F32Buf {
  const x = f32(n);
  for (let i = 0; i < n; i++) x.a[i] = r.normal() * 2 ** (r.int(2 * binades) - binades);
  return x;
}

describe("bf16 / f32 matmul: T tokens in one call == T calls with T = 1, on every path", () => {
  // every residue 1 … 15 of cols mod 16 (49k ≡ k), rows of every residue mod the 3-row tiles;
  // then larger shapes across the 64-row and 768- and 1,024-column blocks, one with no 16-lane
  // body at all and one with no tail
  const shapes: [number, number][] = [
    ...Array.from({ length: 15 }, (_, i): [number, number] => [3 + 2 * (i + 1), 49 * (i + 1)]),
    [37, 529], [70, 1039], [5, 1543], [33, 7], [3, 2051],
    // cols a multiple of 16, as the model's are: no tail, across the column blocks
    [41, 1552],
  ];
  shapes.forEach(([rows, cols], s) => {
    test(`${rows} x ${cols} (cols ≡ ${cols % 16} mod 16)`, () => {
      const r = rng(100 + s);
      const wb = u16(rows * cols);
      const wf = f32(rows * cols);
      for (let i = 0; i < rows * cols; i++) {
        wb.a[i] = f32ToBf16Trunc(r.normal() * 0.05);
        wf.a[i] = bf16ToF32(wb.a[i] as number);
      }
      const W: MatrixRef = { ptr: wb.ptr, rows, cols, dtype: "BF16" };
      const WF: MatrixRef = { ptr: wf.ptr, rows, cols, dtype: "F32" };
      const x = spreadActivations(maxTokens * cols, r, 12);
      const y = f32(maxTokens * rows);
      // the per-token oracle: T = 1 calls, which follow the canonical order exactly
      const one = f32(rows);
      const want = new Float32Array(maxTokens * rows);
      const canonical = new Float32Array(maxTokens * rows);
      for (let t = 0; t < maxTokens; t++) {
        matmul(W, tokenRow(x, t, cols), one, 1);
        want.set(one.a, t * rows);
        for (let o = 0; o < rows; o++) canonical[t * rows + o] = dotCanonical(wf.a, o * cols, x.a, t * cols, cols);
      }
      expectBits(want, canonical, `${rows}x${cols}: T = 1 vs the canonical order`);
      expectEveryPath((T) => matmul(W, x, y, T), y, rows, want, tokenCounts, `${rows}x${cols}`);
      expectEveryPath((T) => matmul(WF, x, y, T), y, rows, want, tokenCounts, `${rows}x${cols}, f32 weights`);
    });
  });

  test("more than 64 tokens: the widened path's runs of eight token groups, and the run after them", () => {
    // 65 tokens are nine groups (eight of 7 and one of 8, or so): one run of eight sharing a
    // widening, then a run of one; 130 are two full runs and a third. 70 rows cross the 66-row
    // blocks, 1,552 columns two 768-column blocks and a third.
    const r = rng(31);
    const rows = 70;
    const cols = 1552;
    const counts = [65, 130];
    const T = Math.max(...counts);
    const wb = u16(rows * cols);
    for (let i = 0; i < rows * cols; i++) wb.a[i] = f32ToBf16Trunc(r.normal() * 0.05);
    const W: MatrixRef = { ptr: wb.ptr, rows, cols, dtype: "BF16" };
    const x = spreadActivations(T * cols, r, 12);
    const y = f32(T * rows);
    const one = f32(rows);
    const want = new Float32Array(T * rows);
    for (let t = 0; t < T; t++) {
      matmul(W, tokenRow(x, t, cols), one, 1);
      want.set(one.a, t * rows);
    }
    expectEveryPath((count) => matmul(W, x, y, count), y, rows, want, counts, `${rows}x${cols}`);
  });

  test("order-sensitive inputs: cancelling ±2^45 pairs across lanes and column blocks, many tokens", () => {
    // Small products added into a lane that holds 2^45 round at 2^-7, and the big terms cancel
    // only when the lanes combine: a tiling that re-associated lanes across the 512-column
    // blocks, or shared one token's lanes with another's, would change the bits.
    const rr = rng(7);
    const rows = 35;
    const cols = 1100;
    const T = 9;
    const wf = f32(rows * cols);
    for (let i = 0; i < rows * cols; i++) wf.a[i] = bf16ToF32(f32ToBf16Trunc(rr.normal()));
    const x = f32(T * cols);
    for (let i = 0; i < T * cols; i++) x.a[i] = rr.normal();
    for (let t = 0; t < T; t++) {
      for (let p = 0; p < 40; p++) {
        const i = (2 * p * 13 + 7 * t) % (cols - 600); // pairs (i, i + 517): different lanes and blocks
        const big = 2 ** 45 * (1 + rr.uniform()) * (t % 2 === 0 ? 1 : -1);
        x.a[t * cols + i] = big;
        x.a[t * cols + i + 517] = -big;
        for (let o = 0; o < rows; o++) {
          wf.a[o * cols + i] = 1;
          wf.a[o * cols + i + 517] = 1;
        }
      }
    }
    const y = f32(T * rows);
    const WF: MatrixRef = { ptr: wf.ptr, rows, cols, dtype: "F32" };
    const want = new Float32Array(T * rows);
    const sequential = new Float32Array(T * rows);
    for (let t = 0; t < T; t++) {
      for (let o = 0; o < rows; o++) {
        want[t * rows + o] = dotCanonical(wf.a, o * cols, x.a, t * cols, cols);
        let s = 0;
        for (let i = 0; i < cols; i++) s += (wf.a[o * cols + i] as number) * (x.a[t * cols + i] as number);
        sequential[t * rows + o] = s;
      }
    }
    // the inputs do depend on the order: a plain sequential f64 sum gives other bits
    expect(Array.from(sequential)).not.toEqual(Array.from(want));
    for (const path of paths) {
      onPath(path, () => {
        matmul(WF, x, y, T);
        expectBits(y.a, want, `order-sensitive, ${path.name}`);
      });
    }
  });
});

interface Mx {
  M: Mxfp4Ref;
  packed: Uint8Array;
  scales: Uint8Array;
  bad: number;
}

function mxfp4Matrix(rows: number, cols: number, r: ReturnType<typeof rng>, badAt: number[] = []): Mx {
  const p = bytes((rows * cols) / 2);
  const s = bytes((rows * cols) / 32);
  for (let i = 0; i < p.a.length; i++) p.a[i] = r.int(256);
  for (let i = 0; i < s.a.length; i++) s.a[i] = 116 + r.int(12);
  for (const i of badAt) s.a[i] = 255;
  return { M: { packed: p.ptr, scales: s.ptr, rows, cols }, packed: p.a, scales: s.a, bad: badAt.length };
}

describe("MXFP4 matmul: T tokens in one call == T calls with T = 1, on every path; 255 counted once", () => {
  // group counts 1, 3, 11, 25, 37 (across the 4-group panel blocks); rows across 32-row blocks,
  // the AVX-512 4-row lane tiles (remainders 3, 1, 1, 2, 1) and the 8-row blocks of the row
  // lanes (remainders 3, 1, 5, 6, 5), which take the T not a multiple of 8
  const shapes: [number, number][] = [[3, 32], [33, 96], [45, 352], [70, 800], [37, 1184]];
  const counts = [...tokenCounts, 70]; // 70: more than one 64-token panel block
  const most = Math.max(...counts);
  shapes.forEach(([rows, cols], s) => {
    test(`${rows} x ${cols} (${cols / 32} groups)`, () => {
      const r = rng(200 + s);
      const groups = cols / 32;
      const mx = mxfp4Matrix(rows, cols, r, [0, Math.floor((rows * groups) / 2), rows * groups - 1]);
      const x = spreadActivations(most * cols, r, 8);
      const y = f32(most * rows);
      const one = f32(rows);
      const want = new Float32Array(most * rows);
      const canonical = new Float32Array(most * rows);
      for (let t = 0; t < most; t++) {
        expect(matmulMxfp4(mx.M, tokenRow(x, t, cols), one, 1)).toBe(mx.bad);
        want.set(one.a, t * rows);
        for (let o = 0; o < rows; o++) canonical[t * rows + o] = mxfp4DotCanonical(mx.packed, mx.scales, cols, o, x.a, t * cols);
      }
      expectBits(want, canonical, `${rows}x${cols}: T = 1 vs the §8.3 order`);
      // 255 scales are counted once per matrix, not per token
      expectEveryPath((T) => expect(matmulMxfp4(mx.M, x, y, T)).toBe(mx.bad), y, rows, want, counts, `${rows}x${cols}`);
    });
  });
});

describe("routed experts as the model batches them == the kernels one token at a time == multi-token matmuls", () => {
  test("3 tokens x top-2 over 3 experts, bit for bit", () => {
    const r = rng(300);
    const lam = 96;
    const inter = 160; // 5 groups: across the 4-group panel blocks
    const T = 3;
    const K = 2;
    const experts = Array.from({ length: 3 }, () => ({ w1: mxfp4Matrix(inter, lam, r), w3: mxfp4Matrix(inter, lam, r), w2: mxfp4Matrix(lam, inter, r) }));
    const sel = [2, 0, 0, 1, 2, 0];
    const weights = Float32Array.from([0.7, 0.3, 0.6, 0.4, 0.5, 0.5]);
    const z = spreadActivations(T * lam, r, 4);
    // as the model does: each expert over the rows of every token that chose it, one call each,
    // then per token the weighted outputs in top-k order from +0
    const outputs = f32(T * K * lam);
    for (let e = 0; e < experts.length; e++) {
      const picks = sel.flatMap((s, i) => (s === e ? [i] : []));
      const M = picks.length;
      if (M === 0) continue;
      const rows = f32(M * lam);
      picks.forEach((pick, i) => rows.a.set(z.a.subarray(Math.floor(pick / K) * lam, (Math.floor(pick / K) + 1) * lam), i * lam));
      const gm = f32(M * inter);
      const um = f32(M * inter);
      const dm = f32(M * lam);
      const m = experts[e] as (typeof experts)[number];
      matmulMxfp4(m.w1.M, rows, gm, M);
      matmulMxfp4(m.w3.M, rows, um, M);
      situGlu(gm, um, gm, M * inter, 4, 25);
      matmulMxfp4(m.w2.M, gm, dm, M);
      picks.forEach((pick, i) => outputs.a.set(dm.a.subarray(i * lam, (i + 1) * lam), pick * lam));
    }
    const acc = f32(T * lam);
    acc.a.fill(0);
    for (let t = 0; t < T; t++) {
      for (let j = 0; j < K; j++) axpy(tokenRow(acc, t, lam), tokenRow(outputs, t * K + j, lam), lam, weights[t * K + j] as number);
    }
    const got = acc.a.slice();

    // one by one, T = 1 everywhere
    const g = f32(inter);
    const u = f32(inter);
    const h = f32(inter);
    const d = f32(lam);
    const want = f32(T * lam);
    want.a.fill(0);
    const hidden = new Map<string, Float32Array>(); // (expert, token) -> SiTU output, for the check below
    for (let t = 0; t < T; t++) {
      const at = tokenRow(want, t, lam);
      for (let j = 0; j < K; j++) {
        const e = sel[t * K + j] as number;
        const m = experts[e] as (typeof experts)[number];
        matmulMxfp4(m.w1.M, tokenRow(z, t, lam), g, 1);
        matmulMxfp4(m.w3.M, tokenRow(z, t, lam), u, 1);
        situGlu(g, u, h, inter, 4, 25);
        hidden.set(`${e},${t}`, h.a.slice());
        matmulMxfp4(m.w2.M, h, d, 1);
        axpy(at, d, lam, weights[t * K + j] as number);
      }
    }
    expectBits(got, want.a, "routed experts vs the kernels one by one");

    // each expert's w1 over every token that chose it, in one multi-token call
    for (let e = 0; e < experts.length; e++) {
      const tokens = [...new Set(sel.flatMap((s, i) => (s === e ? [Math.floor(i / K)] : [])))];
      const zs = f32(tokens.length * lam);
      tokens.forEach((t, i) => zs.a.set(z.a.subarray(t * lam, (t + 1) * lam), i * lam));
      const gs = f32(tokens.length * inter);
      const us = f32(tokens.length * inter);
      const hs = f32(tokens.length * inter);
      const m = experts[e] as (typeof experts)[number];
      matmulMxfp4(m.w1.M, zs, gs, tokens.length);
      matmulMxfp4(m.w3.M, zs, us, tokens.length);
      situGlu(gs, us, hs, tokens.length * inter, 4, 25);
      tokens.forEach((t, i) => expectBits(hs.a.subarray(i * inter, (i + 1) * inter), hidden.get(`${e},${t}`) as Float32Array, `expert ${e}, token ${t}`));
    }
  });
});
