// Runs before the tests: libk3, libk3-safe and dist/k3 are built here when missing or older than
// their sources (`bun run build` builds all three, so after it nothing is left to do), temporary
// directories of earlier test runs that were killed are removed, and this run's are removed when
// it ends. The tests' own process loads libk3-safe (K3_SAFE_NATIVE=1): every kernel the unit
// tests call runs with Zig's safety checks, so a broken invariant fails the run instead of
// corrupting memory. dist/k3, which the CLI tests spawn, ignores the variable and runs the
// ReleaseFast library it embeds.
import { afterAll } from "bun:test";
import { existsSync } from "node:fs";
import { ensureBuilt } from "../tools/build.ts";
import { startDemoRuns } from "./support/demo-runs.ts";
import { startTimeoutProbes } from "./support/timeout-probes.ts";
import { inThisRun, settled } from "./support/early.ts";
import { oracleModels } from "./support/fixtures.ts";
import { startOracleRuns } from "./support/oracle-runs.ts";
import { qemuMissing, startArm64Run, startX64Runs } from "./support/release-runs.ts";
import { removeOwnTestRoots, removeStaleTestRoots } from "./support/tmp.ts";

ensureBuilt();
process.env.K3_SAFE_NATIVE = "1";
// One compute thread for this process and, through the environment, the dist/k3 runs and servers
// it starts, unless K3_THREADS is set already (`K3_THREADS=2 bun test` runs it all threaded). The
// test models are so small that a second thread's spin-wait costs more than its share of the work
// (a --recompute run of tiny13 takes 2-4x as long on two threads here), and tests that run
// processes side by side would each spin against the other. Results are the same bits at every
// thread count; the tests of that name their counts: test/unit/native/kernels*.test.ts (1-3 threads per
// kernel), the oracle gate (1-3 threads through dist/k3), test/cli/sampling.test.ts (2 threads).
process.env.K3_THREADS ??= "1";
removeStaleTestRoots();
for (const parent of ["/var/tmp", "/dev/shm"]) if (existsSync(parent)) removeStaleTestRoots(parent);
// The long child-process work of files later in the run starts now, on the core the first files
// leave idle, one process at a time in the order the files come; each file awaits the same work
// (support/early.ts).
if (inThisRun("test/gates/oracle.test.ts")) for (const model of oracleModels) void startOracleRuns(model);
if (inThisRun("test/gates/demo.test.ts")) void startDemoRuns();
// Mostly waiting (the server timeouts), so not in turn with the work above.
if (inThisRun("test/cli/serve-safety.test.ts")) void startTimeoutProbes();
if (inThisRun("test/cli/release.test.ts")) {
  void startX64Runs();
  if (!qemuMissing) void startArm64Run();
}
// In the preload, afterAll is global: bun runs it once, after every test file has finished.
afterAll(async () => {
  await settled();
  removeOwnTestRoots();
}, 600_000);
