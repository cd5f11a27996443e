/**
 * The kernel variants (zig/isa/dispatch.zig): which ones this library and CPU can run, and the
 * one choice made when the library loads: K3_ISA if set, else the widest runnable variant.
 * Every variant gives the same bits (model.md §8.3), so the choice changes speed only.
 */
import { envValue, type Environment } from "../env.ts";
import { runtimeError, usageError } from "../errors.ts";
import { IsaCode, IsaSupport, Status, VectorPortsCode, type Native } from "./abi.ts";

export type IsaName = keyof typeof IsaCode;

export const isaNames = Object.keys(IsaCode) as IsaName[];

/** What each variant is, for --version and the run report. */
export const isaDescription: Record<IsaName, string> = {
  scalar: "scalar reference, plain loops",
  v3: "x86-64-v3: AVX2 + FMA",
  v4: "x86-64-v4: AVX-512",
  neon: "aarch64: NEON",
};

/** The instructions a CPU needs for each variant, as the refusal names them. */
const cpuNeeds: Record<IsaName, string> = {
  scalar: "nothing",
  v3: "x86-64-v3 (AVX2, FMA, BMI1, BMI2, F16C, LZCNT, MOVBE)",
  v4: "x86-64-v4 (AVX-512 F, BW, CD, DQ, VL)",
  neon: "aarch64 with NEON",
};

/** The widest first: what the library picks by itself (as zig/isa/dispatch.zig `widest`). */
const preference: readonly IsaName[] = ["v4", "v3", "neon", "scalar"];

function parseIsa(raw: string, variable: string): IsaName {
  const name = raw.trim();
  if (!(isaNames as readonly string[]).includes(name)) {
    throw usageError(`${variable} must be one of ${isaNames.join(", ")} (got '${raw.slice(0, 40)}')`);
  }
  return name as IsaName;
}

/** The variant K3_ISA forces, or undefined when it is not set. A value that names none is a usage error. */
export function requestedIsa(env?: Environment): IsaName | undefined {
  const raw = envValue("K3_ISA", env);
  return raw === undefined ? undefined : parseIsa(raw, "K3_ISA");
}

/** Variants a test makes k3 treat as missing from the CPU (K3_INJECT_MISSING_ISA=v4[,...]). */
function injectedMissing(env?: Environment): Set<IsaName> {
  const raw = envValue("K3_INJECT_MISSING_ISA", env);
  return new Set(raw === undefined ? [] : raw.split(",").map((part) => parseIsa(part, "K3_INJECT_MISSING_ISA")));
}

export type IsaSupportName = "absent" | "cpu-lacks" | "runnable";

export function isaSupport(lib: Native, name: IsaName, env?: Environment): IsaSupportName {
  const support = lib.k3_isa_support(IsaCode[name]);
  if (support === IsaSupport.absent) return "absent";
  if (support === IsaSupport.cpuLacks || injectedMissing(env).has(name)) return "cpu-lacks";
  return "runnable";
}

/** The variants this library has and this CPU runs, in code order. */
export function runnableIsas(lib: Native, env?: Environment): IsaName[] {
  return isaNames.filter((name) => isaSupport(lib, name, env) === "runnable");
}

export type VectorPortsName = keyof typeof VectorPortsCode;

/** What the run report says of each setting of zig/pool.zig `VectorPorts`. */
export const vectorPortsDescription: Record<VectorPortsName, string> = {
  besideFma: "vector shuffles and conversions beside the multiply-adds",
  onFmaPorts: "vector shuffles and conversions on the multiply-add ports",
};

/** Where the kernels take this CPU's vector shuffles, blends and conversions to issue (set from the CPU when the library loads). */
export function currentVectorPorts(lib: Native): VectorPortsName {
  const code = lib.k3_vector_ports_current();
  const name = (Object.keys(VectorPortsCode) as VectorPortsName[]).find((n) => VectorPortsCode[n] === code);
  if (!name) throw new Error(`libk3 reports vector ports ${code}, which this binding does not know`);
  return name;
}

export function currentIsa(lib: Native): IsaName {
  const code = lib.k3_isa_current();
  const name = isaNames.find((n) => IsaCode[n] === code);
  if (!name) throw new Error(`libk3 reports kernel variant ${code}, which this binding does not know`);
  return name;
}

/** Switches the kernels to `name`; refuses (exit 1, one line) a variant this library or CPU lacks. */
export function selectIsa(lib: Native, name: IsaName, why: string, env?: Environment): void {
  const support = isaSupport(lib, name, env);
  if (support !== "runnable") {
    const here = runnableIsas(lib, env).join(", ");
    throw runtimeError(
      support === "absent"
        ? `${why}: this build of libk3 has no ${name} kernels; it has ${here}`
        : `${why}: this CPU lacks ${cpuNeeds[name]}; it runs ${here}`,
    );
  }
  const status = lib.k3_isa_select(IsaCode[name]);
  if (status !== Status.ok) throw new Error(`k3_isa_select(${name}): status ${status}`);
}

/** The choice made when the library loads: K3_ISA, else the widest runnable variant. */
export function selectIsaAtLoad(lib: Native, env?: Environment): IsaName {
  const forced = requestedIsa(env);
  const name = forced ?? preference.find((n) => isaSupport(lib, n, env) === "runnable") ?? "scalar";
  selectIsa(lib, name, forced ? `K3_ISA=${name}` : "kernel variant", env);
  return name;
}
