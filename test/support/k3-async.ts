/**
 * dist/k3 run without blocking the test's event loop, for tests that serve it from the same
 * process (a fake Hub): spawnSync would stop the server from answering. Every run is bounded.
 */
import { executablePath } from "../../tools/build.ts";
import type { K3Result } from "./k3.ts";

export interface AsyncRunOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
  timeoutMs?: number;
}

/** The environment of a run: the test's, with `env` applied (undefined removes a variable). */
export function runEnv(env: Record<string, string | undefined> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries({ ...process.env, ...env })) if (value !== undefined) out[key] = value;
  return out;
}

export function spawnK3(args: string[], options: AsyncRunOptions = {}) {
  return Bun.spawn([executablePath, ...args], {
    cwd: options.cwd, env: runEnv(options.env), stdin: "ignore", stdout: "pipe", stderr: "pipe",
  });
}

export async function k3Async(args: string[], options: AsyncRunOptions = {}): Promise<K3Result> {
  const child = spawnK3(args, options);
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
  try {
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}
