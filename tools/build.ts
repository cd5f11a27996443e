/**
 * `bun run build`: compiles libk3 (Zig, ReleaseFast; the x86-64-v3 baseline with the AVX-512
 * variant linked in) and, at the same time in a second Zig process, libk3-safe (the same library
 * with Zig's safety checks, which the unit tests load); then the self-contained `dist/k3` with
 * libk3 embedded. `ensureBuilt()` rebuilds only what is missing or older than its sources; the
 * test preload calls it so `bun test` also works on a fresh clone without `bun run build`.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

export const root = resolve(import.meta.dir, "..");
export const libraryPath = join(root, "zig-out/lib/libk3.so");
export const safeLibraryPath = join(root, "zig-out/lib/libk3-safe.so");
export const executablePath = join(root, "dist/k3");

/** Toolchain pins from toolchain.env, the one place they are set. */
export function toolchain(): { zig: string; bun: string } {
  const text = readFileSync(join(root, "toolchain.env"), "utf8");
  const pin = (key: string) => {
    const match = text.match(new RegExp(`^${key}=(\\S+)$`, "m"));
    if (!match?.[1]) throw new Error(`toolchain.env: ${key} is not set`);
    return match[1];
  };
  return { zig: pin("ZIG_VERSION"), bun: pin("BUN_VERSION") };
}

export function newestMtime(paths: string[]): number {
  let newest = 0;
  const visit = (path: string) => {
    if (!existsSync(path)) return;
    const stat = statSync(path);
    if (stat.isDirectory()) for (const entry of readdirSync(path)) visit(join(path, entry));
    else newest = Math.max(newest, stat.mtimeMs);
  };
  for (const path of paths) visit(join(root, path));
  return newest;
}

export function mtime(path: string): number {
  return existsSync(path) ? statSync(path).mtimeMs : -1;
}

/**
 * The environment builds run in: without NODE_ENV, which `bun build` inlines into the bundle.
 * `bun test` sets NODE_ENV=test, and an executable built under it (by the test preload) would
 * log differently from one built by `bun run build` (consola picks its reporter from it).
 */
export function buildEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined && key !== "NODE_ENV") env[key] = value;
  return env;
}

function run(command: string[], what: string): void {
  const started = performance.now();
  const result = Bun.spawnSync(command, { cwd: root, env: buildEnv(), stdout: "inherit", stderr: "inherit" });
  if (result.exitCode !== 0) throw new Error(`${what} failed (exit ${result.exitCode}): ${command.join(" ")}`);
  process.stderr.write(`build: ${what} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}

/** `run` without blocking, so two builds can share the machine's cores. */
async function runConcurrently(command: string[], what: string): Promise<void> {
  const started = performance.now();
  const child = Bun.spawn(command, { cwd: root, env: buildEnv(), stdout: "inherit", stderr: "inherit" });
  const code = await child.exited;
  if (code !== 0) throw new Error(`${what} failed (exit ${code}): ${command.join(" ")}`);
  process.stderr.write(`build: ${what} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}

/** The pinned Zig: the one tools/setup.sh put in .toolchain/, else `python3 -m ziglang` on PATH. */
export function zigCommand(): string[] {
  const want = toolchain().zig;
  const candidates = [[join(root, ".toolchain/bin/zig")], ["python3", "-m", "ziglang"]];
  const seen: string[] = [];
  for (const command of candidates) {
    if (command.length === 1 && !existsSync(command[0] as string)) continue;
    const probe = Bun.spawnSync([...command, "version"], { stderr: "pipe" });
    if (probe.exitCode !== 0) continue;
    const have = probe.stdout.toString().trim();
    if (have === want) return command;
    seen.push(`${command.join(" ")} is ${have}`);
  }
  const found = seen.length > 0 ? ` (${seen.join("; ")})` : "";
  throw new Error(`Zig ${want} is not installed${found}: run 'bash tools/setup.sh'`);
}

const libraryBuild = (): [string[], string] => [[...zigCommand(), "build", "-Doptimize=ReleaseFast"], "libk3 (zig build -Doptimize=ReleaseFast)"];
const safeLibraryBuild = (): [string[], string] => [[...zigCommand(), "build", "-Dsafe=true"], "libk3-safe (zig build -Dsafe=true)"];

export function buildLibrary(): void {
  run(...libraryBuild());
}

/** libk3-safe: ReleaseSafe, for the unit tests (never shipped). */
export function buildSafeLibrary(): void {
  run(...safeLibraryBuild());
}

/**
 * How the executable's JavaScript is compiled (tools/release.ts builds its targets the same way):
 * as JSC bytecode, so a run does not parse the bundle first. Measured on tiny13 with
 * /usr/bin/time: `k3 --version` 0.032 -> 0.010 s of processor time, a 2-id run 0.108 -> 0.074 s
 * (the executable 2.8 MB larger). Bytecode needs the ESM output format for main.ts's top-level await.
 */
export const executableCompileFlags = ["--bytecode", "--format=esm"] as const;

export function buildExecutable(): void {
  run([process.execPath, "build", "--compile", ...executableCompileFlags, "src/main.ts", "--outfile", "dist/k3"], "dist/k3 (bun build --compile)");
}

export const librarySources = ["build.zig", "zig", "toolchain.env"];
export const executableSources = ["src", "assets", "presets", "package.json", "bun.lock", "zig-out/lib/libk3.so"];

export function libraryStale(): boolean {
  return mtime(libraryPath) < newestMtime(librarySources);
}

export function safeLibraryStale(): boolean {
  return mtime(safeLibraryPath) < newestMtime(librarySources);
}

export function executableStale(): boolean {
  return mtime(executablePath) < newestMtime(executableSources);
}

/** Builds whatever is missing or older than its sources. */
export function ensureBuilt(): void {
  if (libraryStale()) buildLibrary();
  if (safeLibraryStale()) buildSafeLibrary();
  if (executableStale()) buildExecutable();
}

if (import.meta.main) {
  const started = performance.now();
  // Both libraries at once (two Zig processes; each install writes its own file in zig-out/lib):
  // the tests' safe library is built here, with the rest, not inside the first `bun test`.
  await Promise.all([runConcurrently(...libraryBuild()), runConcurrently(...safeLibraryBuild())]);
  buildExecutable();
  const bytes = statSync(executablePath).size;
  process.stderr.write(`build: dist/k3 is ${(bytes / 1e6).toFixed(1)} MB; total ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
