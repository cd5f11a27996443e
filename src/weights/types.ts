/**
 * The bound model: every tensor the forward pass uses, found by name, checked against the
 * config, and held in native memory. Matrices keep their stored dtype (bf16 is widened inside
 * the dot product); small vectors are widened to f32 once at load.
 */
import type { NativeBuffer, Pointer } from "../native/memory.ts";

export type MatrixDtype = "BF16" | "F32" | "I8R";

/** A row-major weight matrix somewhere in native memory (a layer's bytes, a slot, a table). */
export interface Matrix {
  name: string;
  ptr: Pointer;
  rows: number;
  cols: number;
  dtype: MatrixDtype;
}

/** An f32 vector in native memory. */
export interface Vector {
  name: string;
  ptr: Pointer;
  length: number;
}

export interface KdaWeights {
  kind: "kda";
  q: Matrix;
  k: Matrix;
  v: Matrix;
  /** Depthwise taps, [P][Kc] f32. */
  qConv: Vector;
  kConv: Vector;
  vConv: Vector;
  fa: Matrix;
  fb: Matrix;
  beta: Matrix;
  /** One value per head (the first Hk of the shipped D-long tensor). */
  aLog: Vector;
  dtBias: Vector;
  gate: Matrix;
  oNorm: Vector;
  o: Matrix;
}

export interface MlaWeights {
  kind: "mla";
  qa: Matrix;
  qaNorm: Vector;
  qb: Matrix;
  kva: Matrix;
  kvaNorm: Vector;
  kvb: Matrix;
  gate: Matrix | undefined;
  o: Matrix;
}

export interface DenseWeights {
  kind: "dense";
  gate: Matrix;
  up: Matrix;
  down: Matrix;
}

export interface MoeWeights {
  kind: "moe";
  router: Matrix;
  routerBias: Vector;
  /** W↓ into the latent [Λ, E]. */
  latentDown: Matrix;
  /** W↑ out of the latent [E, Λ]. */
  latentUp: Matrix;
  latentNorm: Vector;
  shared: DenseWeights | undefined;
}

export interface LayerWeights {
  index: number;
  inputNorm: Vector;
  postNorm: Vector;
  /** AttnRes folds φ = norm ⊙ proj, before attention and before the FFN. */
  phiAttn: Vector;
  phiMlp: Vector;
  attention: KdaWeights | MlaWeights;
  ffn: DenseWeights | MoeWeights;
}


/** One routed expert's MXFP4 tensors inside a single native buffer. */
export interface ExpertWeights {
  layer: number;
  expert: number;
  buffer: NativeBuffer;
  /** Byte offsets into `buffer`. */
  w1Packed: number;
  w1Scale: number;
  w2Packed: number;
  w2Scale: number;
  w3Packed: number;
  w3Scale: number;
}
