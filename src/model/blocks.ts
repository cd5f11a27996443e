/**
 * The blocks of one decoder layer, each over the `tokens` new positions of a step:
 * Kimi Delta Attention, gated MLA (NoPE), the dense MLP and the stable LatentMoE.
 * Every line is one operator of model.md section 6, in its order.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import * as kernels from "../native/kernels.ts";
import { offsetPointer } from "../native/memory.ts";
import type { ExpertSource } from "../weights/experts.ts";
import type { DenseWeights, ExpertWeights, KdaWeights, MlaWeights, MoeWeights } from "../weights/types.ts";
import type { F32, F32Pool } from "./f32.ts";
import type { KdaState, MlaCache } from "./state.ts";

export interface BlockContext {
  config: ModelConfig;
  pool: F32Pool;
  tokens: number;
}

/** An expert's six tensor addresses, as the routed-expert kernel takes them. */
function expertRef(e: ExpertWeights): kernels.ExpertRef {
  const at = (offset: number) => offsetPointer(e.buffer.ptr, offset);
  return {
    w1Packed: at(e.w1Packed), w1Scale: at(e.w1Scale),
    w3Packed: at(e.w3Packed), w3Scale: at(e.w3Scale),
    w2Packed: at(e.w2Packed), w2Scale: at(e.w2Scale),
  };
}

/** model.md 6.6. `x` is the normalised input [tokens][E]; returns [tokens][E]. */
export function kda(ctx: BlockContext, w: KdaWeights, state: KdaState, x: F32): F32 {
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
  kernels.shortConv(qRaw, w.qConv, state.convQ, q, T, P, c.shortConvKernel);
  kernels.shortConv(kRaw, w.kConv, state.convK, k, T, P, c.shortConvKernel);
  kernels.shortConv(vRaw, w.vConv, state.convV, v, T, P, c.shortConvKernel);
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
  kernels.kdaRecurrence(q, k, v, alpha, beta, state.recurrent, o, T, H, D);
  const gate = pool.alloc(T * P, "kda gate");
  kernels.matmul(w.gate, x, gate, T);
  const normed = pool.alloc(T * P, "kda gated output");
  kernels.kdaGatedNorm(o, w.oNorm, gate, normed, T, H, D, c.rmsNormEps); // norm first, then the gate
  const out = pool.alloc(T * c.hiddenSize, "kda out");
  kernels.matmul(w.o, normed, out, T);
  return out;
}

/**
 * model.md 6.7, in the latent space: appends each new position's normalised latent and rope
 * key to `cache` (positions first … first+tokens−1), then attends with kv_b_proj absorbed into
 * the query and output sides (zig/kernels/mla.zig). The one MLA path: prefill, decode and
 * recompute all run it, so they agree bit for bit.
 */
export function mla(ctx: BlockContext, w: MlaWeights, cache: MlaCache, first: number, x: F32): F32 {
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
  for (let t = 0; t < T; t++) {
    latent.a.set(compressed.a.subarray(t * kvWidth, t * kvWidth + R), t * R);
    // The rope key is raw: no norm, no rotation; one per position, shared by all heads.
    cache.kr.a.set(compressed.a.subarray(t * kvWidth + R, (t + 1) * kvWidth), (first + t) * dr);
  }
  // Only the latent part is normalised; it is cached as is (appended in place).
  kernels.rmsnorm(latent, w.kvaNorm, cache.latent.sub(first * R, T * R), T, R, c.rmsNormEps);
  const attended = pool.alloc(T * H * dv, "mla attention");
  kernels.mlaLatentAttention(q, w.kvb, cache.latent, cache.kr, attended, T, first, { heads: H, dn, dr, dv, rank: R });
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

/** model.md 6.11: router on the full-width x, experts in the latent, shared experts on x. */
export function latentMoe(ctx: BlockContext, w: MoeWeights, experts: ExpertSource, layer: number, x: F32): F32 {
  const { config: c, pool, tokens: T } = ctx;
  const k = c.numExpertsPerToken;
  const latentWidth = c.routedExpertHiddenSize;
  const I = c.moeIntermediateSize;
  const routing: kernels.Routing = { experts: new Int32Array(T * k), weights: new Float32Array(T * k) };
  kernels.route(w.router, w.routerBias, x, T, k, c.moeRenormalize, c.routedScalingFactor, routing);
  const z = pool.alloc(T * latentWidth, "moe latent");
  kernels.matmul(w.latentDown, x, z, T);
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
      kernels.moeRouted(z.row(t, latentWidth), [expertRef(weights)], weight, started ? one : accT, 1, 1, latentWidth, I, c.situBeta, c.situLinearBeta);
      if (started) kernels.add(accT, one, accT, latentWidth);
      started = true;
    });
    if (!started) accT.fill(0);
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
