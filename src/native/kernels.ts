/**
 * Typed wrappers over libk3's numeric kernels (zig/kernels/table.zig `entries` documents every
 * contract: shapes, layouts, in-place rules; each kernel's file its summation order). One call
 * per operator covers all the tokens of a step. Arguments are checked here (kernel-checks.ts);
 * the state the wrappers share (the pool, the variant, scratch, the bad-scale count) is
 * kernel-runtime.ts's.
 *
 * Each wrapper takes its export's arguments in the export's order (inputs, outputs, then counts
 * from outer to inner, then scalars), leaving out only what it derives: a dtype code, a list
 * length, a shape passed as one object. Optional buffers stay in place and take `undefined`.
 *
 * Memory is referenced structurally so callers can pass their own types: anything with a
 * `ptr` and a `length` in floats is an `F32Ref` (src/model's F32 and the bound `Vector`s are);
 * matrices carry their dtype.
 */
import type { Pointer } from "bun:ffi";
import {
  ElementwiseOp, elementwiseTakesSecond, i8rScaleBytes, maxAttnResSources, maxConvTaps, maxKdaHeadDim, maxRouterK,
  MlaWeightDtype, mxfp4Group, RouterDtype,
} from "./abi.ts";
import { aligned, checkStatus as check, count, dim, f32, finite, maxU32 } from "./kernel-checks.ts";
import { badScaleOut, dequantScratchFor, kernelLib as lib, tallyBadScales } from "./kernel-runtime.ts";
import type { F32Ref } from "./memory.ts";
import type { NativeBuffer } from "./memory.ts";

export type { F32Ref };

/**
 * A row-major W[rows][cols] in native memory: bf16 bit patterns, f32, or the int8 draft
 * container I8R (rows of [f32 scale][int8 × cols], weights f32(scale·q); zig/kernels/matvec_i8r.zig).
 */
export interface MatrixRef {
  readonly ptr: Pointer;
  readonly rows: number;
  readonly cols: number;
  readonly dtype: "BF16" | "F32" | "I8R";
}

/** Bytes of one I8R row of `cols` weights. */
export const i8rRowBytes = (cols: number): number => i8rScaleBytes + cols;

/** An MXFP4 matrix: packed [rows][cols/2] (low nibble = even element), scales [rows][cols/32]. */
export interface Mxfp4Ref {
  readonly packed: Pointer;
  readonly scales: Pointer;
  readonly rows: number;
  readonly cols: number;
}

export interface MlaShape {
  readonly heads: number;
  readonly dn: number;
  readonly dr: number;
  readonly dv: number;
  /** kv_lora_rank: the width of the cached latent. */
  readonly rank: number;
}

/** Router outputs, filled in place by `route`. */
export interface Routing {
  /** [tokens][k] selected experts, in selection (descending biased score) order. */
  readonly experts: Uint32Array | Int32Array;
  /** [tokens][k] combine weights: unbiased scores, renormalised if asked, times ρ. */
  readonly weights: Float32Array;
  /** Optional [tokens][experts]: σ of every logit. */
  readonly scores?: F32Ref;
}

export type ElementwiseOpName = keyof typeof ElementwiseOp;

// ---------------------------------------------------------------------------------------------
// Argument checks

// ---------------------------------------------------------------------------------------------
// Linear maps

/** y[t][o] = Σ_i W[o][i]·x[t][i] for t < tokens (bf16 or f32 W; 16-lane f64 order). */
export function matmul(w: MatrixRef, x: F32Ref, y: F32Ref, tokens: number): void {
  const what = `matmul ${w.rows}x${w.cols}`;
  const rows = dim(w.rows, "rows", what);
  const cols = dim(w.cols, "cols", what);
  const T = dim(tokens, "tokens", what);
  const xp = f32(x, T * cols, "x", what);
  const yp = f32(y, T * rows, "y", what);
  const l = lib();
  if (w.dtype === "BF16") {
    aligned(w.ptr, 2, "W", what);
    check(l.k3_matmul_bf16(w.ptr, rows, cols, xp, yp, T), what);
  } else if (w.dtype === "I8R") {
    check(l.k3_matmul_i8r(w.ptr, rows, cols, xp, yp, T), what);
  } else {
    aligned(w.ptr, 4, "W", what);
    check(l.k3_matmul_f32(w.ptr, rows, cols, xp, yp, T), what);
  }
}

