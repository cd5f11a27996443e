/**
 * dist/k3 run without blocking the test's event loop: for tests that serve it from the same
 * process (a fake Hub), where spawnSync would stop the server from answering, and for tests that
 * run several at once (test.concurrent, Promise.all). Every run is bounded.
 */
import { executablePath } from "../../tools/build.ts";
import type { K3Result } from "./k3.ts";
import { inTurn } from "./early.ts";
import { aloneCopy } from "./tmp.ts";

export interface AsyncRunOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
  timeoutMs?: number;
  stdin?: string | Uint8Array;
  /** Run a copy of dist/k3 alone in an empty directory with a minimal environment (as k3() does). */
  isolated?: boolean;
  /** Work that may be started early (support/early.ts): run it in turn with the rest of that work. */
  inTurn?: boolean;
}

/** The environment of a run: the test's, with `env` applied (undefined removes a variable). */
export function runEnv(env: Record<string, string | undefined> = {}, base: Record<string, string | undefined> = process.env): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries({ ...base, ...env })) if (value !== undefined) out[key] = value;
  return out;
}

export function spawnK3(args: string[], options: AsyncRunOptions = {}) {
  let binary = executablePath;
  let cwd = options.cwd;
  let env = runEnv(options.env);
  if (options.isolated) {
    ({ cwd, binary } = aloneCopy(executablePath));
    env = runEnv(options.env, { PATH: "/usr/bin:/bin" });
  }
  return Bun.spawn([binary, ...args], {
    cwd, env, stdin: options.stdin === undefined ? "ignore" : Buffer.from(options.stdin), stdout: "pipe", stderr: "pipe",
  });
}

export async function k3Async(args: string[], options: AsyncRunOptions = {}): Promise<K3Result> {
  if (options.inTurn) return inTurn(() => k3Async(args, { ...options, inTurn: false }));
  const child = spawnK3(args, options);
  const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000);
  try {
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).bytes(), new Response(child.stderr).text(), child.exited]);
    return { code, stdout: Buffer.from(stdout).toString(), stderr, stdoutBytes: stdout };
  } finally {
    clearTimeout(timer);
  }
}

/** `fn` over `items`, at most `limit` at a time, results in item order. */
export async function inParallel<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
