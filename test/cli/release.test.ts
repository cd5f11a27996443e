/**
 * The release binaries (tools/release.ts): the Linux arm64 build, run under qemu-user on the
 * fixture models, gives exactly the ids of the x64 build and of the reference; so does the
 * x64 release binary, which is built apart from dist/k3. The arm64 test skips, saying so, when
 * qemu-user or the arm64 C library is not installed (.ci/run installs both). The builds and runs
 * are test/support/release-runs.ts's, started at the beginning of a run that includes this file.
 */
import { describe, expect, test } from "bun:test";
import { expectation, oracleModels } from "../support/fixtures.ts";
import { arm64Run, qemuMissing, x64Runs } from "../support/release-runs.ts";

describe("release binaries", () => {
  test("k3-linux-x64 gives the ids of dist/k3 and of the reference", async () => {
    const runs = await x64Runs();
    expect(runs.map((r) => r.model)).toEqual([...oracleModels]);
    for (const { model, release, dist } of runs) {
      const want = expectation(model);
      expect(release).toEqual(want.generated_ids.slice(0, 8));
      expect(release).toEqual(dist);
    }
  }, 600_000);

  if (qemuMissing) {
    test.skip(`k3-linux-arm64 under qemu-user: SKIPPED because ${qemuMissing} (apt-get install qemu-user-static libc6-arm64-cross)`, () => {});
    process.stderr.write(`release.test.ts: the arm64 test is skipped: ${qemuMissing}\n`);
  } else {
    // One model: emulated, a run takes seconds (tiny13's experts exercise the MXFP4 lookup,
    // the one kernel whose source differs between x86-64 and AArch64).
    test("k3-linux-arm64 under qemu-user gives the ids of the x64 build on a fixture model", async () => {
      const want = expectation("tiny13");
      const { release, dist } = await arm64Run();
      expect(release).toEqual(dist);
      expect(dist).toEqual(want.generated_ids.slice(0, 8));
    }, 600_000);
  }
});