/** out[rows][cols] = the f32 weights of an I8R matrix, f32(scale·q): what `matmul` multiplies by. */
export function dequantI8r(w: MatrixRef, out: F32Ref): void {
  const what = `dequantI8r ${w.rows}x${w.cols}`;
  if (w.dtype !== "I8R") throw new Error(`${what}: the matrix is ${w.dtype}, not I8R`);
  const rows = dim(w.rows, "rows", what);
  const cols = dim(w.cols, "cols", what);
  check(lib().k3_dequant_i8r(w.ptr, rows, cols, f32(out, rows * cols, "out", what)), what);
}

const nonFinite = new BigUint64Array(1);

/**
 * bf16 W[rows][cols] at `src` → I8R rows at `dst` (rows · i8rRowBytes(cols) bytes): per-row
 * absmax / 127, round half to even. Returns how many weights were NaN or infinite (stored as 0).
 */
export function quantizeI8r(src: Pointer, rows: number, cols: number, dst: Pointer): number {
  const what = `quantizeI8r ${rows}x${cols}`;
  aligned(src, 2, "src", what);
  check(lib().k3_quantize_i8r(src, dim(rows, "rows", what), dim(cols, "cols", what), dst, nonFinite), what);
  return Number(nonFinite[0]);
}

/** `w` as the bf16/f32-only kernels read it: an I8R matrix dequantised into the shared scratch. */
function readableMatrix(w: MatrixRef): MatrixRef & { dtype: "BF16" | "F32" } {
  if (w.dtype !== "I8R") return w as MatrixRef & { dtype: "BF16" | "F32" };
  const floats = w.rows * w.cols;
  const scratch = dequantScratchFor(floats);
  dequantI8r(w, { ptr: scratch.ptr, length: floats });
  return { ptr: scratch.ptr, rows: w.rows, cols: w.cols, dtype: "F32" };
}

/**
 * y[t][r] = Σ_c W[r][c]·x[t][c] straight from MXFP4. Returns how many scale bytes were 255
 * (each such group contributed zero); they are also added to `badScaleBytes()`.
 */
export function matmulMxfp4(w: Mxfp4Ref, x: F32Ref, y: F32Ref, tokens: number): number {
  const what = `matmulMxfp4 ${w.rows}x${w.cols}`;
  const rows = dim(w.rows, "rows", what);
  const cols = dim(w.cols, "cols", what);
  if (cols % mxfp4Group !== 0) throw new Error(`${what}: cols must be a multiple of ${mxfp4Group}`);
  const T = dim(tokens, "tokens", what);
  check(lib().k3_matmul_mxfp4(w.packed, w.scales, rows, cols, f32(x, T * cols, "x", what), f32(y, T * rows, "y", what), T, badScaleOut), what);
  return tallyBadScales();
}

// ---------------------------------------------------------------------------------------------
// Norms and elementwise operators

/** RMSNorm of `rows` rows of `width` (gain optional, eps inside the root). In place allowed. */
export function rmsnorm(x: F32Ref, gain: F32Ref | undefined, y: F32Ref, rows: number, width: number, eps: number): void {
  const what = "rmsnorm";
  const n = dim(width, "width", what);
  const r = dim(rows, "rows", what);
  const g = gain ? f32(gain, n, "gain", what) : null;
  check(lib().k3_rmsnorm(f32(x, r * n, "x", what), g, f32(y, r * n, "y", what), r, n, finite(eps, "eps", what)), what);
}

/** L2Norm (sum of squares, eps 1e-6) of `rows` rows of `width`. In place allowed. */
export function l2norm(x: F32Ref, y: F32Ref, rows: number, width: number): void {
  const what = "l2norm";
  const n = dim(width, "width", what);
  const r = dim(rows, "rows", what);
  check(lib().k3_l2norm(f32(x, r * n, "x", what), f32(y, r * n, "y", what), r, n), what);
}

