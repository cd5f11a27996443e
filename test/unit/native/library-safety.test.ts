/**
 * The safety-checked library (issue 15): the unit tests' own process runs libk3-safe (built
 * ReleaseSafe by the test preload: bounds, overflow and the kernels' assertions checked), the
 * shipped library stays ReleaseFast, and a failed check stops the process with a message
 * naming the function instead of going on with corrupted memory.
 */
import { describe, expect, test } from "bun:test";
import { dlopen, FFIType } from "bun:ffi";
import { join } from "node:path";
import { Status } from "../../../src/native/abi.ts";
import { native } from "../../../src/native/library.ts";
import { libraryPath, root } from "../../../tools/build.ts";

describe("libk3-safe", () => {
  test("the unit tests load the safety-checked build", () => {
    expect(process.env.K3_SAFE_NATIVE).toBe("1");
    expect(native().k3_build_safe()).toBe(1);
  });

  test("the shipped library is the fast one and refuses what the probe asserts", () => {
    const shipped = dlopen(libraryPath, {
      k3_build_safe: { args: [], returns: FFIType.u32 },
      k3_safety_probe: { args: [FFIType.u32], returns: FFIType.i32 },
    });
    try {
      expect(shipped.symbols.k3_build_safe()).toBe(0);
      expect(shipped.symbols.k3_safety_probe(7)).toBe(Status.badArgument);
    } finally {
      shipped.close();
    }
  });

  test("a failed assertion in libk3-safe aborts the process, naming the function", () => {
    expect(native().k3_safety_probe(3)).toBe(Status.ok);
    const script = `import { native } from ${JSON.stringify(join(root, "src/native/library.ts"))}; native().k3_safety_probe(4); console.log("went on");`;
    const r = Bun.spawnSync([process.execPath, "-e", script], { env: { ...process.env, K3_SAFE_NATIVE: "1" }, stdout: "pipe", stderr: "pipe" });
    expect(r.exitCode).not.toBe(0);
    expect(r.stdout.toString()).not.toContain("went on");
    expect(r.stderr.toString()).toContain("panic: reached unreachable code");
    expect(r.stderr.toString()).toContain("k3_safety_probe");
  });
});
