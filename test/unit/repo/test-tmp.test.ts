/**
 * `bun test` leaves nothing behind in the temporary directories (issue 15): a nested `bun test`
 * of a probe file that makes directories in every parent the tests use, then a look at those
 * parents once it has exited.
 */
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { tempDir, testRootPrefix } from "../../support/tmp.ts";

const repoRoot = resolve(import.meta.dir, "../../..");
const parents = ["/var/tmp", "/dev/shm"].filter((p) => existsSync(p));

test("a bun test run removes every temporary directory it made, in every parent, when it ends", () => {
  const dir = tempDir("tmp-probe");
  const probe = join(dir, "probe.test.ts");
  const report = join(dir, "made.json");
  writeFileSync(probe, `
import { test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from ${JSON.stringify(resolve(import.meta.dir, "../../support/tmp.ts"))};
test("makes temporary directories", () => {
  const made = [tempDir("probe"), ...${JSON.stringify(parents)}.map((parent) => tempDir("probe", parent))];
  for (const d of made) writeFileSync(join(d, "data"), "x");
  writeFileSync(${JSON.stringify(report)}, JSON.stringify({ pid: process.pid, made }));
});
`);
  // The repository's bunfig.toml (and so test/preload.ts) applies: the run starts in its root.
  const r = Bun.spawnSync([process.execPath, "test", probe], { cwd: repoRoot, stdout: "pipe", stderr: "pipe", timeout: 120_000 });
  expect(r.stderr.toString()).toContain("1 pass");
  expect(r.exitCode).toBe(0);
  const { pid, made } = JSON.parse(readFileSync(report, "utf8")) as { pid: number; made: string[] };
  expect(pid).not.toBe(process.pid);
  expect(made).toHaveLength(1 + parents.length);
  for (const d of made) expect(existsSync(d)).toBe(false);
  for (const parent of [tmpdir(), ...parents]) {
    expect(readdirSync(parent).filter((name) => name.startsWith(`${testRootPrefix}${pid}`))).toEqual([]);
  }
});