/**
 * y[i] = op(x[i], g[i]) over `length` elements; `g` only for gate, add, axpy, situ; `a`, `b`
 * are the scalars of axpy (a) and situ (β1, β2). In place allowed.
 */
export function elementwise(op: ElementwiseOpName, x: F32Ref, g: F32Ref | undefined, y: F32Ref, length: number, a = 0, b = 0): void {
  const what = `elementwise ${op}`;
  const n = dim(length, "length", what);
  const needsG = (elementwiseTakesSecond as readonly string[]).includes(op);
  if (needsG && !g) throw new Error(`${what}: needs a second operand`);
  const gp = needsG && g ? f32(g, n, "g", what) : null;
  check(lib().k3_elementwise(ElementwiseOp[op], f32(x, n, "x", what), gp, f32(y, n, "y", what), n, finite(a, "a", what), finite(b, "b", what)), what);
}

/** out = SiTU-GLU(gate, up) over `length` elements (σ of the uncapped gate; caps β1, β2). */
export function situGlu(gate: F32Ref, up: F32Ref, out: F32Ref, length: number, beta1: number, beta2: number): void {
  elementwise("situ", gate, up, out, length, beta1, beta2);
}

/** y = σ(x). */
export function sigmoid(x: F32Ref, y: F32Ref, length: number): void {
  elementwise("sigmoid", x, undefined, y, length);
}

/** y = x·σ(g): an output gate without a norm (MLA). */
export function sigmoidGate(x: F32Ref, g: F32Ref, y: F32Ref, length: number): void {
  elementwise("gate", x, g, y, length);
}

/** y = a + b. */
export function add(a: F32Ref, b: F32Ref, y: F32Ref, length: number): void {
  elementwise("add", a, b, y, length);
}

/** acc = acc + f32(w·d) (the MoE aggregate; product rounded before the add). */
export function axpy(acc: F32Ref, d: F32Ref, length: number, w: number): void {
  elementwise("axpy", acc, d, acc, length, w);
}

/** dst[i] = f32(bf16 bits at src[i]) for `length` elements (exact shift). */
export function widenBf16(src: Pointer, dst: F32Ref, length: number): void {
  const what = "widenBf16";
  const n = dim(length, "length", what);
  aligned(src, 2, "src", what);
  check(lib().k3_widen_bf16(src, f32(dst, n, "dst", what), n), what);
}

// ---------------------------------------------------------------------------------------------
// KDA

/** Depthwise causal conv + SiLU over `tokens` steps; `history` [channels][kernel−1] carried. */
export function shortConv(x: F32Ref, taps: F32Ref, history: F32Ref | undefined, y: F32Ref, tokens: number, channels: number, kernel: number): void {
  const what = "shortConv";
  const T = dim(tokens, "tokens", what);
  const C = dim(channels, "channels", what);
  const K = dim(kernel, "kernel", what);
  if (K > maxConvTaps) throw new Error(`${what}: at most ${maxConvTaps} taps`);
  if (K > 1 && !history) throw new Error(`${what}: history is required when kernel > 1`);
  const h = K > 1 && history ? f32(history, C * (K - 1), "history", what) : null;
  check(lib().k3_shortconv(f32(x, T * C, "x", what), f32(taps, C * K, "taps", what), h, f32(y, T * C, "y", what), T, C, K), what);
}

/** α = exp(gmin·σ(e^A_log[h]·(z + dt_bias))) per (token, head, channel); g optional. */
export function kdaDecay(z: F32Ref, aLog: F32Ref, dtBias: F32Ref, alpha: F32Ref, g: F32Ref | undefined, tokens: number, heads: number, dim_: number, gmin: number): void {
  const what = "kdaDecay";
  const T = dim(tokens, "tokens", what);
  const H = dim(heads, "heads", what);
  const D = dim(dim_, "dim", what);
  const P = H * D;
  const gp = g ? f32(g, T * P, "g", what) : null;
  check(lib().k3_kda_decay(f32(z, T * P, "z", what), f32(aLog, H, "aLog", what), f32(dtBias, P, "dtBias", what), f32(alpha, T * P, "alpha", what), gp, T, H, D, finite(gmin, "gmin", what)), what);
}

