/**
 * The observation behind serve-safety's `--idle-timeout` test: `dist/k3 serve --idle-timeout 8`
 * on the demo model, 20 connections that send part of their headers and never the blank line,
 * and when the server closed each. Eight seconds is Bun's shortest idle limit, so the test waits
 * at least that long while using no processor: the preload starts it early (early.ts), when the
 * file is in the run, and the test finds it done.
 *
 * The connections live in a child process of their own,
 *
 *   bun test/support/idle-probe.ts
 *
 * which prints the IdleObservation as JSON: the test process may be busy for seconds at a time
 * with another file's synchronous work, and a close it noticed late would look like a slow limit.
 */
import { readdirSync } from "node:fs";
import { demoDir } from "./demo.ts";
import { once, wanted } from "./early.ts";
import { serve } from "./serve.ts";

export interface IdleObservation {
  /** Milliseconds from opening the first connection to each one's close, in opening order. */
  closedAfterMs: number[];
  /** The server's open descriptors before the connections, and 200 ms after the last closed. */
  descriptorsIdle: number;
  descriptorsAfter: number;
  /** The server's exit code after SIGTERM. */
  stopCode: number;
}

export const idleTimeoutSeconds = 8;
const connections = 20;

/** The observation, started now if the preload did not; the test awaits this. */
export function idleProbe(): Promise<IdleObservation> {
  wanted();
  return startIdleProbe();
}

/** Starts the probe's child process once per test process (what the preload calls). */
export function startIdleProbe(): Promise<IdleObservation> {
  return once("idle-probe", async () => {
    const child = Bun.spawn([process.execPath, import.meta.path], { stdout: "pipe", stderr: "pipe" });
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    if (code !== 0) throw new Error(`idle-probe exited ${code}: ${stderr.slice(-2000)}`);
    return JSON.parse(stdout) as IdleObservation;
  });
}

async function main(): Promise<void> {
  const s = await serve(demoDir, ["--idle-timeout", String(idleTimeoutSeconds)]);
  const descriptors = () => readdirSync(`/proc/${s.child.pid}/fd`).length;
  const { hostname, port } = new URL(s.url);
  const descriptorsIdle = descriptors();
  const closed: Promise<number>[] = [];
  const opened = performance.now();
  for (let i = 0; i < connections; i++) {
    const done = Promise.withResolvers<number>();
    const socket = await Bun.connect({
      hostname, port: Number(port),
      socket: { data: () => {}, close: () => done.resolve(performance.now() - opened), error: () => done.resolve(performance.now() - opened) },
    });
    socket.write(`POST /v1/completions HTTP/1.1\r\nhost: ${hostname}:${port}\r\n`); // no blank line: the headers never end
    closed.push(done.promise);
  }
  const closedAfterMs = await Promise.all(closed);
  await Bun.sleep(200);
  const observation: IdleObservation = { closedAfterMs, descriptorsIdle, descriptorsAfter: descriptors(), stopCode: await s.stop() };
  process.stdout.write(JSON.stringify(observation));
}

if (import.meta.main) await main();
