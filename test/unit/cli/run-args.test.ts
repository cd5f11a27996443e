import { describe, expect, test } from "bun:test";
import { parseRunArgs } from "../../../src/cli/run.ts";
import { cpuRefusal, missingCpuFlags } from "../../../src/native/cpu.ts";

describe("run options", () => {
  test("options apply in argv order: a later value wins", () => {
    expect(parseRunArgs(["m", "--ids", "1", "--gen", "3", "--gen", "5"]).gen).toBe(5);
    expect(parseRunArgs(["m", "--gen=7", "--ids", "1,2", "--ids", "4 5,6"]).ids).toEqual([4, 5, 6]);
  });

  test("defaults; no build-constant position ceiling before the config (the context length and the plan decide)", () => {
    expect(parseRunArgs(["m", "--ids", "1"]).gen).toBe(8);
    // Past the former 32,768-id / 36,864-position constants: checked at open, against the config.
    const long = Array.from({ length: 40_000 }, () => "1").join(",");
    expect(parseRunArgs(["m", "--ids", long, "--gen", "4096"]).ids.length).toBe(40_000);
    expect(() => parseRunArgs(["m", "--ids", "1", "--gen", "4097"])).toThrow(/--gen must be from 0 to 4096/);
  });
});

describe("CPU check", () => {
  test("names the missing x86-64-v3 features", () => {
    expect(missingCpuFlags("flags\t\t: fpu sse2 avx avx2 fma bmi2\n")).toEqual([]);
    expect(missingCpuFlags("flags\t\t: fpu sse2 avx fma\n")).toEqual(["avx2"]);
    expect(missingCpuFlags("processor: 0\n")).toEqual(["avx2", "fma"]);
  });

  test("the refusal is one line without the k3: prefix the CLI adds (no `k3: k3:`)", () => {
    expect(cpuRefusal("x64", "flags\t\t: fpu avx2 fma\n")).toBeUndefined();
    expect(cpuRefusal("arm64", undefined)).toBeUndefined();
    expect(cpuRefusal("x64", undefined)).toBeUndefined();
    expect(cpuRefusal("x64", "flags\t\t: fpu sse2 avx\n")).toBe("this build needs an x86-64 CPU with AVX2 and FMA (x86-64-v3); this CPU lacks AVX2, FMA");
    expect(cpuRefusal("ia32", undefined)).toBe("this build is for x86-64 (AVX2 + FMA, x86-64-v3) or arm64; this machine is ia32");
  });
});
