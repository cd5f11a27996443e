/**
 * `bun run release`: the release binaries in dist/release/, one self-contained k3 per platform,
 * plus SHA256SUMS. For each target Zig cross-compiles libk3 (x86-64-v3 for x64; the AArch64
 * baseline for arm64; macOS reads with F_NOCACHE instead of O_DIRECT; Windows, untested, reads
 * buffered) into its own prefix, and
 * `bun build --compile --target` embeds that library in place of the host's: a bundler plugin
 * answers src/native/library.ts's import of zig-out/lib/libk3.so with the target's file. Bun
 * fetches each target's runtime from the npm registry on first use.
 *
 *   bun run release                      every target
 *   bun run release --only linux-arm64   one (tests use this; rebuilt only when stale)
 */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildEnv, executableSources, librarySources, mtime, newestMtime, root, zigCommand } from "./build.ts";

export interface ReleaseTarget {
  /** Short name for --only. */
  id: string;
  /** The file name of the binary in dist/release/. */
  file: string;
  zigArgs: string[];
  /** Where `zig build --prefix` puts the library, relative to the prefix. */
  libraryFile: string;
  bunTarget: string;
  /** Said next to it wherever the release is listed. */
  status: string;
}

export const releaseDir = join(root, "dist/release");

export const releaseTargets: readonly ReleaseTarget[] = [
  {
    id: "linux-x64", file: "k3-linux-x64", zigArgs: ["-Dtarget=x86_64-linux-gnu", "-Dcpu=x86_64_v3"], libraryFile: "lib/libk3.so",
    bunTarget: "bun-linux-x64", status: "tested: same ids as dist/k3 on the fixture models",
  },
  {
    id: "linux-arm64", file: "k3-linux-arm64", zigArgs: ["-Dtarget=aarch64-linux-gnu"], libraryFile: "lib/libk3.so",
    bunTarget: "bun-linux-arm64", status: "tested under qemu-user: same ids as x64 on a fixture model",
  },
  {
    id: "darwin-arm64", file: "k3-darwin-arm64", zigArgs: ["-Dtarget=aarch64-macos"], libraryFile: "lib/libk3.dylib",
    bunTarget: "bun-darwin-arm64", status: "untested: built, not yet run on a Mac",
  },
  {
    // No O_DIRECT (reads are buffered) and no /proc: doctor and the memory plan see less.
    id: "windows-x64", file: "k3-windows-x64-untested.exe", zigArgs: ["-Dtarget=x86_64-windows-gnu", "-Dcpu=x86_64_v3"], libraryFile: "bin/k3.dll",
    bunTarget: "bun-windows-x64", status: "untested: built, never run on Windows",
  },
];

const releaseSources = [...executableSources.filter((s) => !s.startsWith("zig-out")), ...librarySources, "tools/release.ts"];

export const releasePath = (target: ReleaseTarget): string => join(releaseDir, target.file);

export function releaseStale(target: ReleaseTarget): boolean {
  return mtime(releasePath(target)) < newestMtime(releaseSources);
}

function run(command: string[], what: string): void {
  const started = performance.now();
  const result = Bun.spawnSync(command, { cwd: root, env: buildEnv(), stdout: "inherit", stderr: "inherit" });
  if (result.exitCode !== 0) throw new Error(`${what} failed (exit ${result.exitCode}): ${command.join(" ")}`);
  process.stderr.write(`release: ${what} in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}

/** Builds one target's library and binary. */
export async function buildTarget(target: ReleaseTarget): Promise<string> {
  const prefix = join(root, "zig-out/release", target.id);
  run([...zigCommand(), "build", "-Doptimize=ReleaseFast", ...target.zigArgs, "--prefix", prefix], `libk3 for ${target.id}`);
  const library = join(prefix, target.libraryFile);
  if (!existsSync(library)) throw new Error(`zig build did not produce ${library}`);
  mkdirSync(releaseDir, { recursive: true });
  const outfile = releasePath(target);
  const started = performance.now();
  const result = await Bun.build({
    entrypoints: [join(root, "src/main.ts")],
    compile: { target: target.bunTarget as Bun.Build.CompileTarget, outfile },
    // As tools/build.ts's executableCompileFlags: JSC bytecode, which needs the ESM format.
    bytecode: true, format: "esm",
    plugins: [{
      name: "k3-target-library",
      setup(build) {
        build.onResolve({ filter: /zig-out\/lib\/libk3\.so$/ }, () => ({ path: library }));
      },
    }],
  });
  if (!result.success) throw new Error(`bun build for ${target.bunTarget} failed:\n${result.logs.map(String).join("\n")}`);
  process.stderr.write(`release: ${target.file} (bun build --compile --target=${target.bunTarget}) in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  return outfile;
}

/** The target's binary, rebuilt when it is older than its sources. */
export async function ensureReleaseTarget(id: string): Promise<string> {
  const target = releaseTargets.find((t) => t.id === id);
  if (!target) throw new Error(`no release target ${id}`);
  if (releaseStale(target)) await buildTarget(target);
  return releasePath(target);
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

if (import.meta.main) {
  const only = process.argv.indexOf("--only");
  const ids = only >= 0 ? [process.argv[only + 1]] : releaseTargets.map((t) => t.id);
  const started = performance.now();
  const built: ReleaseTarget[] = [];
  for (const id of ids) {
    const target = releaseTargets.find((t) => t.id === id);
    if (!target) throw new Error(`--only: no release target '${id}' (have ${releaseTargets.map((t) => t.id).join(", ")})`);
    if (only >= 0 && !releaseStale(target)) {
      process.stderr.write(`release: ${target.file} is up to date\n`);
    } else {
      await buildTarget(target);
    }
    built.push(target);
  }
  if (only < 0) {
    const lines = built.map((t) => `${sha256(releasePath(t))}  ${t.file}`);
    writeFileSync(join(releaseDir, "SHA256SUMS"), `${lines.join("\n")}\n`);
    process.stdout.write(`${"file".padEnd(28)} ${"bytes".padStart(11)}  sha256\n`);
    for (const t of built) {
      process.stdout.write(`${t.file.padEnd(28)} ${String(statSync(releasePath(t)).size).padStart(11)}  ${sha256(releasePath(t))}  (${t.status})\n`);
    }
    process.stderr.write(`release: ${built.length} binaries and SHA256SUMS in dist/release/ in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
  }
}
