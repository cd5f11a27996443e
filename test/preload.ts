// Runs before the tests: a fresh clone gets libk3 and dist/k3 built here, temporary directories
// of earlier test runs that were killed are removed, and this run's are removed when it ends.
import { afterAll } from "bun:test";
import { existsSync } from "node:fs";
import { ensureBuilt } from "../tools/build.ts";
import { removeOwnTestRoots, removeStaleTestRoots } from "./support/tmp.ts";

ensureBuilt();
removeStaleTestRoots();
for (const parent of ["/var/tmp", "/dev/shm"]) if (existsSync(parent)) removeStaleTestRoots(parent);
// In the preload, afterAll is global: bun runs it once, after every test file has finished.
afterAll(removeOwnTestRoots);
