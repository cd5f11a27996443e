/**
 * libk3's kernels against the independent numpy reference fixtures in test/fixtures/ops
 * (format: tools/reference/README.md). For every fixture: the engine's outputs match `want`
 * within the fixture's tolerance (§8.5 op tolerance, or exact), and for every trap key the
 * engine does NOT match the recorded wrong output.
 *
 * Operator fixtures are driven kernel by kernel; the module fixtures (kda_layer_*, mla, moe,
 * dense_mlp) are composed here from the kernels in the order of model.md §6. The decoder-layer
 * and whole-model AttnRes fixtures (layer_kda, layer_mla, attnres_model_*) exercise the
 * forward-pass wiring and belong to the model's tests; config.json and tensor_names.json to
 * the checkpoint's.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { f32View, NativeBuffer, offsetPointer, u16View, u8View, type Pointer } from "../../../src/native/memory.ts";
import { add, attnRes, kdaDecay, kdaGatedNorm, kdaRecurrence, l2norm, matmul, matmulMxfp4, mlaLatentAttention, rmsnorm, route, shortConv, sigmoid, sigmoidGate, situGlu, widenBf16, type F32Ref, type MatrixRef } from "../../../src/native/kernels.ts";
import { mxfp4DecodeRow } from "../../support/kernel-hooks.ts";
import { routedExperts, type ExpertMatrices } from "../../support/kernels.ts";

const opsDir = resolve(import.meta.dir, "../../fixtures/ops");

// ---------------------------------------------------------------------------------------------
// Fixture reading

interface Tensor {
  dtype: "f32" | "u8" | "u16" | "u32" | "i32";
  shape: number[];
  data: number[];
}
type Outputs = Record<string, Tensor>;
interface Fixture {
  op: string;
  dims: Record<string, number | boolean>;
  tolerance: { atol: number; rtol: number } | { exact: true };
  weights?: Record<string, Tensor>;
  inputs: Record<string, Tensor | Record<string, Tensor>>;
  want: Outputs;
  traps?: { key: string }[];
  weights_bf16_exact?: string[];
  weights_dtype?: Record<string, string>;
  [key: string]: unknown;
}

function load(name: string): Fixture {
  return JSON.parse(readFileSync(join(opsDir, `${name}.json`), "utf8")) as Fixture;
}

function tensor(t: unknown, what: string): Tensor {
  if (!t || typeof t !== "object" || !("data" in t)) throw new Error(`fixture tensor ${what} missing`);
  return t as Tensor;
}

function input(f: Fixture, name: string): Tensor {
  return tensor(f.inputs[name], `inputs.${name}`);
}

function weight(f: Fixture, name: string): Tensor {
  return tensor(f.weights?.[name], `weights.${name}`);
}

function dimOf(f: Fixture, name: string): number {
  const v = f.dims[name];
  if (typeof v !== "number") throw new Error(`fixture dims.${name} missing`);
  return v;
}

const numel = (shape: number[]) => shape.reduce((a, b) => a * b, 1);

// ---------------------------------------------------------------------------------------------
// Native memory

const buffers: NativeBuffer[] = [];
afterAll(() => {
  for (const b of buffers) b.free();
});

interface F32Buf extends F32Ref {
  a: Float32Array;
}

function alloc(bytes: number): NativeBuffer {
  const b = NativeBuffer.allocate(Math.max(bytes, 8), "fixture");
  buffers.push(b);
  return b;
}

function f32(n: number): F32Buf {
  const b = alloc(n * 4);
  return { ptr: b.ptr, length: n, a: f32View(b.ptr, 0, Math.max(n, 2)).subarray(0, n) };
}

function f32Of(t: Tensor): F32Buf {
  const b = f32(t.data.length);
  b.a.set(t.data);
  return b;
}

function u8Of(t: Tensor): { ptr: Pointer; a: Uint8Array } {
  const b = alloc(t.data.length);
  const a = u8View(b.ptr, 0, Math.max(t.data.length, 8)).subarray(0, t.data.length);
  a.set(t.data);
  return { ptr: b.ptr, a };
}

const at = (b: F32Ref, offsetFloats: number, length: number): F32Ref => ({ ptr: offsetPointer(b.ptr, offsetFloats * 4), length });

/** A weight matrix in native memory: bf16 bits when the fixture says the values are bf16-exact. */
function matrix(f: Fixture, name: string, rows?: number, cols?: number): MatrixRef {
  const t = weight(f, name);
  const r = rows ?? (t.shape[0] as number);
  const c = cols ?? numel(t.shape.slice(1));
  const bf16 = f.weights_bf16_exact?.includes(name) || f.weights_dtype?.[name] === "BF16";
  if (bf16) {
    const b = alloc(t.data.length * 2);
    const bitsOut = u16View(b.ptr, 0, t.data.length);
    const u = new Uint32Array(Float32Array.from(t.data).buffer);
    u.forEach((v, i) => {
      if ((v & 0xffff) !== 0) throw new Error(`${name}: value ${i} is not bf16-exact`);
      bitsOut[i] = v >>> 16;
    });
    return { ptr: b.ptr, rows: r, cols: c, dtype: "BF16" };
  }
  return { ptr: f32Of(t).ptr, rows: r, cols: c, dtype: "F32" };
}

