/**
 * Loads libk3 through bun:ffi. The library file is imported as an asset, so
 * `bun build --compile` embeds it in the executable and `dlopen` opens the embedded copy.
 */
import { dlopen } from "bun:ffi";
import { existsSync, readFileSync } from "node:fs";
import { arch } from "node:os";
import libraryPath from "../../zig-out/lib/libk3.so" with { type: "file" };
import { envValue } from "../env.ts";
import { runtimeError } from "../errors.ts";
import { provideUnnamedLinker } from "../fs.ts";
import { linkUnnamed } from "./unnamed-link.ts";
import { cpuRefusal } from "./cpu.ts";
import { abiVersion, symbols, type Native } from "./abi.ts";
import { selectIsaAtLoad } from "./isa.ts";

let loaded: Native | undefined;

function checkCpu(): void {
  let cpuinfo: string | undefined;
  try {
    cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  } catch {
    cpuinfo = undefined;
  }
  const refusal = cpuRefusal(arch(), cpuinfo);
  if (refusal) throw runtimeError(refusal);
}

/** Where `bun build --compile` puts embedded files: the executable carries only the shipped library. */
const embedded = libraryPath.startsWith("/$bunfs/") || libraryPath.includes("/~BUN/");

/**
 * Which library file to open: the ReleaseFast libk3 (embedded, or zig-out from source), or
 * when running from source with K3_SAFE_NATIVE=1, libk3-safe beside it (Zig's safety checks
 * on: a broken invariant stops the process instead of corrupting memory). `bun test` builds it
 * and sets the variable for its own process; the k3 executable ignores the variable, having
 * only the shipped library, so the CLI tests' dist/k3 runs what users run.
 */
function libraryFile(): string {
  if (embedded || envValue("K3_SAFE_NATIVE") !== "1") return libraryPath;
  const safe = libraryPath.replace(/libk3\.so$/, "libk3-safe.so");
  if (safe === libraryPath || !existsSync(safe)) throw runtimeError(`K3_SAFE_NATIVE=1: ${safe} is missing (bun test builds it; or: zig build -Dsafe=true)`);
  return safe;
}

/** The libk3 symbols, loaded on first use; the kernel variant is chosen then (K3_ISA or the CPU). */
export function native(): Native {
  if (loaded) return loaded;
  checkCpu();
  const lib = dlopen(libraryFile(), symbols);
  const version = lib.symbols.k3_abi_version();
  if (version !== abiVersion) {
    throw runtimeError(`libk3 ABI version ${version} does not match the binding (${abiVersion}); rebuild with 'bun run build'`);
  }
  selectIsaAtLoad(lib.symbols);
  provideUnnamedLinker(linkUnnamed);
  loaded = lib.symbols;
  return loaded;
}
