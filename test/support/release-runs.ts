/**
 * The release binaries the release test runs (test/cli/release.test.ts), built as `bun run
 * release --only ID` builds them (in a process of its own; rebuilt only when stale), and their
 * runs on the fixture models: once per test process, started by the preload when the test is in
 * the run (support/early.ts), in turn with the other early work. A build takes minutes on a fresh clone (Zig
 * cross-compiles libk3), most of it while the unit tests run.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { buildEnv, root } from "../../tools/build.ts";
import { releasePath, releaseTargets } from "../../tools/release.ts";
import { inTurn, once, wanted } from "./early.ts";
import { expectation, modelDir, oracleModels } from "./fixtures.ts";
import { k3Async } from "./k3-async.ts";

export const sysroot = "/usr/aarch64-linux-gnu";
export const qemu = ["qemu-aarch64-static", "qemu-aarch64"].map((name) => Bun.which(name)).find((path) => path !== null) ?? undefined;
export const qemuMissing = qemu === undefined
  ? "qemu-aarch64(-static) is not installed"
  : !existsSync(join(sysroot, "lib/ld-linux-aarch64.so.1")) ? `${sysroot} (the arm64 C library) is not installed` : undefined;

function output(command: string[], what: string, env?: Record<string, string>): Promise<string> {
  return inTurn(async () => {
    const child = Bun.spawn(command, { cwd: root, env, stdout: "pipe", stderr: "pipe" });
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    if (code !== 0) throw new Error(`${what} exited ${code}:\n${stderr}`);
    return stdout;
  });
}

/** The target's binary, built when stale. */
function release(id: string): Promise<string> {
  return once(`release:${id}`, async () => {
    await output([process.execPath, "tools/release.ts", "--only", id], `release build of ${id}`, buildEnv());
    return releasePath(releaseTargets.find((t) => t.id === id)!);
  });
}

/** The ids of 8 greedy steps after the model's reference prompt, by `binary` (a command prefix). */
async function ids(binary: string[], model: string): Promise<number[]> {
  const prompt = expectation(model).prompt_ids;
  const stdout = await output([...binary, modelDir(model), "--ids", prompt.join(","), "--gen", "8", "--out", "-"], binary.join(" "));
  return JSON.parse(stdout).generated_ids as number[];
}

/** dist/k3's ids on each fixture model. */
function distIds(model: string): Promise<number[]> {
  return once(`release:dist:${model}`, async () => {
    const prompt = expectation(model).prompt_ids;
    const r = await k3Async([modelDir(model), "--ids", prompt.join(","), "--gen", "8", "--out", "-"], { inTurn: true });
    if (r.code !== 0) throw new Error(`dist/k3 exited ${r.code}: ${r.stderr}`);
    return JSON.parse(r.stdout).generated_ids as number[];
  });
}

/** k3-linux-x64's ids and dist/k3's, on both fixture models (the test's door; startX64Runs is the preload's). */
export function x64Runs(): Promise<{ model: string; release: number[]; dist: number[] }[]> {
  wanted();
  return startX64Runs();
}

export function startX64Runs(): Promise<{ model: string; release: number[]; dist: number[] }[]> {
  return once("release:x64-runs", async () => {
    const binary = await release("linux-x64");
    const out = [];
    for (const model of oracleModels) out.push({ model, release: await ids([binary], model), dist: await distIds(model) });
    return out;
  });
}

/** k3-linux-arm64's ids on tiny13 under qemu-user, and dist/k3's (built after the x64 binary: one build at a time). */
export function arm64Run(): Promise<{ release: number[]; dist: number[] }> {
  wanted();
  return startArm64Run();
}

export function startArm64Run(): Promise<{ release: number[]; dist: number[] }> {
  return once("release:arm64-run", async () => {
    await startX64Runs().catch(() => {});
    const binary = await release("linux-arm64");
    return { release: await ids([qemu as string, "-L", sysroot, binary], "tiny13"), dist: await distIds("tiny13") };
  });
}