/** f32(D^−1/2): the KDA query scale. */
export function kdaQueryScale(dim_: number): number {
  return Math.fround(1 / Math.sqrt(dim_));
}

/**
 * The delta-rule recurrence over `tokens` steps for every head; `state` [heads][dim][dim]
 * carried. q, k L2-normalised; q is multiplied by `qScale` (default f32(dim^−1/2)) first.
 */
export function kdaRecurrence(q: F32Ref, k: F32Ref, v: F32Ref, alpha: F32Ref, beta: F32Ref, state: F32Ref, out: F32Ref, tokens: number, heads: number, dim_: number, qScale = kdaQueryScale(dim_)): void {
  const what = "kdaRecurrence";
  const T = dim(tokens, "tokens", what);
  const H = dim(heads, "heads", what);
  const D = dim(dim_, "dim", what);
  if (D > maxKdaHeadDim) throw new Error(`${what}: dim at most ${maxKdaHeadDim}`);
  const P = H * D;
  check(
    lib().k3_kda_recurrence(
      f32(q, T * P, "q", what), f32(k, T * P, "k", what), f32(v, T * P, "v", what), f32(alpha, T * P, "alpha", what),
      f32(beta, T * H, "beta", what), f32(state, H * D * D, "state", what), f32(out, T * P, "out", what), T, H, D, finite(qScale, "qScale", what),
    ),
    what,
  );
}

/** y = RMSNorm per head of o (gain [dim] shared by all heads), then ⊙ σ(gate). In place allowed. */
export function kdaGatedNorm(o: F32Ref, gain: F32Ref, gate: F32Ref, y: F32Ref, tokens: number, heads: number, dim_: number, eps: number): void {
  const what = "kdaGatedNorm";
  const T = dim(tokens, "tokens", what);
  const H = dim(heads, "heads", what);
  const D = dim(dim_, "dim", what);
  const n = T * H * D;
  check(lib().k3_kda_gated_norm(f32(o, n, "o", what), f32(gain, D, "gain", what), f32(gate, n, "gate", what), f32(y, n, "y", what), T, H, D, finite(eps, "eps", what)), what);
}

// ---------------------------------------------------------------------------------------------
// MLA, AttnRes, router; machine probes

/**
 * Causal NoPE attention for `tokens` queries at positions first … first+tokens−1 over the
 * latent cache, kv_b_proj absorbed (zig/kernels/mla.zig gives the order): q
 * [tokens][heads][dn+dr]; kvb = kv_b_proj [heads·(dn+dv)][rank] as shipped, read in place; ckv
 * [first+tokens][rank] normalised latents and kr [first+tokens][dr] rope keys shared by all
 * heads (new positions already appended); out [tokens][heads][dv].
 */
export function mlaLatentAttention(q: F32Ref, kvbAsBound: MatrixRef, ckv: F32Ref, kr: F32Ref, out: F32Ref, tokens: number, first: number, shape: MlaShape): void {
  const what = "mlaLatentAttention";
  const kvb = readableMatrix(kvbAsBound);
  const T = dim(tokens, "tokens", what);
  const p0 = count(first, "first", what);
  const H = dim(shape.heads, "heads", what);
  const dn = dim(shape.dn, "dn", what);
  const dr = count(shape.dr, "dr", what);
  const dv = dim(shape.dv, "dv", what);
  const R = dim(shape.rank, "rank", what);
  const N = p0 + T;
  if (N > maxU32) throw new Error(`${what}: position ${N} exceeds 32 bits`);
  if (kvb.rows !== H * (dn + dv) || kvb.cols !== R) {
    throw new Error(`${what}: kv_b_proj is ${kvb.rows}x${kvb.cols}, expected ${H * (dn + dv)}x${R}`);
  }
  aligned(kvb.ptr, kvb.dtype === "BF16" ? 2 : 4, "kvb", what);
  const dtype = kvb.dtype === "BF16" ? MlaWeightDtype.bf16 : MlaWeightDtype.f32;
  const krp = dr > 0 ? f32(kr, N * dr, "kr", what) : null;
  check(
    lib().k3_mla_latent_attention(f32(q, T * H * (dn + dr), "q", what), kvb.ptr, dtype, f32(ckv, N * R, "ckv", what), krp, f32(out, T * H * dv, "out", what), T, p0, H, dn, dr, dv, R),
    what,
  );
}

