/**
 * The blocks of one decoder layer, each over the `tokens` new positions of a step:
 * Kimi Delta Attention, gated MLA (NoPE), the dense MLP and the stable LatentMoE.
 * Every line is one operator of model.md section 6, in its order.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import type { ExpertSource } from "../weights/experts.ts";
import type { DenseWeights, KdaWeights, MlaWeights, MoeWeights } from "../weights/types.ts";
import type { F32, F32Pool } from "./f32.ts";
import type { Ops } from "./ops.ts";
import type { KdaState, MlaCache } from "./state.ts";

export interface BlockContext {
  config: ModelConfig;
  ops: Ops;
  pool: F32Pool;
  tokens: number;
}

/** model.md 6.6. `x` is the normalised input [tokens][E]; returns [tokens][E]. */
export function kda(ctx: BlockContext, w: KdaWeights, state: KdaState, x: F32): F32 {
  const { config: c, ops, pool, tokens: T } = ctx;
  const H = c.kdaNumHeads;
  const D = c.kdaHeadDim;
  const P = H * D;
  const qRaw = pool.alloc(T * P, "kda q");
  const kRaw = pool.alloc(T * P, "kda k");
  const vRaw = pool.alloc(T * P, "kda v");
  ops.matmul(w.q, x, qRaw, T);
  ops.matmul(w.k, x, kRaw, T);
  ops.matmul(w.v, x, vRaw, T);
  const q = pool.alloc(T * P, "kda q conv");
  const k = pool.alloc(T * P, "kda k conv");
  const v = pool.alloc(T * P, "kda v conv");
  ops.shortConv(qRaw, w.qConv, state.convQ, q, T, P, c.shortConvKernel);
  ops.shortConv(kRaw, w.kConv, state.convK, k, T, P, c.shortConvKernel);
  ops.shortConv(vRaw, w.vConv, state.convV, v, T, P, c.shortConvKernel);
  ops.l2norm(q, D, T * H);
  ops.l2norm(k, D, T * H); // v is not normalised
  const beta = pool.alloc(T * H, "kda beta");
  ops.matmul(w.beta, x, beta, T);
  ops.sigmoid(beta, T * H);
  const zLow = pool.alloc(T * D, "kda decay low rank");
  const z = pool.alloc(T * P, "kda decay");
  ops.matmul(w.fa, x, zLow, T);
  ops.matmul(w.fb, zLow, z, T);
  const alpha = pool.alloc(T * P, "kda alpha");
  ops.kdaDecay(z, w.aLog, w.dtBias, c.gateLowerBound, H, D, T, alpha);
  const o = pool.alloc(T * P, "kda output");
  ops.kdaRecurrence(q, k, v, alpha, beta, state.recurrent, o, T, H, D);
  const gate = pool.alloc(T * P, "kda gate");
  ops.matmul(w.gate, x, gate, T);
  const normed = pool.alloc(T * P, "kda gated output");
  ops.kdaGatedNorm(o, w.oNorm, gate, normed, T, H, D, c.rmsNormEps); // norm first, then the gate
  const out = pool.alloc(T * c.hiddenSize, "kda out");
  ops.matmul(w.o, normed, out, T);
  return out;
}

/** model.md 6.7. Appends the step's keys to `cache` at positions first … first+tokens−1. */
export function mla(ctx: BlockContext, w: MlaWeights, cache: MlaCache, first: number, x: F32): F32 {
  const { config: c, ops, pool, tokens: T } = ctx;
  const H = c.numAttentionHeads;
  const dn = c.qkNopeHeadDim;
  const dr = c.qkRopeHeadDim;
  const dv = c.vHeadDim;
  const dq = dn + dr;
  const cqRaw = pool.alloc(T * c.qLoraRank, "mla q latent");
  const cq = pool.alloc(T * c.qLoraRank, "mla q latent normed");
  ops.matmul(w.qa, x, cqRaw, T);
  ops.rmsnorm(cqRaw, w.qaNorm, cq, c.qLoraRank, T, c.rmsNormEps);
  const q = pool.alloc(T * H * dq, "mla q");
  ops.matmul(w.qb, cq, q, T);
  const kvWidth = c.kvLoraRank + dr;
  const compressed = pool.alloc(T * kvWidth, "mla kv latent");
  ops.matmul(w.kva, x, compressed, T);
  const latent = pool.alloc(T * c.kvLoraRank, "mla kv latent part");
  for (let t = 0; t < T; t++) {
    latent.a.set(compressed.a.subarray(t * kvWidth, t * kvWidth + c.kvLoraRank), t * c.kvLoraRank);
    // The rope key is raw: no norm, no rotation; one per position, shared by all heads.
    cache.kr.a.set(compressed.a.subarray(t * kvWidth + c.kvLoraRank, (t + 1) * kvWidth), (first + t) * dr);
  }
  const latentNormed = pool.alloc(T * c.kvLoraRank, "mla kv latent normed");
  ops.rmsnorm(latent, w.kvaNorm, latentNormed, c.kvLoraRank, T, c.rmsNormEps);
  const kvRow = H * (dn + dv);
  ops.matmul(w.kvb, latentNormed, cache.kv.sub(first * kvRow, T * kvRow), T); // appended in place
  const attended = pool.alloc(T * H * dv, "mla attention");
  ops.mlaAttend(q, cache.kv, cache.kr, attended, first, T, { heads: H, dn, dr, dv });
  if (w.gate) {
    const gate = pool.alloc(T * H * dv, "mla gate");
    ops.matmul(w.gate, x, gate, T);
    ops.sigmoidGate(attended, gate, T * H * dv); // a gate and no norm, unlike KDA
  }
  const out = pool.alloc(T * c.hiddenSize, "mla out");
  ops.matmul(w.o, attended, out, T);
  return out;
}

