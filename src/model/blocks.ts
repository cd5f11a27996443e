/**
 * The blocks of one decoder layer, each over the `tokens` new positions of a step:
 * Kimi Delta Attention, gated MLA (NoPE), the dense MLP and the stable LatentMoE.
 * Every line is one operator of model.md section 6, in its order.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { runtimeError } from "../errors.ts";
import * as kernels from "../native/kernels.ts";
import { offsetPointer } from "../native/memory.ts";
import type { ExpertSource } from "../weights/experts.ts";
import type { DenseWeights, ExpertWeights, KdaWeights, MlaWeights, MoeWeights } from "../weights/types.ts";
import type { F32, F32Pool } from "./f32.ts";
import type { KdaReplayRecord, KdaState, MlaCache } from "./state.ts";

export interface BlockContext {
  config: ModelConfig;
  pool: F32Pool;
  /** The rows of the step: every sequence's new positions, one after another. */
  tokens: number;
}

/**
 * One sequence's part of a step: rows [start, start + rows) of every activation. The operators
 * that read a sequence's history (the conv, the recurrence, attention over the cache) run on
 * each part with its own state; every other operator takes all rows of the step at once and
 * gives each row the bits it gets alone (model.md 8.3-8.4).
 */
export interface Segment {
  start: number;
  rows: number;
}

export interface KdaSegment extends Segment {
  state: KdaState;
  /** Keeps what the conv histories and the recurrence consume (see `kda`). */
  record?: KdaReplayRecord;
}

export interface MlaSegment extends Segment {
  cache: MlaCache;
  /** The sequence's position of the part's first row. */
  first: number;
}

/** `width` floats a row, the segment's rows. */
const part = (x: F32, s: Segment, width: number): F32 => x.sub(s.start * width, s.rows * width);

/**
 * model.md 6.6. `x` is the normalised input [tokens][E]; returns [tokens][E]. With a segment's
 * `record`, what its conv histories and recurrence consume is kept there, so a prefix of its
 * positions can be replayed onto a snapshot without the layer's weights (`replayKda`).
 */
export function kda(ctx: BlockContext, w: KdaWeights, segments: readonly KdaSegment[], x: F32): F32 {
  const { config: c, pool, tokens: T } = ctx;
  const H = c.kdaNumHeads;
  const D = c.kdaHeadDim;
  const P = H * D;
  const qRaw = pool.alloc(T * P, "kda q");
  const kRaw = pool.alloc(T * P, "kda k");
  const vRaw = pool.alloc(T * P, "kda v");
  kernels.matmul(w.q, x, qRaw, T);
  kernels.matmul(w.k, x, kRaw, T);
  kernels.matmul(w.v, x, vRaw, T);
  const q = pool.alloc(T * P, "kda q conv");
  const k = pool.alloc(T * P, "kda k conv");
  const v = pool.alloc(T * P, "kda v conv");
  for (const s of segments) {
    kernels.shortConv(part(qRaw, s, P), w.qConv, s.state.convQ, part(q, s, P), s.rows, P, c.shortConvKernel);
    kernels.shortConv(part(kRaw, s, P), w.kConv, s.state.convK, part(k, s, P), s.rows, P, c.shortConvKernel);
    kernels.shortConv(part(vRaw, s, P), w.vConv, s.state.convV, part(v, s, P), s.rows, P, c.shortConvKernel);
  }
  kernels.l2norm(q, q, T * H, D);
  kernels.l2norm(k, k, T * H, D); // v is not normalised
  const beta = pool.alloc(T * H, "kda beta");
  kernels.matmul(w.beta, x, beta, T);
  kernels.sigmoid(beta, beta, T * H);
  const zLow = pool.alloc(T * D, "kda decay low rank");
  const z = pool.alloc(T * P, "kda decay");
  kernels.matmul(w.fa, x, zLow, T);
  kernels.matmul(w.fb, zLow, z, T);
  const alpha = pool.alloc(T * P, "kda alpha");
  kernels.kdaDecay(z, w.aLog, w.dtBias, alpha, undefined, T, H, D, c.gateLowerBound);
  const o = pool.alloc(T * P, "kda output");
  for (const s of segments) {
    const { record } = s;
    if (record) {
      for (const [into, from] of [[record.qRaw, qRaw], [record.kRaw, kRaw], [record.vRaw, vRaw], [record.k, k], [record.v, v], [record.alpha, alpha]] as const) {
        into.a.set(part(from, s, P).a);
      }
      record.beta.a.set(part(beta, s, H).a);
    }
    kernels.kdaRecurrence(part(q, s, P), part(k, s, P), part(v, s, P), part(alpha, s, P), part(beta, s, H), s.state.recurrent, part(o, s, P), s.rows, H, D);
  }
  const gate = pool.alloc(T * P, "kda gate");
  kernels.matmul(w.gate, x, gate, T);
  const normed = pool.alloc(T * P, "kda gated output");
  kernels.kdaGatedNorm(o, w.oNorm, gate, normed, T, H, D, c.rmsNormEps); // norm first, then the gate
  const out = pool.alloc(T * c.hiddenSize, "kda out");
  kernels.matmul(w.o, normed, out, T);
  return out;
}

