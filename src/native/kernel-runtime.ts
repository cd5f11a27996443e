/**
 * The process-wide state behind the kernel wrappers (src/native/kernels.ts): the compute pool
 * and its size from the environment, the kernel variant in use, the scratch an I8R matrix is
 * dequantised into, and the running count of bad MXFP4 scale bytes. Everything here outlives a
 * call; the wrappers themselves keep nothing.
 *
 * Threads: the compute pool is sized on first use from the K3_THREADS environment variable
 * (a positive integer), else one thread per CPU this process may use. Results do not depend on
 * the count (model.md §8.4).
 */
import { envValue, type Environment } from "../env.ts";
import { quoteArgument, usageError } from "../errors.ts";
import { maxThreads, type Native } from "./abi.ts";
import { currentIsa, currentVectorPorts, isaDescription, runnableIsas, type IsaName, type VectorPortsName } from "./isa.ts";
import { checkStatus } from "./kernel-checks.ts";
import { native } from "./library.ts";
import { NativeBuffer } from "./memory.ts";

let poolReady = false;

/** libk3, its compute pool started (sized by the environment) on the first kernel call. */
export function kernelLib(): Native {
  const l = native();
  if (!poolReady) {
    poolReady = true;
    initPool();
  }
  return l;
}

/**
 * The thread count the environment asks for: K3_THREADS, else OMP_NUM_THREADS (which scripts
 * written for the original engine set), or undefined when neither is set. Refuses anything else.
 */
export function threadsFromEnv(env?: Environment): number | undefined {
  for (const name of ["K3_THREADS", "OMP_NUM_THREADS"] as const) {
    const raw = envValue(name, env);
    if (raw === undefined || raw.trim() === "") continue;
    const value = Number(raw.trim());
    if (!Number.isInteger(value) || value < 1 || value > maxThreads) {
      throw usageError(`${name} must be an integer from 1 to ${maxThreads} (got ${quoteArgument(raw)})`);
    }
    return value;
  }
  return undefined;
}

/**
 * Starts or resizes the compute pool and returns its thread count. Without an argument:
 * K3_THREADS if set, else one thread per CPU.
 */
export function initPool(threads?: number): number {
  const count = threads ?? threadsFromEnv() ?? 0;
  if (!Number.isInteger(count) || count < 0 || count > maxThreads) {
    throw new Error(`initPool: thread count ${count} is not an integer from 0 to ${maxThreads}`);
  }
  const l = native();
  poolReady = true;
  checkStatus(l.k3_pool_init(count), "k3_pool_init");
  return l.k3_pool_threads();
}

/** Current compute thread count. */
export function poolThreads(): number {
  return kernelLib().k3_pool_threads();
}

/** The kernel variant in use and the compute threads: what the run report and --version say. */
export interface KernelVariant {
  isa: IsaName;
  /** e.g. "x86-64-v4: AVX-512" */
  description: string;
  /** Every variant this library has and this CPU runs. */
  runnable: IsaName[];
  threads: number;
  /** Where the kernels take this CPU's vector shuffles, blends and conversions to issue (zig/pool.zig `VectorPorts`): speed only. */
  vectorPorts: VectorPortsName;
}

export function kernelVariant(): KernelVariant {
  const l = kernelLib();
  const isa = currentIsa(l);
  return { isa, description: isaDescription[isa], runnable: runnableIsas(l), threads: l.k3_pool_threads(), vectorPorts: currentVectorPorts(l) };
}

// ---------------------------------------------------------------------------------------------
// Scratch and tallies the wrappers share

let dequantScratch: NativeBuffer | undefined;

/**
 * The kernels that read a matrix in place in bf16 or f32 only (the router, kv_b_proj) get an
 * I8R matrix dequantised into this scratch first: `floats` f32 values, grown to the largest
 * such matrix and reused.
 */
export function dequantScratchFor(floats: number): NativeBuffer {
  if (!dequantScratch || dequantScratch.bytes < floats * 4) {
    dequantScratch?.free();
    dequantScratch = NativeBuffer.allocate(floats * 4, "dequantised I8R weights");
  }
  return dequantScratch;
}

/** Where an MXFP4 kernel writes the 255 scale bytes it met (its count out-parameter). */
export const badScaleOut = new BigUint64Array(1);
let badScaleTotal = 0;

/** The 255 scale bytes the last MXFP4 call met (in `badScaleOut`), added to the running count. */
export function tallyBadScales(): number {
  const met = Number(badScaleOut[0]);
  badScaleTotal += met;
  return met;
}

/**
 * MXFP4 scale bytes of 255 (NaN in OCP MX) the kernels have met since the last reset, over
 * every call; each was treated as a zero multiplier (model.md 5.2), and a run reports them.
 */
export function badScaleBytes(): number {
  return badScaleTotal;
}

/** Starts the bad-scale count from zero (a newly loaded model, tests). */
export function resetBadScaleBytes(): void {
  badScaleTotal = 0;
}
