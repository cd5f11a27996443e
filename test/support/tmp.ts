/**
 * Temporary directories for tests, under one root per test process and parent directory
 * (`k3-tests-<pid>-…` in `defaultParent`, `k3-tests-<pid>` under a parent a test names, such
 * as /var/tmp). `bun test` runs no exit handlers, so the preload removes this process's
 * roots in a global `afterAll` (which bun runs once, after the last test file), and at start
 * the roots of earlier test processes that are gone (a run killed before its `afterAll`).
 */
import { accessSync, constants, copyFileSync, existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, dirname, join } from "node:path";

export const testRootPrefix = "k3-tests-";
/**
 * Where `tempDir(label)` makes its directories: tmpfs (/dev/shm) when there is one, else the
 * system temporary directory. The models the tests write and read (checkpoints, packed trunks,
 * state files) then cost no device reads: on this machine's virtual disk the O_DIRECT reads of
 * a chunked-prefill run took 1.6x as long as from tmpfs. The reader takes the same path on both
 * (tmpfs accepts O_DIRECT, and the reader widens and aligns every read itself); the tests of the
 * device path name their parent (test/unit/native/file-direct-read.test.ts: /var/tmp).
 */
export const defaultParent = writable("/dev/shm") ? "/dev/shm" : tmpdir();

function writable(dir: string): boolean {
  try {
    accessSync(dir, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
let root: string | undefined;
/** Roots made under other parents (`tempDir(label, parent)`), removed with the main one. */
const otherRoots = new Set<string>();

/** EPERM means the process exists but is another user's: alive. */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Removes this user's temporary roots of test processes that no longer run; others' are theirs. */
export function removeStaleTestRoots(parent = tmpdir()): void {
  const uid = process.getuid?.();
  for (const name of readdirSync(parent)) {
    const pid = Number(name.slice(testRootPrefix.length).split("-")[0]);
    if (!name.startsWith(testRootPrefix) || !Number.isInteger(pid) || pid === process.pid || processAlive(pid)) continue;
    const path = join(parent, name);
    if (uid !== undefined && statSync(path, { throwIfNoEntry: false })?.uid !== uid) continue;
    rmSync(path, { recursive: true, force: true });
  }
}

/** Removes every temporary root this process made; the preload calls it after the last test. */
export function removeOwnTestRoots(): void {
  for (const dir of [root, ...otherRoots]) if (dir) rmSync(dir, { recursive: true, force: true });
  root = undefined;
  otherRoots.clear();
}

export function tempDir(label: string, parent?: string): string {
  if (parent !== undefined) {
    // Another filesystem was asked for (e.g. tmpfs): a root there too.
    const base = join(parent, `${testRootPrefix}${process.pid}`);
    if (!existsSync(base)) mkdirSync(base, { recursive: true });
    otherRoots.add(base);
    return mkdtempSync(join(base, `${label}-`));
  }
  root ??= mkdtempSync(join(defaultParent, `${testRootPrefix}${process.pid}-`));
  return mkdtempSync(join(root, `${label}-`));
}

/**
 * `binary` alone in an empty directory, for runs that must not find anything of the repository
 * beside the executable: a hard link made in a directory on the binary's own filesystem (a copy
 * where no link can be made), so that each such run neither copies 129 MB nor keeps them in a
 * tmpfs until the suite ends.
 */
export function aloneCopy(binary: string): { cwd: string; binary: string } {
  const cwd = tempDir("alone", sameFilesystemParent(binary));
  const alone = join(cwd, basename(binary));
  try {
    linkSync(binary, alone);
  } catch {
    copyFileSync(binary, alone);
  }
  return { cwd, binary: alone };
}

/** The system temporary directory when it is on `path`'s filesystem, else `path`'s own directory. */
function sameFilesystemParent(path: string): string {
  return statSync(tmpdir()).dev === statSync(path).dev ? tmpdir() : dirname(path);
}
