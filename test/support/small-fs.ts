/**
 * Real filesystem failures for tests: a shell script runs in a private mount namespace
 * (`unshare`) with a small or read-only tmpfs mounted on a test directory, so ENOSPC and EROFS
 * come from the kernel, not from an injection. The mount exists only inside the namespace and
 * vanishes with it, so nothing is left mounted whatever happens; files on it vanish too, so the
 * script itself reports what it needs (`ls`, exit codes).
 */
import { executablePath } from "../../tools/build.ts";
import type { K3Result } from "./k3.ts";
import { tempDir } from "./tmp.ts";

/** Root needs only a mount namespace; anyone else also maps themselves to root in a user namespace. */
const unshare = ["unshare", "--mount", ...(process.getuid?.() === 0 ? [] : ["--map-root-user"])];

function shell(script: string, env: Record<string, string> = {}): K3Result {
  try {
    const r = Bun.spawnSync([...unshare, "sh", "-c", `set -u\n${script}`], {
      env: { ...process.env, K3: executablePath, ...env } as Record<string, string>,
      stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: 120_000,
    });
    return { code: r.exitCode ?? -1, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
  } catch (error) {
    return { code: -1, stdout: "", stderr: `${(error as Error).message}\n` }; // no unshare here
  }
}

let probed: string | undefined | null = null;

/** Undefined when private tmpfs mounts work here, else why not (the tests then say they skipped). */
export function smallFsUnavailable(): string | undefined {
  if (probed === null) {
    const dir = tempDir("probe-mount");
    const r = shell(`mount -t tmpfs -o size=4k tmpfs '${dir}'`);
    probed = r.code === 0 ? undefined : `cannot mount a private tmpfs here (${r.stderr.trim() || `exit ${r.code}`})`;
    if (probed) process.stderr.write(`small-fs tests skipped: ${probed}\n`);
  }
  return probed;
}

/**
 * Runs `script` (sh) with a tmpfs of `sizeBytes` (rounded up to pages by the kernel) mounted at
 * `$MNT`, read-only when asked; `$K3` is dist/k3. Returns the script's exit code and output.
 */
export function withSmallFs(sizeBytes: number, script: string, options: { readOnly?: boolean; env?: Record<string, string> } = {}): K3Result {
  const mnt = tempDir("small-fs");
  const flags = [`size=${sizeBytes}`, ...(options.readOnly ? ["ro"] : [])].join(",");
  return shell(`mount -t tmpfs -o ${flags} tmpfs "$MNT" || exit 99\n${script}`, { MNT: mnt, ...options.env });
}