/**
 * Brings one KDA layer's carried state (restored to where the recorded call began) forward over
 * the first `tokens` recorded positions, as a call over just those positions would (runtime.md
 * 9.2's replay, without the weights): the conv histories take the raw projections through the
 * same kernel (the taps only shape its output, which is dropped; the history is a shift of raw
 * inputs), and the recurrence takes the recorded k, v, decay and write strength. The query only
 * shapes the recurrence's output, which is dropped too, so k stands in for it.
 */
export function replayKda(ctx: BlockContext, state: KdaState, record: KdaReplayRecord): void {
  const { config: c, pool, tokens: T } = ctx;
  const H = c.kdaNumHeads;
  const D = c.kdaHeadDim;
  const P = H * D;
  const noTaps = pool.alloc(P * c.shortConvKernel, "replay conv taps");
  noTaps.fill(0);
  const dropped = pool.alloc(T * P, "replay dropped output");
  kernels.shortConv(record.qRaw.sub(0, T * P), noTaps, state.convQ, dropped, T, P, c.shortConvKernel);
  kernels.shortConv(record.kRaw.sub(0, T * P), noTaps, state.convK, dropped, T, P, c.shortConvKernel);
  kernels.shortConv(record.vRaw.sub(0, T * P), noTaps, state.convV, dropped, T, P, c.shortConvKernel);
  const k = record.k.sub(0, T * P);
  kernels.kdaRecurrence(k, k, record.v.sub(0, T * P), record.alpha.sub(0, T * P), record.beta.sub(0, T * H), state.recurrent, dropped, T, H, D);
}

/**
 * model.md 6.7, in the latent space: appends each new position's normalised latent and rope
 * key to its sequence's cache (positions first … first+rows−1 of each segment), then attends
 * with kv_b_proj absorbed into the query and output sides (zig/kernels/mla.zig). The one MLA
 * path: prefill, decode, recompute and batched steps all run it, so they agree bit for bit.
 */
