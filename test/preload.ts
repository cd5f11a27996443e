// Runs before the tests: a fresh clone gets libk3 and dist/k3 built here, and temporary
// directories of earlier test runs are removed.
import { existsSync } from "node:fs";
import { ensureBuilt } from "../tools/build.ts";
import { removeStaleTestRoots } from "./support/tmp.ts";

ensureBuilt();
removeStaleTestRoots();
for (const parent of ["/var/tmp", "/dev/shm"]) if (existsSync(parent)) removeStaleTestRoots(parent);
