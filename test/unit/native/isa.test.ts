/**
 * Kernel variants (zig/isa/, src/native/isa.ts): the library offers exactly the variants this
 * CPU can run (judged independently from /proc/cpuinfo), picks the widest at load, switches
 * between them, and K3_ISA is parsed and refused as documented; the vector ports (zig/pool.zig
 * `VectorPorts`) follow the CPU's vendor and can be set both ways. Bit identity across the
 * variants is proven per operator in kernels.test.ts and kernels-multirow.test.ts (every path
 * of test/support/kernels.ts `executionPaths`) and end to end in test/gates/oracle.test.ts.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { arch } from "node:os";
import { K3Error } from "../../../src/errors.ts";
import { requestedIsa, runnableIsas, selectIsa, type IsaName } from "../../../src/native/isa.ts";
import { kernelLib, kernelVariant } from "../../../src/native/kernel-runtime.ts";
import { availableIsas, isaInUse, setIsa, setVectorPorts, vectorPortsInUse } from "../../support/kernel-hooks.ts";
import { native } from "../../../src/native/library.ts";
import { Status, VectorPortsCode } from "../../../src/native/abi.ts";

const loaded = isaInUse();
const loadedPorts = vectorPortsInUse();
afterAll(() => {
  setVectorPorts(loadedPorts);
  setIsa(loaded);
});

/** What /proc/cpuinfo says this CPU runs, by the variants' definitions (x86-64 levels). */
function expectedFromCpuinfo(): IsaName[] | undefined {
  if (arch() !== "x64" || !existsSync("/proc/cpuinfo")) return undefined;
  const line = readFileSync("/proc/cpuinfo", "utf8").split("\n").find((l) => l.startsWith("flags")) ?? "";
  const flags = new Set(line.split(":")[1]?.trim().split(/\s+/));
  const has = (...names: string[]) => names.every((n) => flags.has(n));
  const v3 = has("avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "abm", "movbe");
  const v4 = v3 && has("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl");
  return ["scalar", ...(v3 ? ["v3"] : []), ...(v4 ? ["v4"] : [])] as IsaName[];
}

describe("kernel variants", () => {
  test("the library runs exactly the variants /proc/cpuinfo implies, and chose the widest at load", () => {
    const expected = expectedFromCpuinfo();
    if (expected) expect(availableIsas()).toEqual(expected);
    expect(loaded).toBe(availableIsas().at(-1) as IsaName);
    const v = kernelVariant();
    expect(v.runnable).toEqual(availableIsas());
    expect(v.threads).toBeGreaterThanOrEqual(1);
  });

  test("every runnable variant can be selected and is then the one in use", () => {
    for (const isa of availableIsas()) {
      setIsa(isa);
      expect(isaInUse()).toBe(isa);
      expect(kernelVariant().isa).toBe(isa);
    }
    setIsa(loaded);
  });

  test("the vector ports follow the CPU's vendor at load, survive a variant switch, and refuses an unknown code", () => {
    // zig/pool.zig `VectorPorts`: Intel's x86-64 CPUs issue vector shuffles, blends and conversions on the
    // multiply-add ports; every other CPU is planned for as issuing them beside.
    const vendor = existsSync("/proc/cpuinfo") ? /^vendor_id\s*:\s*(\S+)/m.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] : undefined;
    if (arch() === "x64" && vendor) expect(loadedPorts).toBe(vendor === "GenuineIntel" ? "onFmaPorts" : "besideFma");
    for (const name of Object.keys(VectorPortsCode) as (keyof typeof VectorPortsCode)[]) {
      setVectorPorts(name);
      for (const isa of availableIsas()) setIsa(isa);
      expect(vectorPortsInUse()).toBe(name);
    }
    expect(kernelLib().k3_vector_ports_select(2)).toBe(Status.badArgument);
    expect(kernelLib().k3_vector_ports_select(0xffffffff)).toBe(Status.badArgument);
    setVectorPorts(loadedPorts);
    setIsa(loaded);
  });

  test("K3_ISA: unset, each name, and a value naming none (usage error)", () => {
    expect(requestedIsa({})).toBeUndefined();
    expect(requestedIsa({ K3_ISA: "" })).toBeUndefined();
    for (const name of ["scalar", "v3", "v4", "neon"] as const) expect(requestedIsa({ K3_ISA: name })).toBe(name);
    let error: unknown;
    try {
      requestedIsa({ K3_ISA: "avx512" });
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(K3Error);
    expect((error as K3Error).exitCode).toBe(2);
    expect((error as K3Error).message).toBe("K3_ISA must be one of scalar, v3, v4, neon (got 'avx512')");
  });

  test("a variant the CPU lacks (injected) or the build lacks is refused with exit 1 and one line", () => {
    const lib = native();
    const env = { K3_INJECT_MISSING_ISA: "v4" };
    expect(runnableIsas(lib, env)).not.toContain("v4");
    const refusal = (name: IsaName, e: Record<string, string>) => {
      try {
        selectIsa(lib, name, `K3_ISA=${name}`, e);
      } catch (err) {
        return err as K3Error;
      }
      return undefined;
    };
    const lacking = refusal("v4", env);
    expect(lacking?.exitCode).toBe(1);
    expect(lacking?.message).toMatch(/^K3_ISA=v4: this CPU lacks x86-64-v4 \(AVX-512 F, BW, CD, DQ, VL\); it runs scalar(, \w+)*$/);
    const absent = refusal(arch() === "x64" ? "neon" : "v4", {});
    expect(absent?.exitCode).toBe(1);
    expect(absent?.message).toMatch(/this build of libk3 has no (neon|v4) kernels; it has scalar/);
    expect(isaInUse()).toBe(loaded); // a refusal changes nothing
  });
});
