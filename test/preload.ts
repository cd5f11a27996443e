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
import { removeOwnTestRoots, removeStaleTestRoots } from "./support/tmp.ts";

ensureBuilt();
process.env.K3_SAFE_NATIVE = "1";
removeStaleTestRoots();
for (const parent of ["/var/tmp", "/dev/shm"]) if (existsSync(parent)) removeStaleTestRoots(parent);
// In the preload, afterAll is global: bun runs it once, after every test file has finished.
afterAll(removeOwnTestRoots);
