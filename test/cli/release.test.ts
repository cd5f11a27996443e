/**
 * The release binaries (tools/release.ts): the Linux arm64 build, run under qemu-user on the
 * fixture models, gives exactly the ids of the x64 build and of the reference; so does the
 * x64 release binary, which is built apart from dist/k3. The arm64 test skips, saying so, when
 * qemu-user or the arm64 C library is not installed (.ci/run installs both).
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { buildEnv, root } from "../../tools/build.ts";
import { releasePath, releaseTargets } from "../../tools/release.ts";
import { expectation, modelDir, oracleModels } from "../support/fixtures.ts";
import { k3 } from "../support/k3.ts";

const sysroot = "/usr/aarch64-linux-gnu";
const qemu = ["qemu-aarch64-static", "qemu-aarch64"].map((name) => Bun.which(name)).find((path) => path !== null) ?? undefined;
const qemuMissing = qemu === undefined
  ? "qemu-aarch64(-static) is not installed"
  : !existsSync(join(sysroot, "lib/ld-linux-aarch64.so.1")) ? `${sysroot} (the arm64 C library) is not installed` : undefined;

/** The target's binary, built (in a process of its own, as `bun run release` does) when stale. */
function ensureRelease(id: string): string {
  const result = Bun.spawnSync([process.execPath, "tools/release.ts", "--only", id], { cwd: root, env: buildEnv(), stdout: "pipe", stderr: "pipe" });
  if (result.exitCode !== 0) throw new Error(`release build of ${id} failed:\n${result.stderr.toString()}`);
  return releasePath(releaseTargets.find((t) => t.id === id)!);
}

function ids(binary: string[], model: string, prompt: number[]): number[] {
  const run = Bun.spawnSync([...binary, modelDir(model), "--ids", prompt.join(","), "--gen", "8", "--out", "-"], { stdout: "pipe", stderr: "pipe" });
  if (run.exitCode !== 0) throw new Error(`${binary.join(" ")} exited ${run.exitCode}:\n${run.stderr.toString()}`);
  return JSON.parse(run.stdout.toString()).generated_ids as number[];
}

describe("release binaries", () => {
  test("k3-linux-x64 gives the ids of dist/k3 and of the reference", () => {
    const binary = ensureRelease("linux-x64");
    for (const model of oracleModels) {
      const want = expectation(model);
      const got = ids([binary], model, want.prompt_ids);
      expect(got).toEqual(want.generated_ids.slice(0, 8));
      expect(got).toEqual(JSON.parse(k3([modelDir(model), "--ids", want.prompt_ids.join(","), "--gen", "8", "--out", "-"]).stdout).generated_ids);
    }
  }, 300_000);

  if (qemuMissing) {
    test.skip(`k3-linux-arm64 under qemu-user: SKIPPED because ${qemuMissing} (apt-get install qemu-user-static libc6-arm64-cross)`, () => {});
    process.stderr.write(`release.test.ts: the arm64 test is skipped: ${qemuMissing}\n`);
  } else {
    // One model: emulated, a run takes seconds (tiny13's experts exercise the MXFP4 lookup,
    // the one kernel whose source differs between x86-64 and AArch64).
    test("k3-linux-arm64 under qemu-user gives the ids of the x64 build on a fixture model", () => {
      const binary = ensureRelease("linux-arm64");
      const want = expectation("tiny13");
      const x64 = JSON.parse(k3([modelDir("tiny13"), "--ids", want.prompt_ids.join(","), "--gen", "8", "--out", "-"]).stdout).generated_ids;
      expect(ids([qemu as string, "-L", sysroot, binary], "tiny13", want.prompt_ids)).toEqual(x64);
      expect(x64).toEqual(want.generated_ids.slice(0, 8));
    }, 300_000);
  }
});