export function mla(ctx: BlockContext, w: MlaWeights, segments: readonly MlaSegment[], x: F32): F32 {
  const { config: c, pool, tokens: T } = ctx;
  const H = c.numAttentionHeads;
  const dn = c.qkNopeHeadDim;
  const dr = c.qkRopeHeadDim;
  const dv = c.vHeadDim;
  const R = c.kvLoraRank;
  const dq = dn + dr;
  const cqRaw = pool.alloc(T * c.qLoraRank, "mla q latent");
  const cq = pool.alloc(T * c.qLoraRank, "mla q latent normed");
  kernels.matmul(w.qa, x, cqRaw, T);
  kernels.rmsnorm(cqRaw, w.qaNorm, cq, T, c.qLoraRank, c.rmsNormEps);
  const q = pool.alloc(T * H * dq, "mla q");
  kernels.matmul(w.qb, cq, q, T);
  const kvWidth = R + dr;
  const compressed = pool.alloc(T * kvWidth, "mla kv latent");
  kernels.matmul(w.kva, x, compressed, T);
  const latent = pool.alloc(T * R, "mla kv latent part");
  const attended = pool.alloc(T * H * dv, "mla attention");
  for (const s of segments) {
    const { cache, first } = s;
    for (let i = 0; i < s.rows; i++) {
      const t = s.start + i;
      latent.a.set(compressed.a.subarray(t * kvWidth, t * kvWidth + R), t * R);
      // The rope key is raw: no norm, no rotation; one per position, shared by all heads.
      cache.kr.a.set(compressed.a.subarray(t * kvWidth + R, (t + 1) * kvWidth), (first + i) * dr);
    }
    // Only the latent part is normalised; it is cached as is (appended in place).
    kernels.rmsnorm(part(latent, s, R), w.kvaNorm, cache.latent.sub(first * R, s.rows * R), s.rows, R, c.rmsNormEps);
    kernels.mlaLatentAttention(part(q, s, H * dq), w.kvb, cache.latent, cache.kr, part(attended, s, H * dv), s.rows, first, { heads: H, dn, dr, dv, rank: R });
  }
  if (w.gate) {
    const gate = pool.alloc(T * H * dv, "mla gate");
    kernels.matmul(w.gate, x, gate, T);
    kernels.sigmoidGate(attended, gate, attended, T * H * dv); // a gate and no norm, unlike KDA
  }
  const out = pool.alloc(T * c.hiddenSize, "mla out");
  kernels.matmul(w.o, attended, out, T);
  return out;
}

/** SiTU-GLU MLP: down · SiTU([gate·x | up·x]). Also the fused shared experts (model.md 3.5). */
export function denseMlp(ctx: BlockContext, w: DenseWeights, x: F32, tokens: number): F32 {
  const { config: c, pool } = ctx;
  const width = w.gate.rows;
  const gate = pool.alloc(tokens * width, "mlp gate");
  const up = pool.alloc(tokens * width, "mlp up");
  kernels.matmul(w.gate, x, gate, tokens);
  kernels.matmul(w.up, x, up, tokens);
  const act = pool.alloc(tokens * width, "mlp activation");
  kernels.situGlu(gate, up, act, tokens * width, c.situBeta, c.situLinearBeta);
  const out = pool.alloc(tokens * w.down.rows, "mlp out");
  kernels.matmul(w.down, act, out, tokens);
  return out;
}

/** An expert's three matrices, in place in its buffer: w1 = gate [I][Λ], w3 = up [I][Λ], w2 = down [Λ][I]. */
function expertMatrices(e: ExpertWeights, latent: number, inter: number): { w1: kernels.Mxfp4Ref; w3: kernels.Mxfp4Ref; w2: kernels.Mxfp4Ref } {
  const at = (offset: number) => offsetPointer(e.buffer.ptr, offset);
  return {
    w1: { packed: at(e.w1Packed), scales: at(e.w1Scale), rows: inter, cols: latent },
    w3: { packed: at(e.w3Packed), scales: at(e.w3Scale), rows: inter, cols: latent },
    w2: { packed: at(e.w2Packed), scales: at(e.w2Scale), rows: latent, cols: inter },
  };
}

/** For each expert any token picked, the picks that chose it (index t·k + j), experts ascending. */
function picksByExpert(chosen: ArrayLike<number>): Map<number, number[]> {
  const users = new Map<number, number[]>();
  for (let pick = 0; pick < chosen.length; pick++) {
    const expert = chosen[pick] as number;
    const list = users.get(expert);
    if (list) list.push(pick);
    else users.set(expert, [pick]);
  }
  return new Map([...users.entries()].sort((a, b) => a[0] - b[0]));
}

/**
 * model.md 6.11: router on the full-width x, experts in the latent, shared experts on x.
 * The tokens of a call share their expert loads (chunk-union MoE): every expert any of them
 * picked is loaded once, in waves the cache can hold, and applied to all its tokens in one
 * multi-row product; each token then sums its own experts' outputs in its own top-k order, so
 * its result is the same bits as a call with that token alone.
 */
