/**
 * `bun run soak [--seconds S] [--clients N] [--parallel P] [--json FILE]`: mixed traffic against
 * `dist/k3 serve --demo --parallel P` for S seconds (default 120), not part of `bun test`.
 * N clients (default 12) loop over the kinds of requests a server meets: seeded chat, streams,
 * streams abandoned mid-way, completions, two-turn follow-ups, the agent doors, bad JSON, oversize
 * prompts, slow bodies. It prints requests by kind and status, latency percentiles, the server's
 * RSS and open descriptors over time, and checks that seeded answers under load equal the same
 * requests sent alone afterwards. Exits 1 on any 5xx, any answer that differs, or a server that
 * does not stop cleanly. `--json FILE` keeps the run (bench/results/soak/).
 */
import { chmodSync, copyFileSync, readdirSync, readFileSync } from "node:fs";
import { availableParallelism, cpus, totalmem } from "node:os";
import { join } from "node:path";
import { writeAtomically } from "../src/fs.ts";
import { executablePath, ensureBuilt } from "../tools/build.ts";
import { tempDir } from "../test/support/tmp.ts";

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) {
    process.stderr.write(`soak: --${name} needs a whole number above 0\n`);
    process.exit(2);
  }
  return v;
}
const seconds = arg("seconds", 120);
const clients = arg("clients", 12);
const parallel = arg("parallel", 4);
const jsonAt = process.argv.indexOf("--json");
const jsonFile = jsonAt >= 0 ? process.argv[jsonAt + 1] : undefined;

ensureBuilt();
const home = tempDir("soak-home");
// A copy of its own: a rebuild of dist/k3 during a long soak must not touch the running binary.
const binary = join(home, "k3");
copyFileSync(executablePath, binary);
chmodSync(binary, 0o755);
const server = Bun.spawn([binary, "serve", "--demo", "--port", "0", "--parallel", String(parallel), "--queue", "32", "--body-timeout", "2", "--ctx", "4096"], {
  env: { ...process.env, HOME: home, XDG_CACHE_HOME: join(home, ".cache") }, stdin: "ignore", stdout: "ignore", stderr: "pipe",
});
let log = "";
const reader = (server.stderr as ReadableStream<Uint8Array>).getReader();
let url = "";
for (const deadline = Date.now() + 30_000; Date.now() < deadline && !url;) {
  const { value, done } = await reader.read();
  if (done) break;
  log += new TextDecoder().decode(value);
  url = log.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/)?.[1] ?? "";
}
if (!url) {
  process.stderr.write(`soak: the server did not start:\n${log}\n`);
  process.exit(1);
}
void (async () => {
  for (;;) if ((await reader.read()).done) break; // keep draining its log
})();

type Kind = "chat" | "stream" | "abandon" | "completion" | "follow-up" | "messages" | "responses" | "bad-json" | "oversize" | "slow-body";
const kinds: Kind[] = ["chat", "chat", "stream", "stream", "abandon", "completion", "follow-up", "messages", "responses", "bad-json", "oversize", "slow-body"];
const questions = ["What is 2 plus 3?", "Tell me about the moon.", "Name an animal.", "What do plants need to grow?"];
const results: { kind: Kind; status: number; ms: number }[] = [];
const seededUnderLoad = new Map<string, string>();

const post = (path: string, body: string, signal?: AbortSignal) => fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body, signal });
const chatBody = (q: string, extra: object = {}) => JSON.stringify({ messages: [{ role: "user", content: q }], max_tokens: 48, ...extra });

async function once(kind: Kind, n: number): Promise<number> {
  const q = questions[n % questions.length] as string;
  switch (kind) {
    case "chat": {
      const seed = n % 8;
      const r = await post("/v1/chat/completions", chatBody(q, { seed, temperature: 1 }));
      const j = (await r.json()) as { choices?: { message: { content: string | null } }[] };
      if (r.status === 200) seededUnderLoad.set(`${q}|${seed}`, j.choices?.[0]?.message.content ?? "");
      return r.status;
    }
    case "stream": {
      const r = await post("/v1/chat/completions", chatBody(q, { stream: true }));
      const text = await r.text();
      return r.status === 200 && !text.includes("[DONE]") ? 599 : r.status;
    }
    case "abandon": {
      const ac = new AbortController();
      const r = await post("/v1/chat/completions", chatBody(q, { stream: true, max_tokens: 200 }), ac.signal);
      await r.body?.getReader().read();
      ac.abort();
      return r.status;
    }
    case "completion":
      return (await post("/v1/completions", JSON.stringify({ prompt: q, max_tokens: 24 }))).status;
    case "follow-up": {
      const first = await post("/v1/chat/completions", chatBody(q, { temperature: 0 }));
      const said = ((await first.json()) as { choices: { message: { content: string | null; reasoning_content?: string } }[] }).choices?.[0]?.message;
      if (first.status !== 200 || !said) return first.status;
      return (await post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: q }, { role: "assistant", ...said }, { role: "user", content: "And then?" }], max_tokens: 24 }))).status;
    }
    case "messages":
      return (await post("/v1/messages", JSON.stringify({ model: "kimi-k3", max_tokens: 32, messages: [{ role: "user", content: q }] }))).status;
    case "responses":
      return (await post("/v1/responses", JSON.stringify({ model: "kimi-k3", max_output_tokens: 32, input: q }))).status;
    case "bad-json":
      return (await post("/v1/chat/completions", '{"messages": [')).status;
    case "oversize":
      return (await post("/v1/chat/completions", chatBody("x ".repeat(9000)))).status;
    case "slow-body": {
      // Half a body, then silence past --body-timeout: 408, and the descriptor goes back.
      const stream = new ReadableStream<Uint8Array>({
        async start(c) {
          c.enqueue(new TextEncoder().encode('{"messages": ['));
          await Bun.sleep(3000);
          c.close();
        },
      });
      return (await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: stream, duplex: "half" } as RequestInit)).status;
    }
  }
}

