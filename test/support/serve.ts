/**
 * `dist/k3 serve` on a free loopback port (`--port 0`), ready once it says `listening on`: on a
 * model directory that is its own tokenizer, or on the demo model built in (`--demo`). Every
 * server a test file starts is recorded, so `stopAll` in its afterAll leaves none behind.
 */
import { join } from "node:path";
import { executablePath } from "../../tools/build.ts";
import { aloneCopy, tempDir } from "./tmp.ts";

export interface Served {
  url: string;
  child: ReturnType<typeof Bun.spawn>;
  /** What the server wrote to stderr up to its `listening on` line. */
  startupLog: string;
  /** SIGTERM, and the exit code (0 when the server stopped cleanly). */
  stop(): Promise<number>;
}

const running: Served[] = [];

export interface ServeOptions {
  /** Run a copy of dist/k3 alone in an empty directory with a minimal environment. */
  isolated?: boolean;
  /** Variables added to the server's environment; undefined removes one. */
  env?: Record<string, string | undefined>;
}

export function serve(modelDir: string, extra: string[] = [], options: ServeOptions = {}): Promise<Served> {
  return start([modelDir, "--tok", modelDir, ...extra], options);
}

/** `k3 serve --demo`, unpacking the demo into a fresh temporary HOME (never the user's cache). */
export function serveDemo(extra: string[] = [], options: ServeOptions = {}): Promise<Served> {
  const home = tempDir("home");
  return start(["--demo", ...extra], { ...options, env: { HOME: home, XDG_CACHE_HOME: join(home, ".cache"), ...options.env } });
}

async function start(args: string[], options: ServeOptions): Promise<Served> {
  let binary = executablePath;
  let cwd: string | undefined;
  let env: Record<string, string | undefined> = { ...process.env, ...options.env };
  if (options.isolated) {
    ({ cwd, binary } = aloneCopy(executablePath));
    env = { PATH: "/usr/bin:/bin", ...options.env };
  }
  const child = Bun.spawn([binary, "serve", ...args, "--port", "0"], { cwd, env, stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  const decoder = new TextDecoder();
  let text = "";
  const reader = (child.stderr as ReadableStream<Uint8Array>).getReader();
  const deadline = Date.now() + 20_000;
  for (;;) {
    const match = text.match(/listening on (http:\/\/127\.0\.0\.1:\d+)\n/);
    if (match) {
      const served: Served = {
        url: match[1] as string, child, startupLog: text,
        stop: async () => {
          child.kill("SIGTERM");
          return await child.exited;
        },
      };
      // Keep draining stderr so the server never blocks on a full pipe.
      void (async () => { for (;;) if ((await reader.read()).done) break; })();
      running.push(served);
      return served;
    }
    if (Date.now() > deadline) throw new Error(`k3 serve did not start:\n${text}`);
    const { value, done } = await reader.read();
    if (done) throw new Error(`k3 serve exited before listening:\n${text}`);
    text += decoder.decode(value, { stream: true });
  }
}

/** Stops every server this process started that is still running, all at once. */
export async function stopAll(): Promise<void> {
  await Promise.all(running.filter((s) => s.child.exitCode === null).map((s) => s.stop()));
}
