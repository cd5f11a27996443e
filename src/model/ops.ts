/**
 * The operators the forward pass is written in. Each is one native call over all the tokens
 * of a step (or all rows/heads), with the evaluation order of model.md section 8.3; the
 * implementation is libk3 (src/native/kernels.ts). Shapes are row-major, per token.
 */
import type { ExpertWeights, Matrix, Vector } from "../weights/types.ts";
import type { F32 } from "./f32.ts";

export interface Routing {
  /** [tokens][k] selected experts, in selection (descending biased score) order. */
  experts: Int32Array;
  /** [tokens][k] combine weights: unbiased scores, renormalised, times ρ. */
  weights: Float32Array;
}

export interface MlaShape {
  heads: number;
  dn: number;
  dr: number;
  dv: number;
}

export interface Ops {
  /** y[t][o] = Σ_i W[o][i]·x[t][i]. */
  matmul(w: Matrix, x: F32, y: F32, tokens: number): void;
  /** y = RMSNorm(x) per row of `width` (gain optional); `rows` rows. */
  rmsnorm(x: F32, gain: Vector | undefined, y: F32, width: number, rows: number, eps: number): void;
  /** In place: each row of `width` divided by sqrt(Σx² + 1e-6). */
  l2norm(x: F32, width: number, rows: number): void;
  /**
   * The routed experts of one token: acc = Σ_j weights[j] · W2_j(SiTU(W1_j z, W3_j z)), in the
   * given (top-k) order, f32 accumulation, straight from the MXFP4 nibbles.
   */
  expertMix(z: F32, experts: readonly ExpertWeights[], weights: Float32Array, acc: F32, latent: number, inter: number, beta1: number, beta2: number): void;
  /** out = SiTU-GLU(gate, up), elementwise over `count`. */
  situGlu(gate: F32, up: F32, out: F32, count: number, beta1: number, beta2: number): void;
  /** Depthwise causal conv with SiLU over `tokens` steps, carrying `history` [channels][kernel-1]. */
  shortConv(x: F32, taps: Vector, history: F32, out: F32, tokens: number, channels: number, kernel: number): void;
  /** α[t][i] = exp(gmin·σ(exp(A_log[h])·(z[t][i] + dt_bias[i]))), i = h·dim + d. */
  kdaDecay(z: F32, aLog: Vector, dtBias: Vector, gmin: number, heads: number, dim: number, tokens: number, alpha: F32): void;
  /**
   * The delta-rule recurrence per head over `tokens` steps; `state` [heads][dim][dim] is carried.
   * q and k are L2-normalised; q is multiplied by f32(dim^-1/2) inside, before the recurrence.
   */
  kdaRecurrence(q: F32, k: F32, v: F32, alpha: F32, beta: F32, state: F32, out: F32, tokens: number, heads: number, dim: number): void;
  /** y = RMSNorm per head of o (one gain of `dim` for all heads), then ⊙ σ(gate): norm first. */
  kdaGatedNorm(o: F32, gain: Vector, gate: F32, y: F32, tokens: number, heads: number, dim: number, eps: number): void;
  /** x[i] = x[i]·σ(gate[i]). */
  sigmoidGate(x: F32, gate: F32, count: number): void;
  /** x[i] = σ(x[i]). */
  sigmoid(x: F32, count: number): void;
  /** a[i] = a[i] + b[i]. */
  add(a: F32, b: F32, count: number): void;
  /**
   * Causal MLA attention for `tokens` queries at positions first … first+tokens−1, each over
   * cached positions 0 … its own: q [tokens][heads][dn+dr], kv [pos][heads][dn+dv] (the kv_b
   * output as is), kr [pos][dr] shared by all heads; out [tokens][heads][dv].
   */
  mlaAttend(q: F32, kv: F32, kr: F32, out: F32, first: number, tokens: number, shape: MlaShape): void;
  /** out[t] = AttnRes over sources[i][t] with fold φ (keys normalised, values raw). */
  attnRes(sources: readonly F32[], phi: Vector, out: F32, width: number, tokens: number, eps: number): void;
  /** Router: sequential f64 logits, σ scores, biased top-k selection, unbiased weights. */
  route(w: Matrix, bias: Vector, x: F32, tokens: number, k: number, renormalize: boolean, scaling: number): Routing;
}
