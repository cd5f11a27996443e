import { describe, expect, test } from "bun:test";
import { parseRunArgs } from "../../src/cli/run.ts";
import { missingCpuFlags } from "../../src/native/cpu.ts";

describe("run options", () => {
  test("options apply in argv order: a later value wins", () => {
    expect(parseRunArgs(["m", "--ids", "1", "--gen", "3", "--gen", "5"]).gen).toBe(5);
    expect(parseRunArgs(["m", "--gen=7", "--ids", "1,2", "--ids", "4 5,6"]).ids).toEqual([4, 5, 6]);
  });

  test("defaults and the position ceiling", () => {
    expect(parseRunArgs(["m", "--ids", "1"]).gen).toBe(8);
    const long = Array.from({ length: 32_768 }, () => "1").join(",");
    expect(() => parseRunArgs(["m", "--ids", long, "--gen", "4096"])).toThrow("exceeds the 36864-position ceiling");
    expect(() => parseRunArgs(["m", "--ids", `${long},1`])).toThrow("the prompt has 32769 ids; the ceiling is 32768");
  });
});

describe("CPU check", () => {
  test("names the missing x86-64-v3 features", () => {
    expect(missingCpuFlags("flags\t\t: fpu sse2 avx avx2 fma bmi2\n")).toEqual([]);
    expect(missingCpuFlags("flags\t\t: fpu sse2 avx fma\n")).toEqual(["avx2"]);
    expect(missingCpuFlags("processor: 0\n")).toEqual(["avx2", "fma"]);
  });
});
