/**
 * Loads libk3 through bun:ffi. The library file is imported as an asset, so
 * `bun build --compile` embeds it in the executable and `dlopen` opens the embedded copy.
 */
import { dlopen, type ConvertFns } from "bun:ffi";
import { readFileSync } from "node:fs";
import { arch } from "node:os";
import libraryPath from "../../zig-out/lib/libk3.so" with { type: "file" };
import { runtimeError } from "../errors.ts";
import { missingCpuFlags, requiredCpuFlags } from "./cpu.ts";
import { abiVersion, symbols } from "./abi.ts";

export type Native = ConvertFns<typeof symbols>;

let loaded: Native | undefined;

function checkCpu(): void {
  // The arm64 builds target the AArch64 baseline, whose SIMD (NEON) every such CPU has.
  if (arch() === "arm64") return;
  if (arch() !== "x64") {
    throw runtimeError(`k3: this build is for x86-64 (AVX2 + FMA, x86-64-v3) or arm64; this machine is ${arch()}`);
  }
  let cpuinfo: string;
  try {
    cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  } catch {
    return; // No /proc: nothing to check against; dlopen will still fail loudly on a bad CPU.
  }
  const missing = missingCpuFlags(cpuinfo);
  if (missing.length > 0) {
    throw runtimeError(
      `k3: this build needs an x86-64 CPU with ${requiredCpuFlags.join(" and ").toUpperCase()} (x86-64-v3); ` +
        `this CPU lacks ${missing.join(", ").toUpperCase()}`,
    );
  }
}

/** The libk3 symbols, loaded on first use. */
export function native(): Native {
  if (loaded) return loaded;
  checkCpu();
  const lib = dlopen(libraryPath, symbols);
  const version = lib.symbols.k3_abi_version();
  if (version !== abiVersion) {
    throw runtimeError(`libk3 ABI version ${version} does not match the binding (${abiVersion}); rebuild with 'bun run build'`);
  }
  loaded = lib.symbols;
  return loaded;
}