export function latentMoe(ctx: BlockContext, w: MoeWeights, experts: ExpertSource, layer: number, x: F32): F32 {
  const { config: c, pool, tokens: T } = ctx;
  const k = c.numExpertsPerToken;
  const latentWidth = c.routedExpertHiddenSize;
  const I = c.moeIntermediateSize;
  const routing: kernels.Routing = { experts: new Int32Array(T * k), weights: new Float32Array(T * k) };
  kernels.route(w.router, w.routerBias, x, T, k, c.moeRenormalize, c.routedScalingFactor, routing);
  // Finite weights and activations route to finite weights; NaN here means corrupt tensor bytes.
  if (!routing.weights.every(Number.isFinite)) {
    throw runtimeError(`layer ${layer}: the router's weights are not finite numbers (a NaN or infinity reached it): the checkpoint's tensors are probably corrupt`);
  }
  experts.restrict?.(layer, routing, T, k); // the hybrid draft keeps only resident experts
  const z = pool.alloc(T * latentWidth, "moe latent");
  kernels.matmul(w.latentDown, x, z, T);
  for (let t = 0; t < T; t++) experts.pick(layer, Array.from(routing.experts.subarray(t * k, (t + 1) * k)));
  const outputs = pool.alloc(T * k * latentWidth, "moe expert outputs"); // [T][k][Λ]: pick t·k + j
  const present = new Uint8Array(T * k); // 0: the expert was dropped, its pick adds nothing
  const users = picksByExpert(routing.experts);
  const union = [...users.keys()];
  // One expert has at most one pick per token: T rows of scratch serve every expert in turn.
  const inputs = pool.alloc(T * latentWidth, "moe expert inputs");
  const gates = pool.alloc(T * I, "expert gate");
  const ups = pool.alloc(T * I, "expert up");
  const downs = pool.alloc(T * latentWidth, "expert out");
  for (let at = 0; at < union.length; at += experts.waveCapacity) {
    const wave = union.slice(at, at + experts.waveCapacity);
    experts.prefetch(layer, wave); // the wave's reads are issued together, sorted on disk
    for (const expert of wave) {
      const weights = experts.get(layer, expert);
      if (!weights) continue; // dropped: counted by the source, the run is reported invalid
      const picks = users.get(expert) as number[];
      const M = picks.length;
      const rows = inputs.sub(0, M * latentWidth);
      picks.forEach((pick, r) => rows.a.set(z.row(Math.floor(pick / k), latentWidth).a, r * latentWidth));
      const m = expertMatrices(weights, latentWidth, I);
      const gate = gates.sub(0, M * I);
      const up = ups.sub(0, M * I);
      kernels.matmulMxfp4(m.w1, rows, gate, M);
      kernels.matmulMxfp4(m.w3, rows, up, M);
      kernels.situGlu(gate, up, gate, M * I, c.situBeta, c.situLinearBeta);
      const down = downs.sub(0, M * latentWidth);
      kernels.matmulMxfp4(m.w2, gate, down, M);
      picks.forEach((pick, r) => {
        outputs.a.set(down.row(r, latentWidth).a, pick * latentWidth);
        present[pick] = 1;
      });
    }
  }
  const acc = pool.alloc(T * latentWidth, "moe aggregate");
  for (let t = 0; t < T; t++) {
    // acc_t = Σ_j f32(w_j·d_j) in top-k order from +0, as the one-token kernel sums it.
    const accT = acc.row(t, latentWidth);
    accT.fill(0);
    for (let j = 0; j < k; j++) {
      const pick = t * k + j;
      if (present[pick]) kernels.axpy(accT, outputs.row(pick, latentWidth), latentWidth, routing.weights[pick] as number);
    }
  }
  let normed = acc;
  if (c.latentMoeUseNorm) {
    normed = pool.alloc(T * latentWidth, "moe aggregate normed");
    kernels.rmsnorm(acc, w.latentNorm, normed, T, latentWidth, c.rmsNormEps); // once, on the weighted sum
  }
  const out = pool.alloc(T * c.hiddenSize, "moe out");
  kernels.matmul(w.latentUp, normed, out, T);
  if (w.shared) kernels.add(out, denseMlp(ctx, w.shared, x, T), out, T * c.hiddenSize); // on x, unweighted
  return out;
}
