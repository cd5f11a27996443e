/** Runs the compiled executable, the way users run it. */
import { executablePath } from "../../tools/build.ts";
import { aloneCopy } from "./tmp.ts";

export interface K3Result {
  code: number;
  stdout: string;
  stderr: string;
  /** stdout as bytes, for binary data (`--dump-logits -`). */
  stdoutBytes?: Uint8Array;
}

export interface K3RunOptions {
  cwd?: string;
  env?: Record<string, string>;
  stdin?: string | Uint8Array;
  /** Run a copy of dist/k3 alone in an empty directory with a minimal environment. */
  isolated?: boolean;
  /** Kill it after this long (the result's code is then -1): for tests that could block. */
  timeoutMs?: number;
}

export function k3(args: string[], options: K3RunOptions = {}): K3Result {
  let binary = executablePath;
  let cwd = options.cwd;
  let env: Record<string, string> = { ...process.env, ...options.env } as Record<string, string>;
  if (options.isolated) {
    ({ cwd, binary } = aloneCopy(executablePath));
    env = { PATH: "/usr/bin:/bin", ...options.env };
  }
  const result = Bun.spawnSync([binary, ...args], {
    cwd, env, stdin: options.stdin === undefined ? "ignore" : Buffer.from(options.stdin),
    stdout: "pipe", stderr: "pipe", timeout: options.timeoutMs,
  });
  return { code: result.exitCode ?? -1, stdout: result.stdout.toString(), stderr: result.stderr.toString(), stdoutBytes: new Uint8Array(result.stdout) };
}