// ---------------------------------------------------------------------------------------------
// Comparisons

type Got = Record<string, ArrayLike<number>>;

/** Where `got` first falls outside the fixture's tolerance of `ref`, or null if it matches. */
function mismatch(f: Fixture, got: Got, ref: Outputs, names = Object.keys(got)): string | null {
  for (const name of names) {
    const g = got[name];
    const r = ref[name];
    if (!g || !r) throw new Error(`output ${name} missing`);
    if (g.length !== r.data.length) return `${name}: ${g.length} values, want ${r.data.length}`;
    for (let i = 0; i < r.data.length; i++) {
      const gv = g[i] as number;
      const rv = r.data[i] as number;
      if ("exact" in f.tolerance) {
        if (!Object.is(Math.fround(gv), Math.fround(rv))) return `${name}[${i}] = ${gv}, want exactly ${rv}`;
      } else if (!(Math.abs(gv - rv) <= f.tolerance.atol + f.tolerance.rtol * Math.abs(rv))) {
        return `${name}[${i}] = ${gv}, want ${rv}`;
      }
    }
  }
  return null;
}

/** Asserts got ≈ want and, for every trap, got ≉ the trap's recorded output. */
function expectWantNotTraps(f: Fixture, got: Got, compare: (ref: Outputs) => string | null = (ref) => mismatch(f, got, ref)): void {
  const bad = compare(f.want);
  if (bad) throw new Error(`${f.op}: ${bad}`);
  const traps = f.traps ?? [];
  expect(traps.length).toBeGreaterThan(0);
  for (const { key } of traps) {
    const wrong = f[key] as Outputs | undefined;
    if (!wrong) throw new Error(`${f.op}: trap ${key} has no recorded output`);
    if (compare(wrong) === null) throw new Error(`${f.op}: the engine matches the trap output ${key}`);
  }
}

const fixturesPresent = existsSync(join(opsDir, "rmsnorm.json"));

// ---------------------------------------------------------------------------------------------