/** SiTU-GLU MLP: down · SiTU([gate·x | up·x]). Also the fused shared experts (model.md 3.5). */
export function denseMlp(ctx: BlockContext, w: DenseWeights, x: F32, tokens: number): F32 {
  const { config: c, ops, pool } = ctx;
  const width = w.gate.rows;
  const gate = pool.alloc(tokens * width, "mlp gate");
  const up = pool.alloc(tokens * width, "mlp up");
  ops.matmul(w.gate, x, gate, tokens);
  ops.matmul(w.up, x, up, tokens);
  const act = pool.alloc(tokens * width, "mlp activation");
  ops.situGlu(gate, up, act, tokens * width, c.situBeta, c.situLinearBeta);
  const out = pool.alloc(tokens * w.down.rows, "mlp out");
  ops.matmul(w.down, act, out, tokens);
  return out;
}

/** model.md 6.11: router on the full-width x, experts in the latent, shared experts on x. */
export function latentMoe(ctx: BlockContext, w: MoeWeights, experts: ExpertSource, layer: number, x: F32): F32 {
  const { config: c, ops, pool, tokens: T } = ctx;
  const k = c.numExpertsPerToken;
  const latentWidth = c.routedExpertHiddenSize;
  const I = c.moeIntermediateSize;
  const routing = ops.route(w.router, w.routerBias, x, T, k, c.moeRenormalize, c.routedScalingFactor);
  const z = pool.alloc(T * latentWidth, "moe latent");
  ops.matmul(w.latentDown, x, z, T);
  const acc = pool.alloc(T * latentWidth, "moe aggregate");
  const one = pool.alloc(latentWidth, "one expert's weighted output");
  for (let t = 0; t < T; t++) {
    // One token at a time: the cache only has to hold one token's top-k. The whole top-k is
    // announced first so its reads run together; each expert is computed as soon as it is in.
    const chosen = Array.from(routing.experts.subarray(t * k, (t + 1) * k));
    experts.prefetch(layer, chosen);
    const accT = acc.row(t, latentWidth);
    let started = false;
    chosen.forEach((expert, j) => {
      const weights = experts.get(layer, expert);
      if (!weights) return; // dropped: counted by the source, the run is reported invalid
      const weight = routing.weights.subarray(t * k + j, t * k + j + 1);
      // acc accumulates w_j·d_j in top-k order (f32), the same code on every path.
      ops.expertMix(z.row(t, latentWidth), [weights], weight, started ? one : accT, latentWidth, I, c.situBeta, c.situLinearBeta);
      if (started) ops.add(accT, one, latentWidth);
      started = true;
    });
    if (!started) accT.fill(0);
  }
  let normed = acc;
  if (c.latentMoeUseNorm) {
    normed = pool.alloc(T * latentWidth, "moe aggregate normed");
    ops.rmsnorm(acc, w.latentNorm, normed, latentWidth, T, c.rmsNormEps); // once, on the weighted sum
  }
  const out = pool.alloc(T * c.hiddenSize, "moe out");
  ops.matmul(w.latentUp, normed, out, T);
  if (w.shared) ops.add(out, denseMlp(ctx, w.shared, x, T), T * c.hiddenSize); // on x, unweighted
  return out;
}
