/**
 * `k3 serve` as an operator runs it, through dist/k3 on the demo model: `/metrics` in the
 * Prometheus text format (parsed by a registry parser) with counters that move as requests are
 * made, behind the key unless --metrics-public; and a bounded drain at SIGTERM: requests in
 * flight finish, a new one gets 503 with Retry-After, and past --drain-timeout the streams still
 * running end with an error event; the exit is 0 either way.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import parsePrometheus from "parse-prometheus-text-format";
import { join } from "node:path";
import { demoDir } from "../support/demo.ts";
import { k3Async } from "../support/k3-async.ts";
import { serveDemo, stopAll, type Served } from "../support/serve.ts";
import { smallFsUnavailable, withSmallFs } from "../support/small-fs.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(90_000);
afterAll(stopAll);

type Family = { name: string; type: string; metrics: { value?: string; labels?: Record<string, string>; count?: string; buckets?: Record<string, string> }[] };

async function scrape(s: Served, headers: Record<string, string> = {}): Promise<Map<string, Family>> {
  const r = await fetch(`${s.url}/metrics`, { headers });
  expect(r.status).toBe(200);
  expect(r.headers.get("content-type")).toContain("text/plain; version=0.0.4");
  return new Map((parsePrometheus(await r.text()) as Family[]).map((f) => [f.name, f]));
}

const value = (families: Map<string, Family>, name: string, labels: Record<string, string> = {}) =>
  Number(families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value ?? Number.NaN);

const chat = (s: Served, body: object, headers: Record<string, string> = {}) =>
  fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], max_tokens: 8, temperature: 0, ...body }) });

describe("/metrics", () => {
  test("parsed by a Prometheus parser; counters move with requests; refused without the key", async () => {
    const s = await serveDemo(["--api-key", "k"]);
    const auth = { authorization: "Bearer k" };
    expect((await fetch(`${s.url}/metrics`)).status).toBe(401);
    const before = await scrape(s, auth);
    expect(value(before, "k3:generation_tokens_total")).toBe(0);
    for (const family of ["k3:time_to_first_token_seconds", "k3:time_per_output_token_seconds", "k3:request_queue_time_seconds"]) expect(before.get(family)?.type).toBe("HISTOGRAM");
    const replies = await Promise.all([chat(s, {}, auth), chat(s, { stream: true }, auth)]);
    for (const r of replies) await r.text();
    const after = await scrape(s, auth);
    expect(value(after, "k3:requests_total", { endpoint: "chat_completions", status: "200" })).toBe(2);
    expect(value(after, "k3:requests_total", { endpoint: "metrics", status: "401" })).toBe(1);
    expect(value(after, "k3:generation_tokens_total")).toBeGreaterThan(0);
    expect(value(after, "k3:prompt_tokens_total")).toBeGreaterThan(0);
    expect(Number(after.get("k3:time_to_first_token_seconds")?.metrics[0]?.count)).toBe(2);
    expect(Number(after.get("k3:request_queue_time_seconds")?.metrics[0]?.count)).toBe(2);
    // The second request's prompt is the first's: it was reused from the state the first left.
    const reused = after.get("k3:prompt_tokens_reused_total")?.metrics.filter((m) => m.labels?.source !== "none").reduce((n, m) => n + Number(m.value), 0);
    expect(reused).toBeGreaterThan(0);
    expect(value(after, "process_resident_memory_bytes")).toBeGreaterThan(1e6);
    const retention = value(after, "k3:expert_cache_retention_ratio");
    expect(retention > 0 && retention <= 1).toBe(true);
    expect(value(after, "k3:num_requests_running")).toBe(0);
    expect(await s.stop()).toBe(0);
  });

  test("--metrics-public: no key for /metrics, the API still needs it", async () => {
    const s = await serveDemo(["--api-key", "k", "--metrics-public"]);
    await scrape(s);
    expect((await chat(s, {})).status).toBe(401);
    expect(await s.stop()).toBe(0);
  });
});

/** A streamed request, returned once the server has taken it (its first line came); `rest` reads on to the end. */
async function taken(s: Served, body: object) {
  const r = await chat(s, { ...body, stream: true });
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("\n")) {
    const { value: chunk, done } = await reader.read();
    if (done) break;
    text += decoder.decode(chunk, { stream: true });
  }
  const rest = (async () => {
    for (;;) {
      const { value: chunk, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(chunk, { stream: true });
    }
  })();
  return { status: r.status, rest };
}