describe.skipIf(!fixturesPresent)("op fixtures (tools/reference)", () => {
  test("rmsnorm", () => {
    const f = load("rmsnorm");
    const x = f32Of(input(f, "x"));
    const y = f32(x.length);
    const n = dimOf(f, "n");
    rmsnorm(x, f32Of(input(f, "w")), y, dimOf(f, "rows"), n, dimOf(f, "eps"));
    expectWantNotTraps(f, { y: y.a });
  });

  test("l2norm", () => {
    const f = load("l2norm");
    const x = f32Of(input(f, "x"));
    const y = f32(x.length);
    l2norm(x, y, dimOf(f, "rows"), dimOf(f, "n"));
    expectWantNotTraps(f, { y: y.a });
  });

  test("situ_glu ([gate | up] rows)", () => {
    const f = load("situ_glu");
    const rows = dimOf(f, "rows");
    const n = dimOf(f, "n");
    const x = input(f, "x").data;
    const gate = f32(rows * n);
    const up = f32(rows * n);
    for (let r = 0; r < rows; r++) {
      gate.a.set(x.slice(r * 2 * n, r * 2 * n + n), r * n);
      up.a.set(x.slice(r * 2 * n + n, (r + 1) * 2 * n), r * n);
    }
    const y = f32(rows * n);
    situGlu(gate, up, y, rows * n, dimOf(f, "beta1"), dimOf(f, "beta2"));
    expect(y.a[0 * n + 0 + 5 * n]).toBe(-100);
    expectWantNotTraps(f, { y: y.a });
  });

  test("shortconv: 5 steps, then one from the carried history", () => {
    const f = load("shortconv");
    const P = dimOf(f, "P");
    const K = dimOf(f, "Kc");
    const steps = dimOf(f, "steps");
    const taps = f32Of(input(f, "w")); // [P, 1, Kc] = [P][Kc] in memory
    const x = f32Of(input(f, "x"));
    const hist = f32(P * (K - 1));
    const y = f32(steps * P);
    shortConv(x, taps, hist, y, steps - 1, P, K);
    const after5 = hist.a.slice();
    shortConv(at(x, (steps - 1) * P, P), taps, hist, at(y, (steps - 1) * P, P), 1, P, K);
    expectWantNotTraps(f, { y: y.a, hist_after5: after5, hist_after6: hist.a });
  });

  test("kda_decay (A_log per head, padded to D)", () => {
    const f = load("kda_decay");
    const rows = dimOf(f, "rows");
    const H = dimOf(f, "Hk");
    const D = dimOf(f, "D");
    const z = f32Of(input(f, "z"));
    const alpha = f32(rows * H * D);
    const g = f32(rows * H * D);
    kdaDecay(z, f32Of(input(f, "A_log")), f32Of(input(f, "dt_bias")), alpha, g, rows, H, D, dimOf(f, "gmin"));
    expectWantNotTraps(f, { g: g.a, alpha: alpha.a });
  });

  for (const name of ["kda_recurrence_1", "kda_recurrence_8"]) {
    test(`${name} (q already scaled)`, () => {
      const f = load(name);
      const T = dimOf(f, "T");
      const H = dimOf(f, "H");
      const D = dimOf(f, "D");
      const S = f32Of(input(f, "S_in"));
      const o = f32(T * H * D);
      kdaRecurrence(f32Of(input(f, "q")), f32Of(input(f, "k")), f32Of(input(f, "v")), f32Of(input(f, "alpha")), f32Of(input(f, "beta")), S, o, T, H, D, 1);
      expectWantNotTraps(f, { o: o.a, S_out: S.a });
    });
  }

  for (const name of ["kda_layer_8", "kda_layer_1"]) {
    test(`${name}: the whole KDA module from the kernels (state carried)`, () => {
      const f = load(name);
      const T = dimOf(f, "T");
      const E = dimOf(f, "E");
      const H = dimOf(f, "Hk");
      const D = dimOf(f, "D");
      const P = dimOf(f, "P");
      const K = dimOf(f, "Kc");
      const eps = dimOf(f, "eps");
      const x = f32Of(input(f, "x"));
      const state = f.inputs.state_in as Record<string, Tensor>;
      const S = f32Of(tensor(state.S, "S"));
      const conv = { q: f32Of(tensor(state.conv_q, "conv_q")), k: f32Of(tensor(state.conv_k, "conv_k")), v: f32Of(tensor(state.conv_v, "conv_v")) };
      const proj = (w: string, rows: number) => {
        const y = f32(T * rows);
        matmul(matrix(f, w), x, y, T);
        return y;
      };
      const streams = (["q", "k", "v"] as const).map((s) => {
        const raw = proj(`${s}_proj.weight`, P);
        shortConv(raw, f32Of(weight(f, `${s}_conv1d.weight`)), conv[s], raw, T, P, K);
        return raw;
      });
      const [q, k, v] = streams as [F32Buf, F32Buf, F32Buf];
      l2norm(q, q, T * H, D);
      l2norm(k, k, T * H, D);
      const beta = proj("b_proj.weight", H);
      sigmoid(beta, beta, T * H);
      const za = proj("f_a_proj.weight", D);
      const z = f32(T * P);
      matmul(matrix(f, "f_b_proj.weight"), za, z, T);
      const alpha = f32(T * P);
      const aLog = f32Of(weight(f, "A_log"));
      kdaDecay(z, at(aLog, 0, H), f32Of(weight(f, "dt_bias")), alpha, undefined, T, H, D, dimOf(f, "gmin"));
      const o = f32(T * P);
      kdaRecurrence(q, k, v, alpha, beta, S, o, T, H, D);
      const gate = proj("g_proj.weight", P);
      kdaGatedNorm(o, f32Of(weight(f, "o_norm.weight")), gate, o, T, H, D, eps);
      const out = f32(T * E);
      matmul(matrix(f, "o_proj.weight"), o, out, T);
      expectWantNotTraps(f, { out: out.a, S: S.a, conv_q: conv.q.a, conv_k: conv.k.a, conv_v: conv.v.a });
    });
  }

  test("router: index sets exact, weights within tolerance, traps refused", () => {
    const f = load("router");
    const T = dimOf(f, "rows");
    const Ne = dimOf(f, "Ne");
    const K = dimOf(f, "k");
    const experts = new Uint32Array(T * K);
    const weights = new Float32Array(T * K);
    const scores = f32(T * Ne);
    route(matrix(f, "gate.weight"), f32Of(weight(f, "gate.e_score_correction_bias")), f32Of(input(f, "x")), T, K, f.dims.moe_renormalize === true, dimOf(f, "routed_scaling_factor"), { experts, weights, scores });
    const compare = (ref: Outputs): string | null => {
      const idx = tensor(ref.topk_idx, "topk_idx").data;
      const w = tensor(ref.weights, "weights").data;
      const reordered = new Float32Array(T * K);
      for (let t = 0; t < T; t++) {
        const want = idx.slice(t * K, (t + 1) * K);
        const got = Array.from(experts.subarray(t * K, (t + 1) * K));
        if ([...want].sort().join() !== [...got].sort().join()) return `row ${t}: experts ${got}, want ${want}`;
        got.forEach((e, j) => {
          reordered[t * K + want.indexOf(e)] = weights[t * K + j] as number;
        });
      }
      return mismatch(f, { weights: reordered, scores: scores.a }, { weights: tensor(ref.weights, "weights"), scores: tensor(ref.scores, "scores") }) ?? (w.length === T * K ? null : "bad weights");
    };
    expectWantNotTraps(f, {}, compare);
  });

  test("attnres: 9 sources, φ folded once in f32", () => {
    const f = load("attnres");
    const T = dimOf(f, "T");
    const n = dimOf(f, "n_sources");
    const E = dimOf(f, "E");
    const all = f32Of(input(f, "sources"));
    const sources = Array.from({ length: n }, (_, i) => at(all, i * T * E, T * E));
    const norm = input(f, "norm_weight").data;
    const proj = input(f, "proj_weight").data;
    const phi = f32Of({ dtype: "f32", shape: [E], data: norm.map((v, j) => Math.fround(v * (proj[j] as number))) });
    const out = f32(T * E);
    attnRes(sources, phi, out, undefined, T, E, dimOf(f, "eps"));
    expectWantNotTraps(f, { out: out.a });
  });

  test("mla: prefill of 5 tokens, then one decode step over the latent cache", () => {
    const f = load("mla");
    const T = dimOf(f, "T");
    const T0 = dimOf(f, "T_prefill");
    const E = dimOf(f, "E");
    const H = dimOf(f, "H");
    const Rq = dimOf(f, "Rq");
    const Rkv = dimOf(f, "Rkv");
    const dn = dimOf(f, "dn");
    const dr = dimOf(f, "dr");
    const dv = dimOf(f, "dv");
    const eps = dimOf(f, "eps");
    const shape = { heads: H, dn, dr, dv, rank: Rkv };
    const x = f32Of(input(f, "x"));
    const wkva = matrix(f, "kv_a_proj_with_mqa.weight");
    const elem = wkva.dtype === "BF16" ? 2 : 4;
    // the one kv_a projection split by rows: latent rows 0…Rkv−1, rope-key rows Rkv…Rkv+dr−1
    const wLatent: MatrixRef = { ...wkva, rows: Rkv };
    const wRope: MatrixRef = { ...wkva, ptr: offsetPointer(wkva.ptr, Rkv * E * elem), rows: dr };
    const cacheCkv = f32(T * Rkv);
    const cacheKr = f32(T * dr);
    const out = f32(T * E);
    const step = (first: number, n: number) => {
      const xs = at(x, first * E, n * E);
      const cq = f32(n * Rq);
      matmul(matrix(f, "q_a_proj.weight"), xs, cq, n);
      rmsnorm(cq, f32Of(weight(f, "q_a_layernorm.weight")), cq, n, Rq, eps);
      const q = f32(n * H * (dn + dr));
      matmul(matrix(f, "q_b_proj.weight"), cq, q, n);
      const ckv = at(cacheCkv, first * Rkv, n * Rkv);
      matmul(wLatent, xs, ckv, n);
      rmsnorm(ckv, f32Of(weight(f, "kv_a_layernorm.weight")), ckv, n, Rkv, eps);
      matmul(wRope, xs, at(cacheKr, first * dr, n * dr), n);
      const o = f32(n * H * dv);
      mlaLatentAttention(q, matrix(f, "kv_b_proj.weight"), cacheCkv, cacheKr, o, n, first, shape);
      const g = f32(n * H * dv);
      matmul(matrix(f, "g_proj.weight"), xs, g, n);
      sigmoidGate(o, g, o, n * H * dv);
      matmul(matrix(f, "o_proj.weight"), o, at(out, first * E, n * E), n);
    };
    step(0, T0);
    step(T0, T - T0);
    // Only the latent and the rope key are cached; the reference's expanded kn and v are not.
    expectWantNotTraps(f, { out: out.a, cache_c_kv: cacheCkv.a, cache_kr: cacheKr.a });
  });

  test("moe: router, latent experts from MXFP4, aggregate norm, shared experts", () => {
    const f = load("moe");
    const T = dimOf(f, "T");
    const E = dimOf(f, "E");
    const K = dimOf(f, "k");
    const lam = dimOf(f, "Lam");
    const I = dimOf(f, "I");
    const Is = dimOf(f, "Is");
    const eps = dimOf(f, "eps");
    const b1 = dimOf(f, "beta1");
    const b2 = dimOf(f, "beta2");
    const x = f32Of(input(f, "x"));
    const experts = new Uint32Array(T * K);
    const weights = new Float32Array(T * K);
    route(matrix(f, "gate.weight"), f32Of(weight(f, "gate.e_score_correction_bias")), x, T, K, f.dims.moe_renormalize === true, dimOf(f, "routed_scaling_factor"), { experts, weights });
    const z = f32(T * lam);
    matmul(matrix(f, "routed_expert_down_proj.weight"), x, z, T);
    const stack = (name: string) => u8Of(weight(f, name));
    const w = {
      w1p: stack("experts.w1.weight_packed"), w1s: stack("experts.w1.weight_scale"),
      w2p: stack("experts.w2.weight_packed"), w2s: stack("experts.w2.weight_scale"),
      w3p: stack("experts.w3.weight_packed"), w3s: stack("experts.w3.weight_scale"),
    };
    const mx = (packed: { ptr: Pointer }, scales: { ptr: Pointer }, e: number, rows: number, cols: number) => ({
      packed: offsetPointer(packed.ptr, (e * rows * cols) / 2), scales: offsetPointer(scales.ptr, (e * rows * cols) / 32), rows, cols,
    });
    const picks: ExpertMatrices[] = Array.from(experts, (e) => ({
      w1: mx(w.w1p, w.w1s, e, I, lam), w3: mx(w.w3p, w.w3s, e, I, lam), w2: mx(w.w2p, w.w2s, e, lam, I),
    }));
    const acc = f32(T * lam);
    expect(routedExperts(z, picks, weights, acc, T, K, lam, I, b1, b2)).toBe(0);
    rmsnorm(acc, f32Of(weight(f, "routed_expert_norm.weight")), acc, T, lam, eps);
    const yr = f32(T * E);
    matmul(matrix(f, "routed_expert_up_proj.weight"), acc, yr, T);
    const sg = f32(T * Is);
    const su = f32(T * Is);
    matmul(matrix(f, "shared_experts.gate_proj.weight"), x, sg, T);
    matmul(matrix(f, "shared_experts.up_proj.weight"), x, su, T);
    situGlu(sg, su, sg, T * Is, b1, b2);
    const ys = f32(T * E);
    matmul(matrix(f, "shared_experts.down_proj.weight"), sg, ys, T);
    add(yr, ys, yr, T * E);
    expectWantNotTraps(f, { out: yr.a });
  });

  test("dense_mlp", () => {
    const f = load("dense_mlp");
    const T = dimOf(f, "T");
    const E = dimOf(f, "E");
    const Id = dimOf(f, "Id");
    const x = f32Of(input(f, "x"));
    const g = f32(T * Id);
    const u = f32(T * Id);
    matmul(matrix(f, "gate_proj.weight"), x, g, T);
    matmul(matrix(f, "up_proj.weight"), x, u, T);
    situGlu(g, u, g, T * Id, dimOf(f, "beta1"), dimOf(f, "beta2"));
    const y = f32(T * E);
    matmul(matrix(f, "down_proj.weight"), g, y, T);
    expectWantNotTraps(f, { y: y.a });
  });

  test("bf16_matvec: bf16 bits and their f32 widening give the same bits", () => {
    const f = load("bf16_matvec");
    const rows = dimOf(f, "rows");
    const cols = dimOf(f, "cols");
    const bitsIn = input(f, "w_bf16_bits").data;
    const b = alloc(bitsIn.length * 2);
    u16View(b.ptr, 0, bitsIn.length).set(bitsIn);
    const x = f32Of(input(f, "x"));
    const y = f32(rows);
    matmul({ ptr: b.ptr, rows, cols, dtype: "BF16" }, x, y, 1);
    const yf = f32(rows);
    matmul({ ptr: f32Of(input(f, "w_f32")).ptr, rows, cols, dtype: "F32" }, x, yf, 1);
    expect(Array.from(new Uint32Array(yf.a.slice().buffer))).toEqual(Array.from(new Uint32Array(y.a.slice().buffer)));
    expectWantNotTraps(f, { y: y.a });
  });

  test("bf16_widen (exact, including ±0, subnormals, inf, NaN)", () => {
    const f = load("bf16_widen");
    const bitsIn = input(f, "bits").data;
    const b = alloc(bitsIn.length * 2);
    u16View(b.ptr, 0, bitsIn.length).set(bitsIn);
    const out = f32(bitsIn.length);
    widenBf16(b.ptr, out, bitsIn.length);
    const got = Array.from(new Uint32Array(out.a.slice().buffer));
    const compare = (ref: Outputs): string | null => {
      const want = tensor(ref.f32_bits, "f32_bits").data;
      const i = want.findIndex((v, j) => v !== got[j]);
      return i < 0 ? null : `f32_bits[${i}] = ${got[i]}, want ${want[i]}`;
    };
    expectWantNotTraps(f, {}, compare);
  });

  test("mxfp4_decode (exact, −0 included; worked bytes of §5.4)", () => {
    const f = load("mxfp4_decode");
    // the eight published bytes, each decoded with its own scale
    const wp = input(f, "worked_packed").data;
    const ws = input(f, "worked_scale").data;
    const worked = new Float32Array(wp.length * 2);
    const one = f32(32);
    wp.forEach((byte, i) => {
      const packed = u8Of({ dtype: "u8", shape: [16], data: [byte, ...new Array(15).fill(0)] });
      const scale = u8Of({ dtype: "u8", shape: [1], data: [ws[i] as number] });
      mxfp4DecodeRow(packed.ptr, scale.ptr, 32, one);
      worked[2 * i] = one.a[0] as number;
      worked[2 * i + 1] = one.a[1] as number;
    });
    const decode = (packedName: string, scaleName: string) => {
      const pt = input(f, packedName);
      const st = input(f, scaleName);
      const rows = pt.shape[0] as number;
      const cols = (pt.shape[1] as number) * 2;
      const packed = u8Of(pt);
      const scales = u8Of(st);
      const out = f32(rows * cols);
      for (let r = 0; r < rows; r++) {
        mxfp4DecodeRow(offsetPointer(packed.ptr, (r * cols) / 2), offsetPointer(scales.ptr, (r * cols) / 32), cols, at(out, r * cols, cols));
      }
      return out.a;
    };
    expectWantNotTraps(f, { worked_elements: worked, row_decoded: decode("row_packed", "row_scale"), rand_decoded: decode("rand_packed", "rand_scale") });
  });

  test("mxfp4_matvec (straight from the packed bytes)", () => {
    const f = load("mxfp4_matvec");
    const rows = dimOf(f, "rows");
    const cols = dimOf(f, "cols");
    const y = f32(rows);
    matmulMxfp4({ packed: u8Of(input(f, "packed")).ptr, scales: u8Of(input(f, "scale")).ptr, rows, cols }, f32Of(input(f, "x")), y, 1);
    expectWantNotTraps(f, { y: y.a });
  });
});

test("op fixtures are present (tools/reference/make_fixtures.py)", () => {
  expect(fixturesPresent).toBe(true);
});
