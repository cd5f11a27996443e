/**
 * The directory a pack or a quantisation writes its trunk into: what is already there decides
 * whether the work is done, refused, or replaced (--force), and an interrupted run's temporary
 * files are cleared before a new one starts.
 */
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ExitCode, K3Error } from "../errors.ts";
import { errnoReason } from "../fs.ts";
import { readTrunkManifest, trunkBinName, trunkJsonName, type TrunkManifest } from "../weights/trunk-file.ts";

/**
 * The trunk already in `outDir` when `matches` says it is the one this run would write (the
 * caller then has nothing to do); undefined when the directory holds none, or holds another
 * and `force` allows replacing it. Another trunk, or a damaged one, without `force` is refused.
 */
export function priorTrunk(outDir: string, matches: (existing: TrunkManifest) => boolean, force: boolean, what: string): TrunkManifest | undefined {
  if (!existsSync(join(outDir, trunkJsonName)) && !existsSync(join(outDir, trunkBinName))) return undefined;
  let existing: TrunkManifest | undefined;
  try {
    existing = readTrunkManifest(outDir);
  } catch {
    existing = undefined; // a damaged trunk is a different one: replaced with --force
  }
  if (existing && matches(existing)) return existing;
  if (!force) throw new K3Error(ExitCode.runtime, `${outDir} already holds a different or incomplete ${what}; pass --force to replace it`);
  return undefined;
}

/** Creates `outDir` if needed and removes the temporary files an interrupted run left in it. */
export function prepareTrunkDir(outDir: string): void {
  try {
    mkdirSync(outDir, { recursive: true });
    removeStaleTemporaries(outDir);
  } catch (error) {
    throw new K3Error(ExitCode.runtime, `${outDir}: cannot create the trunk directory: ${errnoReason(error)}`);
  }
}

/** Temporary files an interrupted pack left behind; they never look like a pack. */
export function removeStaleTemporaries(dir: string): void {
  if (!existsSync(dir)) return;
  for (const name of readdirSync(dir)) {
    if (/^trunk\.(bin|json)\.\d+\.tmp$/.test(name)) rmSync(join(dir, name), { force: true });
  }
}
