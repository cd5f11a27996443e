/**
 * Temporary directories for tests, under one root per test process. `bun test` does not run
 * exit handlers, so the preload removes the roots of processes that are gone.
 */
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const rootPrefix = "k3-tests-";
let root: string | undefined;

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Removes the temporary roots of test processes that no longer run. */
export function removeStaleTestRoots(parent = tmpdir()): void {
  for (const name of readdirSync(parent)) {
    const pid = Number(name.slice(rootPrefix.length).split("-")[0]);
    if (name.startsWith(rootPrefix) && Number.isInteger(pid) && pid !== process.pid && !processAlive(pid)) {
      rmSync(join(parent, name), { recursive: true, force: true });
    }
  }
}

export function tempDir(label: string, parent?: string): string {
  if (parent !== undefined) {
    // Another filesystem was asked for (e.g. tmpfs): a root there too.
    const base = join(parent, `${rootPrefix}${process.pid}`);
    if (!existsSync(base)) mkdirSync(base, { recursive: true });
    return mkdtempSync(join(base, `${label}-`));
  }
  root ??= mkdtempSync(join(tmpdir(), `${rootPrefix}${process.pid}-`));
  return mkdtempSync(join(root, `${label}-`));
}
