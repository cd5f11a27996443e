/**
 * Entry points only tests and benches use: switching the kernel variant and the pool's chunking
 * to sweep every execution path (model.md §8.4), and decoding one MXFP4 row. The engine chooses
 * its variant once, at load (src/native/isa.ts), and never calls these.
 */
import { mxfp4Group, Status, VectorPortsCode } from "../../src/native/abi.ts";
import { currentIsa, currentVectorPorts, runnableIsas, selectIsa, type IsaName, type VectorPortsName } from "../../src/native/isa.ts";
import { checkStatus, dim, f32 } from "../../src/native/kernel-checks.ts";
import { badScaleOut, kernelLib, tallyBadScales } from "../../src/native/kernel-runtime.ts";
import type { F32Ref, Pointer } from "../../src/native/memory.ts";

/**
 * Splits every parallel job into one-item chunks, so small inputs spread over all threads in
 * an interleaved order. Results must not change; off by default.
 */
export function setFineGrain(on: boolean): void {
  kernelLib().k3_pool_fine_grain(on ? 1 : 0);
}

/** The variants this library has and this CPU runs. */
export function availableIsas(): IsaName[] {
  return runnableIsas(kernelLib());
}

/** Switches every later kernel call to another variant, process-wide. Refuses one this library or CPU lacks. */
export function setIsa(name: IsaName): void {
  selectIsa(kernelLib(), name, `kernel variant ${name}`);
}

/** The variant the kernels run now. */
export function isaInUse(): IsaName {
  return currentIsa(kernelLib());
}

export type { VectorPortsName } from "../../src/native/isa.ts";

/**
 * Where the kernels take the CPU's vector shuffles, blends and conversions to issue (zig/pool.zig
 * `VectorPorts`): which bf16 multi-token and MXFP4 one-token paths run. The library sets it from
 * the CPU; the bits must not change.
 */
export function setVectorPorts(name: VectorPortsName): void {
  const status = kernelLib().k3_vector_ports_select(VectorPortsCode[name]);
  if (status !== Status.ok) throw new Error(`k3_vector_ports_select(${name}): status ${status}`);
}

export function vectorPortsInUse(): VectorPortsName {
  return currentVectorPorts(kernelLib());
}

/** The setting the library did not choose: the paths planned for the other kind of CPU. */
export function otherVectorPorts(): VectorPortsName {
  return vectorPortsInUse() === "besideFma" ? "onFmaPorts" : "besideFma";
}

/** Decodes one MXFP4 row exactly (E2M1 × 2^(s−127)) into `out`; returns the 255-scale count (also tallied). */
export function mxfp4DecodeRow(packed: Pointer, scales: Pointer, cols: number, out: F32Ref): number {
  const what = "mxfp4DecodeRow";
  dim(cols, "cols", what);
  if (cols % mxfp4Group !== 0) throw new Error(`${what}: cols must be a multiple of ${mxfp4Group}`);
  checkStatus(kernelLib().k3_mxfp4_decode_row(packed, scales, cols, f32(out, cols, "out", what), badScaleOut), what);
  return tallyBadScales();
}
