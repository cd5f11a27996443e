/** Temporary directories for tests, removed when the test process exits. */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const made: string[] = [];
process.on("exit", () => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

export function tempDir(label: string, parent = tmpdir()): string {
  const dir = mkdtempSync(join(parent, `k3-${label}-`));
  made.push(dir);
  return dir;
}
