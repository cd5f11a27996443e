/**
 * THE HOOK for the kernel-variant work: the name of the kernel variant libk3 will run on this
 * machine, as `k3 doctor` prints it. Today there is one variant per build target, named from the
 * architecture; when libk3 selects among ISA variants at run time, this function should ask it
 * (one ABI call) and return that name. Nothing else in the doctor needs to change.
 */
import { arch } from "node:os";

export function kernelVariantName(machineArch: string = arch()): string {
  if (machineArch === "x64") return "x86-64-v3 (AVX2 + FMA), the build's only variant";
  if (machineArch === "arm64") return "AArch64 baseline (NEON), the build's only variant";
  return `none: k3 has no kernels for ${machineArch}`;
}
