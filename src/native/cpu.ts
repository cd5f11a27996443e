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

/**
 * Why libk3 cannot run here, or undefined when it can: on `machineArch` (node's `arch()`) with
 * /proc/cpuinfo's text (undefined when there is none; dlopen then fails loudly on a bad CPU).
 * One line without the `k3:` prefix, which the CLI adds to every message.
 */
export function cpuRefusal(machineArch: string, cpuinfo: string | undefined): string | undefined {
  // The arm64 builds target the AArch64 baseline, whose SIMD (NEON) every such CPU has.
  if (machineArch === "arm64") return undefined;
  if (machineArch !== "x64") return `this build is for x86-64 (AVX2 + FMA, x86-64-v3) or arm64; this machine is ${machineArch}`;
  if (cpuinfo === undefined) return undefined;
  const missing = missingCpuFlags(cpuinfo);
  if (missing.length === 0) return undefined;
  return `this build needs an x86-64 CPU with ${requiredCpuFlags.map((f) => f.toUpperCase()).join(" and ")} (x86-64-v3); this CPU lacks ${missing.join(", ").toUpperCase()}`;
}
