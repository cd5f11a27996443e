/**
 * Facts about this machine the doctor reports: the CPU (name, cores, the SIMD features that
 * matter to k3's kernels), memory (MemTotal and MemAvailable), free space. Each reader takes
 * its input text as a parameter where one exists, so the parsing is testable on any machine.
 */
import { readFileSync, statfsSync } from "node:fs";
import { arch, availableParallelism, cpus, freemem, platform, totalmem } from "node:os";
import { readMemory, type MemoryFacts } from "../plan/budget.ts";

/** The features worth naming, per architecture: what the kernels use or could use. */
export const notableFeatures: Readonly<Record<string, readonly string[]>> = {
  x64: ["sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16"],
  arm64: ["asimd", "asimddp", "fphp", "asimdhp", "bf16", "i8mm", "sve", "sve2"],
};

/** What this build's kernels cannot run without (libk3 targets x86-64-v3; AArch64 is baseline). */
export const requiredFeatures: Readonly<Record<string, readonly string[]>> = { x64: ["avx2", "fma"], arm64: [] };

export interface CpuFacts {
  arch: string;
  model: string;
  cores: number;
  /** The notable features present, in table order; undefined when /proc/cpuinfo was unreadable. */
  features: string[] | undefined;
  missingRequired: string[];
}

/** The feature flags of /proc/cpuinfo text (`flags` on x86, `Features` on ARM). */
export function cpuFlags(cpuinfo: string): Set<string> {
  const line = cpuinfo.split("\n").find((l) => /^(flags|Features)\s*:/.test(l));
  return new Set((line?.split(":")[1] ?? "").trim().split(/\s+/).filter(Boolean));
}

export function cpuFacts(cpuinfo: string | undefined = readText("/proc/cpuinfo"), machineArch = arch()): CpuFacts {
  const flags = cpuinfo === undefined ? undefined : cpuFlags(cpuinfo);
  const notable = notableFeatures[machineArch] ?? [];
  const required = requiredFeatures[machineArch] ?? [];
  return {
    arch: machineArch,
    model: cpus()[0]?.model?.trim() || "unknown CPU",
    cores: availableParallelism(),
    features: flags ? notable.filter((f) => flags.has(f)) : undefined,
    missingRequired: flags ? required.filter((f) => !flags.has(f)) : [],
  };
}

/** MemAvailable and MemTotal: /proc/meminfo on Linux; elsewhere the OS's free and total memory. */
export function memoryFacts(meminfo: string | undefined = readText("/proc/meminfo")): MemoryFacts & { source: string } {
  const fromProc = meminfo === undefined ? undefined : readMemory(meminfo);
  if (fromProc) return { ...fromProc, source: "/proc/meminfo" };
  return { availableBytes: freemem(), totalBytes: totalmem(), source: `${platform()} free memory` };
}

/** Bytes free to an unprivileged writer at `path`, or undefined. */
export function freeBytes(path: string): number | undefined {
  try {
    const s = statfsSync(path);
    return s.bavail * s.bsize;
  } catch {
    return undefined;
  }
}

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return undefined;
  }
}

/** GiB as the original's doctor prints them: kB / 1024 / 1024, truncated. */
export const gibTruncated = (bytes: number): number => Math.floor(bytes / 1024 / 1024 / 1024);