const sourceList = new BigUint64Array(maxAttnResSources);

/**
 * out[t] = AttnRes over sources[i][t] (each [tokens][width]) with the fold φ: keys normalised,
 * values raw, softmax over sources in list order. `probs` (optional) receives [tokens][sources].
 */
export function attnRes(sources: readonly F32Ref[], phi: F32Ref, out: F32Ref, probs: F32Ref | undefined, tokens: number, width: number, eps: number): void {
  const what = "attnRes";
  const n = sources.length;
  if (n < 1 || n > maxAttnResSources) throw new Error(`${what}: 1 to ${maxAttnResSources} sources (got ${n})`);
  const E = dim(width, "width", what);
  const T = dim(tokens, "tokens", what);
  sources.forEach((s, i) => {
    sourceList[i] = BigInt(f32(s, T * E, `sources[${i}]`, what));
  });
  const pp = probs ? f32(probs, T * n, "probs", what) : null;
  check(lib().k3_attnres(sourceList, n, f32(phi, E, "phi", what), f32(out, T * E, "out", what), pp, T, E, finite(eps, "eps", what)), what);
}

/**
 * Router for `tokens` tokens: sequential f64 logits, σ scores, biased top-k selection (ties to
 * the lowest index), unbiased weights, renormalised (if asked) and times ρ. Fills `out`.
 */
export function route(wAsBound: MatrixRef, bias: F32Ref, x: F32Ref, tokens: number, k: number, renormalize: boolean, rho: number, out: Routing): void {
  const w = readableMatrix(wAsBound);
  const what = `route ${w.rows}x${w.cols}`;
  const Ne = dim(w.rows, "experts", what);
  const E = dim(w.cols, "cols", what);
  const T = dim(tokens, "tokens", what);
  const K = dim(k, "k", what);
  if (K > Ne || K > maxRouterK) throw new Error(`${what}: k = ${K} exceeds the experts or ${maxRouterK}`);
  if (out.experts.length < T * K || out.weights.length < T * K) throw new Error(`${what}: outputs need ${T * K} entries`);
  aligned(w.ptr, w.dtype === "BF16" ? 2 : 4, "W", what);
  const sp = out.scores ? f32(out.scores, T * Ne, "scores", what) : null;
  check(
    lib().k3_router(
      w.ptr, w.dtype === "BF16" ? RouterDtype.bf16 : RouterDtype.f32, f32(bias, Ne, "bias", what), f32(x, T * E, "x", what), T, Ne, E, K,
      renormalize ? 1 : 0, finite(rho, "rho", what), out.experts, out.weights, sp,
    ),
    what,
  );
}

const probeOut = new BigUint64Array(1);

/** Reads every byte of `buffer` once on all pool threads (memory read bandwidth); returns a checksum. */
export function memReadSum(buffer: NativeBuffer): bigint {
  if (buffer.bytes < 8) throw new Error("memReadSum: buffer shorter than 8 bytes");
  check(lib().k3_mem_read_sum(buffer.ptr, buffer.bytes, probeOut), "memReadSum");
  return probeOut[0] as bigint;
}

/** `steps` rounds of the FMA-peak probe on every pool thread; returns the f64 operations done (time the call for FLOP/s). */
export function fmaPeak(steps: number): number {
  if (!Number.isInteger(steps) || steps < 16 || steps % 16 !== 0) throw new Error(`fmaPeak: steps must be a positive multiple of 16 (got ${steps})`);
  check(lib().k3_fma_peak(steps, probeOut), "fmaPeak");
  return Number(probeOut[0]);
}
