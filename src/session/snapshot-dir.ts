/**
 * The private directory parked snapshots live in: made on first use, with the owning process's
 * pid recorded inside, and removed on every exit the process sees (close, process.exit, a
 * second Ctrl-C that ends the server at once). A process killed outright (SIGKILL, a crash)
 * cannot clean up, so each new conversation first sweeps the directories of this user's k3
 * processes that are gone: by the pid inside, never a live process's, never another user's.
 */
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export const snapshotDirPrefix = "k3-snapshots-";
const ownerFile = "owner.pid";

const live = new Set<string>();
let hooked = false;

/** Removes every directory this process still holds; what exits call. */
function removeLive(): void {
  for (const dir of live) rmSync(dir, { recursive: true, force: true });
  live.clear();
}

/** Makes a private snapshot directory in `parent`, recording this process as its owner. */
export function makeSnapshotDir(parent: string): string {
  if (!hooked) {
    process.once("exit", removeLive);
    hooked = true;
  }
  const dir = mkdtempSync(join(parent, snapshotDirPrefix));
  live.add(dir);
  writeFileSync(join(dir, ownerFile), `${process.pid}\n`);
  return dir;
}

export function removeSnapshotDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  live.delete(dir);
}

/** Whether a process with this pid exists (EPERM: it does, another user's). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as { code?: string }).code === "EPERM";
  }
}

/**
 * Removes the snapshot directories in `parent` left by this user's k3 processes that have
 * ended; returns how many. A directory without a readable owner (being made, or another
 * program's) is left alone, as is anything that is not a directory of ours.
 */
export function sweepSnapshotDirs(parent: string): number {
  let names: string[];
  try {
    names = readdirSync(parent).filter((name) => name.startsWith(snapshotDirPrefix));
  } catch {
    return 0;
  }
  const uid = process.getuid?.();
  let removed = 0;
  for (const name of names) {
    const dir = join(parent, name);
    try {
      const stat = lstatSync(dir);
      if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid)) continue;
      const pid = Number(readFileSync(join(dir, ownerFile), "utf8").trim());
      if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid || alive(pid)) continue;
      rmSync(dir, { recursive: true, force: true });
      removed++;
    } catch {
      // gone meanwhile, or no owner file: not ours to judge
    }
  }
  return removed;
}