const expected: Record<Kind, number[]> = {
  chat: [200, 429], stream: [200, 429], abandon: [200, 429], completion: [200, 429], "follow-up": [200, 429], messages: [200, 529], responses: [200, 429],
  "bad-json": [400], oversize: [400], "slow-body": [408],
};

function sampleServer(): { rss_mb: number; fds: number } {
  const status = readFileSync(`/proc/${server.pid}/status`, "utf8");
  const rss = Number(status.match(/^VmRSS:\s+(\d+) kB/m)?.[1] ?? 0) / 1024;
  return { rss_mb: Math.round(rss * 10) / 10, fds: readdirSync(`/proc/${server.pid}/fd`).length };
}

const started = Date.now();
const end = started + seconds * 1000;
const samples: { t: number; rss_mb: number; fds: number }[] = [];
const sampler = setInterval(() => samples.push({ t: Math.round((Date.now() - started) / 1000), ...sampleServer() }), 5000);
samples.push({ t: 0, ...sampleServer() });
let counter = 0;
await Promise.all(Array.from({ length: clients }, async (_, c) => {
  while (Date.now() < end) {
    const n = counter++;
    const kind = kinds[(n * 7 + c) % kinds.length] as Kind;
    const t = performance.now();
    let status: number;
    try {
      status = await once(kind, n);
    } catch {
      status = kind === "abandon" ? 200 : 598; // a client-side failure to talk to the server
    }
    results.push({ kind, status, ms: performance.now() - t });
  }
}));
clearInterval(sampler);
await Bun.sleep(1000);
samples.push({ t: Math.round((Date.now() - started) / 1000), ...sampleServer() });

// The seeded answers again, one at a time on the quiet server: each must equal its answer under load.
let mismatches = 0;
for (const [key, answer] of seededUnderLoad) {
  const [q, seed] = key.split("|") as [string, string];
  const r = await post("/v1/chat/completions", chatBody(q, { seed: Number(seed), temperature: 1 }));
  const alone = ((await r.json()) as { choices: { message: { content: string | null } }[] }).choices[0]?.message.content ?? "";
  if (alone !== answer) mismatches++;
}
server.kill("SIGTERM");
const exitCode = await server.exited;

const byKind = Object.fromEntries(kinds.filter((k, i) => kinds.indexOf(k) === i).map((kind) => {
  const rs = results.filter((r) => r.kind === kind);
  const ms = rs.map((r) => r.ms).sort((a, b) => a - b);
  const pct = (p: number) => Math.round(ms[Math.min(ms.length - 1, Math.floor(p * ms.length))] ?? 0);
  const statuses: Record<string, number> = {};
  for (const r of rs) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
  return [kind, { requests: rs.length, statuses, p50_ms: pct(0.5), p90_ms: pct(0.9), p99_ms: pct(0.99) }];
}));
const unexpected = results.filter((r) => !expected[r.kind].includes(r.status));
const serverErrors = results.filter((r) => r.status >= 500 && !(r.kind === "messages" && r.status === 529));
const half = samples.filter((s) => s.t >= seconds / 2);
const report = {
  format: "k3-soak", version: 1, date: new Date(started).toISOString(), seconds, clients, parallel,
  machine: { cpu: cpus()[0]?.model ?? "unknown", logical_cores: availableParallelism(), mem_total_bytes: totalmem() },
  requests: results.length, by_kind: byKind, unexpected: unexpected.length, server_errors: serverErrors.length,
  seeded_checked: seededUnderLoad.size, seeded_mismatches: mismatches,
  rss_mb: { first: samples[0]?.rss_mb, peak: Math.max(...samples.map((s) => s.rss_mb)), second_half_min: Math.min(...half.map((s) => s.rss_mb)), second_half_max: Math.max(...half.map((s) => s.rss_mb)), last: samples.at(-1)?.rss_mb },
  fds: { first: samples[0]?.fds, peak: Math.max(...samples.map((s) => s.fds)), last: samples.at(-1)?.fds },
  samples, server_exit: exitCode,
};
console.log(`soak: ${results.length} requests in ${seconds} s from ${clients} clients (--parallel ${parallel})`);
for (const [kind, k] of Object.entries(byKind)) console.log(`  ${kind.padEnd(11)} ${String(k.requests).padStart(5)}  ${JSON.stringify(k.statuses)}  p50 ${k.p50_ms} ms  p90 ${k.p90_ms} ms  p99 ${k.p99_ms} ms`);
console.log(`  RSS ${report.rss_mb.first} -> peak ${report.rss_mb.peak} MB (second half ${report.rss_mb.second_half_min}-${report.rss_mb.second_half_max}); descriptors ${report.fds.first} -> peak ${report.fds.peak}, last ${report.fds.last}`);
console.log(`  seeded answers under load equal alone: ${seededUnderLoad.size - mismatches} of ${seededUnderLoad.size}; unexpected statuses ${unexpected.length}; 5xx ${serverErrors.length}; server exit ${exitCode}`);
if (jsonFile) writeAtomically(jsonFile, `${JSON.stringify(report, null, 2)}\n`, "the soak report", "--json");
const failed = serverErrors.length > 0 || unexpected.length > 0 || mismatches > 0 || exitCode !== 0;
process.exit(failed ? 1 : 0);