describe("a failed expert read in a running server", () => {
  test("the request it happened in gets an error, never its ids; the server keeps serving", async () => {
    // Every routed expert of layer 1 fails to load: any reply needs one.
    const faults = Array.from({ length: 32 }, (_, e) => `1:${e}`).join(",");
    const s = await serveDemo([], { env: { K3_INJECT_EXPERT_FAULT: faults } });
    const whole = await chat(s, {});
    const body = (await whole.json()) as { error: { message: string; type: string } };
    expect([whole.status, body.error.type]).toEqual([500, "server_error"]);
    expect(body.error.message).toMatch(/^RUN INVALID: \d+ routed expert load\(s\) failed during this request \(layer 1 expert \d+: /);
    const streamed = await (await chat(s, { stream: true })).text();
    const last = streamed.trimEnd().split("\n").filter((l) => l.startsWith("data: ")).at(-1) ?? "";
    expect(last).toContain("RUN INVALID");
    expect(streamed).not.toContain("[DONE]");
    expect(((await (await fetch(`${s.url}/health`)).json()) as { status: string }).status).toBe("ok");
    expect(await s.stop()).toBe(4); // the exit code says data was lost while it served
  });
});

describe("a failed trunk read in a running server", () => {
  test("the request gets a 500 naming the file and layer; the next request is answered as a cold run", async () => {
    const trunk = join(tempDir("serve-trunk"), "trunk");
    const pack = await k3Async(["pack-trunk", demoDir, trunk]);
    expect(pack.code).toBe(0);
    const cold = (await (await chat(await serveDemo(["--trunk", trunk]), {})).json()) as { choices: { message: { content: string } }[] };
    // One ring slot: every id reads every layer; layer 3's second read fails.
    const s = await serveDemo(["--trunk", trunk, "--trunk-gb", "0"], { env: { K3_INJECT_TRUNK_READ_FAULT: "3:2" } });
    const failed = await chat(s, {});
    const error = ((await failed.json()) as { error: { message: string } }).error;
    expect(failed.status).toBe(500);
    expect(error.message).toBe(`${trunk}/trunk.bin: layer 3: read failed (EIO)`);
    const next = (await (await chat(s, {})).json()) as { choices: { message: { content: string } }[]; k3: { reused_from: string } };
    expect(next.k3.reused_from).toBe("none"); // the failed turn left no state to trust
    expect(next.choices[0]!.message.content).toBe(cold.choices[0]!.message.content);
    expect(await s.stop()).toBe(0);
  });
});

describe("drain at SIGTERM", () => {
  test("three requests in flight finish; a new one gets 503 with Retry-After; exit 0", async () => {
    const s = await serveDemo(["--parallel", "3", "--drain-timeout", "60"]);
    const flights = await Promise.all([0, 1, 2].map((i) => taken(s, { max_tokens: 120, seed: i, temperature: 1 })));
    s.child.kill("SIGTERM");
    await Bun.sleep(100);
    const late = await chat(s, {});
    expect([late.status, late.headers.get("retry-after")]).toEqual([503, "30"]);
    for (const f of flights) {
      const text = await f.rest;
      expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
      expect(text).not.toContain('"error"');
    }
    expect(await s.child.exited).toBe(0);
  });

  test("past --drain-timeout a stream still running ends with an error event; exit 0", async () => {
    const s = await serveDemo(["--drain-timeout", "0", "--max-tokens", "4000", "--ctx", "8192"]);
    const flight = await taken(s, { max_tokens: 4000, temperature: 1, seed: 3 });
    s.child.kill("SIGTERM");
    const text = await flight.rest;
    const last = text.trimEnd().split("\n").filter((l) => l.startsWith("data: ")).at(-1) ?? "";
    expect(last).toContain('"error"');
    expect(last).toContain("--drain-timeout");
    expect(await s.child.exited).toBe(0);
  });
});

describe("a full disk under a running server", () => {
  test.skipIf(smallFsUnavailable() !== undefined)("ENOSPC parking snapshots and keeping prompt-cache entries: warnings, answers exact, exit 0", async () => {
    // The reference: the same two questions on a server with room.
    const roomy = await serveDemo(["--snapshot-gb", "0"]);
    const want = [await answer(roomy.url, "What is 2 plus 3?"), await answer(roomy.url, "Name an animal."), await answer(roomy.url, "What is 2 plus 3?")];
    expect(await roomy.stop()).toBe(0);
    const home = tempDir("enospc-home");
    // A 64 KiB disk for parked snapshots and the prompt cache: every write to it runs out of space.
    const r = withSmallFs(65536, [
      `"$K3" serve --demo --port 0 --snapshot-gb 0 --snapshot-dir "$MNT" --prompt-cache "$MNT/cache" 2>"$HOME/log" &`,
      "pid=$!",
      `for i in $(seq 100); do url=$(sed -n 's/^listening on \\(http[^ ]*\\)$/\\1/p' "$HOME/log"); [ -n "$url" ] && break; sleep 0.1; done`,
      ...["What is 2 plus 3?", "Name an animal.", "What is 2 plus 3?"].map((q) =>
        `curl -s "$url/v1/chat/completions" -H 'content-type: application/json' -d '${JSON.stringify(body(q))}'; echo`),
      `kill -TERM $pid; wait $pid; echo "exit: $?"; grep -c 'no space left on device' "$HOME/log" || true`,
    ].join("\n"), { env: { HOME: home, XDG_CACHE_HOME: join(home, ".cache") } });
    const lines = r.stdout.trim().split("\n");
    const got = lines.slice(0, 3).map((l) => (JSON.parse(l) as { choices: { message: { content: string } }[] }).choices[0]!.message.content);
    expect(got).toEqual(want);
    expect(lines[3]).toBe("exit: 0");
    expect(Number(lines[4])).toBeGreaterThan(0); // the warnings said why nothing was kept
  });
});

const body = (q: string) => ({ messages: [{ role: "user", content: q }], max_tokens: 16, temperature: 0, thinking: { type: "disabled" } });

async function answer(url: string, q: string): Promise<string> {
  const r = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body(q)) });
  return ((await r.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content;
}
