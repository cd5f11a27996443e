/**
 * The observations behind serve-safety's two timeout tests, which wait seconds while using no
 * processor, so the preload starts them early (early.ts) when the file is in the run, and the
 * tests find them done:
 * - `dist/k3 serve --idle-timeout 8` on the demo model (eight seconds is Bun's shortest idle
 *   limit), 20 connections that send part of their headers and never the blank line, and when
 *   the server closed each;
 * - `dist/k3 serve --body-timeout 3`, 200 connections that send their headers and part of a
 *   body, what each was answered and when.
 *
 * The connections live in a child process of their own, both probes at once,
 *
 *   bun test/support/timeout-probes.ts
 *
 * which prints the TimeoutObservations as JSON: the test process may be busy for seconds at a
 * time with another file's synchronous work, and a close it noticed late would look like a slow
 * limit.
 */
import { readdirSync } from "node:fs";
import { demoDir } from "./demo.ts";
import { once, wanted } from "./early.ts";
import { serve, type Served } from "./serve.ts";

export interface IdleObservation {
  /** Milliseconds from opening the first connection to each one's close, in opening order. */
  closedAfterMs: number[];
  /** The server's open descriptors before the connections, and 200 ms after the last closed. */
  descriptorsIdle: number;
  descriptorsAfter: number;
  /** The server's exit code after SIGTERM. */
  stopCode: number;
}

export interface BodyObservation {
  /** Connections still open 500 ms after the last was opened, and the server's descriptors then. */
  openAfterHalfSecond: number;
  descriptorsWhileOpen: number;
  /** Milliseconds from that moment until the last connection closed. */
  lastClosedAfterMs: number;
  /** Each connection's first response line ("" if it got none), in opening order. */
  statusLines: string[];
  descriptorsIdle: number;
  descriptorsAfter: number;
  /** /health's status after them. */
  healthStatus: number;
  stopCode: number;
}

export interface TimeoutObservations {
  idle: IdleObservation;
  body: BodyObservation;
}

export const idleTimeoutSeconds = 8;
export const bodyTimeoutSeconds = 3;
export const idleConnections = 20;
export const bodyConnections = 200;

/** The observations, started now if the preload did not; the tests await this. */
export function timeoutProbes(): Promise<TimeoutObservations> {
  wanted();
  return startTimeoutProbes();
}

/** Starts the probes' child process once per test process (what the preload calls). */
export function startTimeoutProbes(): Promise<TimeoutObservations> {
  return once("timeout-probes", async () => {
    const child = Bun.spawn([process.execPath, import.meta.path], { stdout: "pipe", stderr: "pipe" });
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    if (code !== 0) throw new Error(`timeout probes exited ${code}: ${stderr.slice(-2000)}`);
    return JSON.parse(stdout) as TimeoutObservations;
  });
}

const descriptorsOf = (s: Served) => readdirSync(`/proc/${s.child.pid}/fd`).length;

async function idle(): Promise<IdleObservation> {
  const s = await serve(demoDir, ["--idle-timeout", String(idleTimeoutSeconds)]);
  const descriptors = () => descriptorsOf(s);
  const { hostname, port } = new URL(s.url);
  const descriptorsIdle = descriptors();
  const closed: Promise<number>[] = [];
  const opened = performance.now();
  for (let i = 0; i < idleConnections; i++) {
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
  return { closedAfterMs, descriptorsIdle, descriptorsAfter: descriptors(), stopCode: await s.stop() };
}

async function body(): Promise<BodyObservation> {
  const s = await serve(demoDir, ["--body-timeout", String(bodyTimeoutSeconds)]);
  const descriptors = () => descriptorsOf(s);
  const { hostname, port } = new URL(s.url);
  const descriptorsIdle = descriptors();
  const closed: Promise<string>[] = [];
  let open = 0;
  for (let i = 0; i < bodyConnections; i++) {
    const done = Promise.withResolvers<string>();
    let text = "";
    const socket = await Bun.connect({
      hostname, port: Number(port),
      socket: {
        data: (_s, chunk) => { text += chunk.toString(); },
        close: () => { open--; done.resolve(text); },
        error: () => { open--; done.resolve(text); },
      },
    });
    open++;
    socket.write(`POST /v1/completions HTTP/1.1\r\nhost: ${hostname}:${port}\r\ncontent-length: 1000\r\n\r\n{"prompt":`);
    closed.push(done.promise);
  }
  await Bun.sleep(500);
  const openAfterHalfSecond = open;
  const descriptorsWhileOpen = descriptors();
  const started = performance.now();
  const answers = await Promise.all(closed);
  const lastClosedAfterMs = performance.now() - started;
  await Bun.sleep(200);
  const descriptorsAfter = descriptors();
  const healthStatus = (await fetch(`${s.url}/health`)).status;
  return {
    openAfterHalfSecond, descriptorsWhileOpen, lastClosedAfterMs, statusLines: answers.map((a) => a.split("\r\n")[0] ?? ""),
    descriptorsIdle, descriptorsAfter, healthStatus, stopCode: await s.stop(),
  };
}

if (import.meta.main) {
  const [idleSeen, bodySeen] = await Promise.all([idle(), body()]);
  process.stdout.write(JSON.stringify({ idle: idleSeen, body: bodySeen } satisfies TimeoutObservations));
}
