/**
 * This machine's compute and memory rates as k3 will meet them, for the doctor's forecast
 * (src/plan/forecast.ts): the memory read bandwidth and the f64 FMA peak on every compute
 * thread (the limits), and k3's own bf16 and MXFP4 matrix-vector kernels at T = 1 over
 * matrices far larger than the caches (what a decode token actually runs at). Each figure is
 * the best of a few timed calls after one warm call; the whole probe takes about a second.
 */
import { fmaPeak, matmul, matmulMxfp4, memReadSum } from "../native/kernels.ts";
import { initPool } from "../native/kernel-runtime.ts";
import { NativeBuffer } from "../native/memory.ts";

export interface MachineSpeed {
  threads: number;
  memoryBytesPerSecond: number;
  /** f64 fused multiply-adds per second (FLOP/s / 2). */
  multiplyAddsPerSecond: number;
  bf16BytesPerSecond: number;
  mxfp4BytesPerSecond: number;
  /** The MXFP4 rate in weights per second (each weight costs 0.53125 bytes). */
  mxfp4WeightsPerSecond: number;
}

/** Larger than any last-level cache here (32 MiB on Zen 4), small enough to fault in quickly. */
const probeBytes = 192 << 20;
/** The released hidden width (bf16 rows) and routed expert's latent width (MXFP4 rows). */
const bf16Cols = 7168;
const mxfp4Cols = 3584;
const timedCalls = 4;
/** Rounds per thread of `k3_fma_peak` (12 four-wide FMAs each): ~30 ms at ~3.5 GHz. */
const fmaSteps = 16 * (1 << 20);

/** The fastest of `calls` runs of `f`, seconds, after one untimed warm run. */
function fastest(calls: number, f: () => unknown): number {
  f();
  let best = Infinity;
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    f();
    best = Math.min(best, (performance.now() - started) / 1000);
  }
  return best;
}

/**
 * Fills with xorshift words masked by `mask` and or-ed with `or` (finite bf16 pairs, valid MXFP4
 * scales); fast enough for hundreds of MB. The same seed every call, so runs read the same bytes.
 */
export function fillRandom(buffer: NativeBuffer, mask = 0xffffffff, or = 0): void {
  const bytes = buffer.u8();
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, Math.floor(buffer.bytes / 4));
  let s = 0x9e3779b9;
  for (let i = 0; i < words.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    words[i] = ((s >>> 0) & mask) | or;
  }
}

/** One `k3_fma_peak` call on every pool thread: the f64 operations it did (time the call for FLOP/s). */
export function fmaPeakFlops(): number {
  return fmaPeak(fmaSteps);
}

function withBuffers<T>(sizes: readonly [number, string][], use: (buffers: NativeBuffer[]) => T): T {
  const buffers: NativeBuffer[] = [];
  try {
    for (const [bytes, purpose] of sizes) buffers.push(NativeBuffer.allocate(bytes, purpose, "read-target"));
    return use(buffers);
  } finally {
    for (const b of buffers) b.free();
  }
}

function bf16Rate(): { memory: number; bf16: number } {
  const rows = Math.floor(probeBytes / (bf16Cols * 2));
  const weightBytes = rows * bf16Cols * 2;
  return withBuffers([[weightBytes, "doctor bf16 probe"], [bf16Cols * 4, "doctor probe x"], [rows * 4, "doctor probe y"]], ([w, x, y]) => {
    const [W, X, Y] = [w as NativeBuffer, x as NativeBuffer, y as NativeBuffer];
    // Exponents kept below 0x3f80 (|w| < 1): finite bf16, as a checkpoint's weights are.
    fillRandom(W, 0x3f7f3f7f, 0);
    fillRandom(X, 0x3f7fffff, 0);
    const memory = weightBytes / fastest(timedCalls, () => memReadSum(W));
    const bf16 = weightBytes / fastest(timedCalls, () => matmul({ ptr: W.ptr, rows, cols: bf16Cols, dtype: "BF16" }, { ptr: X.ptr, length: bf16Cols }, { ptr: Y.ptr, length: rows }, 1));
    return { memory, bf16 };
  });
}

function mxfp4Rate(): { bytes: number; weights: number } {
  const groups = mxfp4Cols / 32;
  const rows = Math.floor(probeBytes / (mxfp4Cols / 2 + groups));
  const packedBytes = rows * (mxfp4Cols / 2);
  const scaleBytes = Math.ceil((rows * groups) / 4) * 4;
  return withBuffers([[packedBytes, "doctor MXFP4 probe"], [scaleBytes, "doctor MXFP4 scales"], [mxfp4Cols * 4, "doctor probe x"], [rows * 4, "doctor probe y"]], ([p, s, x, y]) => {
    const [P, S, X, Y] = [p as NativeBuffer, s as NativeBuffer, x as NativeBuffer, y as NativeBuffer];
    fillRandom(P, 0xffffffff, 0);
    // Scale bytes 0x78-0x7f (2^-7 to 2^0): never 255, the NaN scale the kernels count.
    fillRandom(S, 0x07070707, 0x78787878);
    fillRandom(X, 0x3f7fffff, 0);
    const seconds = fastest(timedCalls, () => matmulMxfp4({ packed: P.ptr, scales: S.ptr, rows, cols: mxfp4Cols }, { ptr: X.ptr, length: mxfp4Cols }, { ptr: Y.ptr, length: rows }, 1));
    return { bytes: (packedBytes + rows * groups) / seconds, weights: (rows * mxfp4Cols) / seconds };
  });
}

function fmaRate(): number {
  const flops = fmaPeakFlops();
  return flops / 2 / fastest(timedCalls, fmaPeakFlops);
}

/** Measures every rate on the compute pool as a run would size it (K3_THREADS, else every CPU). */
export function measureMachineSpeed(): MachineSpeed {
  const threads = initPool();
  const { memory, bf16 } = bf16Rate();
  const mxfp4 = mxfp4Rate();
  return { threads, memoryBytesPerSecond: memory, multiplyAddsPerSecond: fmaRate(), bf16BytesPerSecond: bf16, mxfp4BytesPerSecond: mxfp4.bytes, mxfp4WeightsPerSecond: mxfp4.weights };
}
