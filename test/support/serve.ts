/**
 * `dist/k3 serve` on a free loopback port (`--port 0`), ready once it says `listening on`. Every
 * server a test file starts is recorded, so `stopAll` in its afterAll leaves none behind.
 */
import { executablePath } from "../../tools/build.ts";

export interface Served {
  url: string;
  child: ReturnType<typeof Bun.spawn>;
  /** SIGTERM, and the exit code (0 when the server stopped cleanly). */
  stop(): Promise<number>;
}

const running: Served[] = [];

export async function serve(modelDir: string, extra: string[] = []): Promise<Served> {
  const child = Bun.spawn([executablePath, "serve", modelDir, "--tok", modelDir, "--port", "0", ...extra], { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  const decoder = new TextDecoder();
  let text = "";
  const reader = (child.stderr as ReadableStream<Uint8Array>).getReader();
  const deadline = Date.now() + 20_000;
  for (;;) {
    const match = text.match(/listening on (http:\/\/127\.0\.0\.1:\d+)\n/);
    if (match) {
      const served: Served = {
        url: match[1] as string, child,
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

/** Stops every server this process started that is still running. */
export async function stopAll(): Promise<void> {
  for (const s of running) if (s.child.exitCode === null) await s.stop();
}
