/** The forward pass's operators, implemented by libk3 (src/native/kernels.ts). */
import type { Pointer } from "bun:ffi";
import * as k from "../native/kernels.ts";
import type { ExpertWeights } from "../weights/types.ts";
import type { Ops, Routing } from "./ops.ts";

function expertRef(e: ExpertWeights): k.ExpertRef {
  const at = (offset: number) => (e.buffer.ptr + offset) as Pointer;
  return {
    w1Packed: at(e.w1Packed), w1Scale: at(e.w1Scale),
    w3Packed: at(e.w3Packed), w3Scale: at(e.w3Scale),
    w2Packed: at(e.w2Packed), w2Scale: at(e.w2Scale),
  };
}

export interface NativeOps extends Ops {
  /** MXFP4 scale bytes of 255 met so far (treated as a zero multiplier; model.md 5.2). */
  readonly badScaleBytes: number;
}

export function nativeOps(): NativeOps {
  let badScaleBytes = 0;
  return {
    get badScaleBytes() {
      return badScaleBytes;
    },
    matmul: (w, x, y, tokens) => k.matmul(w, x, y, tokens),
    rmsnorm: (x, gain, y, width, rows, eps) => k.rmsnorm(x, gain, y, rows, width, eps),
    l2norm: (x, width, rows) => k.l2norm(x, x, rows, width),
    expertMix: (z, experts, weights, acc, latent, inter, beta1, beta2) => {
      badScaleBytes += k.moeRouted(z, experts.map(expertRef), weights, acc, 1, experts.length, latent, inter, beta1, beta2);
    },
    situGlu: (gate, up, out, count, beta1, beta2) => k.situGlu(gate, up, out, count, beta1, beta2),
    shortConv: (x, taps, history, out, tokens, channels, kernel) => k.shortConv(x, taps, history, out, tokens, channels, kernel),
    kdaDecay: (z, aLog, dtBias, gmin, heads, dim, tokens, alpha) => k.kdaDecay(z, aLog, dtBias, alpha, undefined, tokens, heads, dim, gmin),
    kdaRecurrence: (q, key, v, alpha, beta, state, out, tokens, heads, dim) => k.kdaRecurrence(q, key, v, alpha, beta, state, out, tokens, heads, dim),
    kdaGatedNorm: (o, gain, gate, y, tokens, heads, dim, eps) => k.kdaGatedNorm(o, gain, gate, y, tokens, heads, dim, eps),
    sigmoidGate: (x, gate, count) => k.sigmoidGate(x, gate, x, count),
    sigmoid: (x, count) => k.sigmoid(x, x, count),
    add: (a, b, count) => k.add(a, b, a, count),
    mlaAttend: (q, kv, kr, out, first, tokens, shape) => k.mlaAttention(q, kv, kr, out, tokens, first, shape),
    attnRes: (sources, phi, out, width, tokens, eps) => k.attnRes(sources, phi, out, undefined, tokens, width, eps),
    route: (w, bias, x, tokens, topK, renormalize, scaling): Routing => {
      const out = { experts: new Int32Array(tokens * topK), weights: new Float32Array(tokens * topK) };
      k.route(w, bias, x, tokens, topK, renormalize, scaling, out);
      return out;
    },
  };
}
