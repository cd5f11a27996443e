/**
 * libk3 is compiled for x86-64-v3. On a CPU without AVX2 or FMA its first vector instruction
 * would die with SIGILL, so k3 checks before loading it.
 */
export const requiredCpuFlags = ["avx2", "fma"] as const;

/** Flags from `requiredCpuFlags` that /proc/cpuinfo text does not list. */
export function missingCpuFlags(cpuinfo: string): string[] {
  const line = cpuinfo.split("\n").find((l) => l.startsWith("flags"));
  const present = new Set((line?.split(":")[1] ?? "").trim().split(/\s+/));
  return requiredCpuFlags.filter((flag) => !present.has(flag));
}
