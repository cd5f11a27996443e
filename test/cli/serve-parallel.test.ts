/**
 * `k3 serve --parallel 4` over HTTP (issue 24): requests arriving at staggered times generate
 * together, their steps batched, and each gets exactly the answer `--parallel 1` gives it when
 * the same requests come one at a time: chat and completion, greedy and seeded, different
 * lengths, one with a stop string, streamed and not; one cancelled mid-way changes nothing for
 * the others. Multi-turn reuse keeps working per conversation.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { chatModelDir } from "../support/chat-fixture.ts";
import { demoDir } from "../support/demo.ts";
import { k3Async } from "../support/k3-async.ts";
import { serve, stopAll, type Served } from "../support/serve.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(60_000);
afterAll(stopAll, 30_000);

type Request = { path: "/v1/chat/completions" | "/v1/completions"; body: Record<string, unknown> };

const requests: Request[] = [
  { path: "/v1/chat/completions", body: { messages: [{ role: "user", content: "Tell me a story about a cat." }], max_tokens: 60, temperature: 0 } },
  { path: "/v1/completions", body: { prompt: "Kimi K3 runs on one machine.", max_tokens: 40, temperature: 0.8, seed: 11 } },
  { path: "/v1/chat/completions", body: { messages: [{ role: "user", content: "What is the trunk?" }], max_tokens: 30, temperature: 1, seed: 3, stream: true } },
  { path: "/v1/completions", body: { prompt: "The model first writes its reasoning", max_tokens: 50, temperature: 0, stop: [" and"] } },
  { path: "/v1/chat/completions", body: { messages: [{ role: "user", content: "Hi" }], max_tokens: 12, temperature: 0, stream: true } },
];

/** What must match between servers: the text (or message), the finish reason and the usage. */
async function answer(s: Served, r: Request): Promise<unknown> {
  const response = await fetch(`${s.url}${r.path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(r.body) });
  expect(response.status).toBe(200);
  if (!r.body.stream) {
    const json = (await response.json()) as { choices: { text?: string; message?: unknown; finish_reason: string }[]; usage: unknown; k3: { seed: number } };
    const c = json.choices[0]!;
    // The seed reported is the request's; one drawn fresh (no seed asked) differs by design.
    return { text: c.text ?? c.message, finish: c.finish_reason, usage: json.usage, seed: r.body.seed === undefined ? "fresh" : json.k3.seed };
  }
  const text = await response.text();
  const chunks = text.split("\n").filter((l) => l.startsWith("data: ") && l !== "data: [DONE]").map((l) => JSON.parse(l.slice(6)) as { choices: { delta?: Record<string, string>; text?: string; finish_reason: string | null }[] });
  const pieces = chunks.flatMap((c) => c.choices.map((x) => JSON.stringify(x.delta ?? x.text ?? "")));
  return { pieces, finish: chunks.flatMap((c) => c.choices.map((x) => x.finish_reason)).filter(Boolean) };
}

describe("k3 serve --parallel 4", () => {
  let one: Served;
  let four: Served;
  beforeAll(async () => {
    [one, four] = await Promise.all([serve(demoDir), serve(demoDir, ["--parallel", "4", "--queue", "8"])]);
  });

  test("staggered requests together give each the answer it gets alone, one at a time", async () => {
    const alone: unknown[] = [];
    for (const r of requests) alone.push(await answer(one, r));
    // Staggered: each sent 30 ms after the one before, all in flight together.
    const together = await Promise.all(requests.map(async (r, i) => {
      await Bun.sleep(30 * i);
      return answer(four, r);
    }));
    for (const [i, r] of requests.entries()) expect({ i, path: r.path, got: together[i] }).toEqual({ i, path: r.path, got: alone[i] });
    type Health = { parallel: number; batch?: { steps: number; max_sequences: number }; generation: { requests: number; generated_ids: number; ids_per_second: number; busy_seconds: number; bytes_per_generated_id: number } };
    const [healthOne, health] = await Promise.all([one, four].map(async (s) => (await (await fetch(`${s.url}/health`)).json()) as Health));
    expect([healthOne!.parallel, health!.parallel]).toEqual([1, 4]);
    expect(healthOne!.batch).toBeUndefined();
    expect(health!.batch!.max_sequences).toBeGreaterThanOrEqual(2); // they did share steps
    // The same answers: the same ids generated; both report their rate over the time they were generating.
    expect(health!.generation.requests).toBe(requests.length);
    expect(health!.generation.generated_ids).toBe(healthOne!.generation.generated_ids);
    for (const h of [healthOne!, health!]) {
      // busy_seconds is printed to the millisecond and the rate from the unrounded time: the rate
      // lies within what the rounding of each allows (a short busy time moves it by more than 0.5).
      const { generated_ids: ids, busy_seconds: busy, ids_per_second: rate } = h.generation;
      expect(busy).toBeGreaterThan(0.0005);
      expect(rate).toBeGreaterThanOrEqual(ids / (busy + 0.0005) - 0.0005);
      expect(rate).toBeLessThanOrEqual(ids / (busy - 0.0005) + 0.0005);
      expect(h.generation.bytes_per_generated_id).toBeGreaterThanOrEqual(0);
    }
  });

  test("a request cancelled mid-way changes nothing for the others", async () => {
    const alone: unknown[] = [await answer(one, requests[0]!), await answer(one, requests[3]!)];
    const abort = new AbortController();
    const long = fetch(`${four.url}/v1/chat/completions`, {
      method: "POST", signal: abort.signal, headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Write a long story" }], max_tokens: 2000, temperature: 0, stream: true }),
    });
    const reader = (await long).body!.getReader();
    await reader.read(); // it is generating
    const others = Promise.all([answer(four, requests[0]!), answer(four, requests[3]!)]);
    await Bun.sleep(100);
    abort.abort();
    expect([...(await others)]).toEqual(alone);
  });

  test("n: choice i of a request is the answer n: 1 gives with the seed plus i, non-streamed and streamed", async () => {
    const post = (s: Served, path: string, body: unknown) => fetch(`${s.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    type Json = { choices: { index: number; text?: string; message?: unknown; finish_reason: string }[]; usage: { prompt_tokens: number; completion_tokens: number }; k3: { seed: number; batch?: { steps: number; shared_rows: number } } };
    const chat = { messages: [{ role: "user", content: "Name three colours." }], max_tokens: 24, temperature: 1, seed: 41 };
    const text = { prompt: "Once upon a time", max_tokens: 16, temperature: 1.2, seed: 7 };
    for (const [path, body] of [["/v1/chat/completions", chat], ["/v1/completions", text]] as const) {
      const alone = await Promise.all([0, 1, 2].map(async (i) => (await (await post(one, path, { ...body, seed: body.seed + i })).json()) as Json));
      const response = await post(four, path, { ...body, n: 3 });
      expect(response.status).toBe(200);
      const together = (await response.json()) as Json;
      expect(together.choices.map((c) => c.index)).toEqual([0, 1, 2]);
      for (const [i, c] of together.choices.entries()) {
        const want = alone[i]!.choices[0]!;
        expect({ i, got: c.message ?? c.text, finish: c.finish_reason }).toEqual({ i, got: want.message ?? want.text, finish: want.finish_reason });
      }
      // The prompt counted once, the replies summed; the seed reported is the request's.
      expect(together.usage.prompt_tokens).toBe(alone[0]!.usage.prompt_tokens);
      expect(together.usage.completion_tokens).toBe(alone.reduce((n, a) => n + a.usage.completion_tokens, 0));
      expect(together.k3.seed).toBe(body.seed);
      expect(together.k3.batch!.shared_rows).toBeGreaterThan(together.k3.batch!.steps); // its choices shared the steps
      expect(alone[1]!.choices[0]).not.toEqual(alone[2]!.choices[0]); // each choice has its own stream
    }
    // Streamed: every choice's chunks carry its index; each opens with its role and ends with its finish reason.
    const stream = async (s: Served, body: unknown) => {
      const lines = (await (await post(s, "/v1/chat/completions", body)).text()).split("\n");
      const chunks = lines.filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)) as { choices: { index: number; delta: Record<string, unknown>; finish_reason: string | null }[] });
      const byIndex = new Map<number, { delta: Record<string, unknown>; finish_reason: string | null }[]>();
      for (const { index, ...c } of chunks.flatMap((chunk) => chunk.choices)) byIndex.set(index, [...(byIndex.get(index) ?? []), c]);
      return [...byIndex.entries()].sort(([a], [b]) => a - b).map(([, list]) => list);
    };
    const alone = await Promise.all([0, 1].map(async (i) => (await stream(one, { ...chat, seed: chat.seed + i, stream: true }))[0]!));
    const together = await stream(four, { ...chat, n: 2, stream: true });
    expect(together).toEqual(alone);
    for (const list of together) {
      expect(list[0]!.delta).toEqual({ role: "assistant" });
      expect(list.at(-1)!.finish_reason).not.toBeNull();
    }
  });

  test("n: a request's choices take that many of --parallel's sequences; one that does not fit waits its turn", async () => {
    const body = { prompt: "Once upon a time", max_tokens: 20, temperature: 1, seed: 3, n: 3 };
    const post = () => fetch(`${four.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    // 3 + 3 > 4: were the second let in beside the first, it would find one free conversation, not three.
    const responses = await Promise.all([post(), post()]);
    const answers = await Promise.all(responses.map(async (r) => ({ status: r.status, texts: ((await r.json()) as { choices: { text: string }[] }).choices.map((c) => c.text) })));
    expect(answers[1]).toEqual(answers[0]!);
    expect(answers[0]!.status).toBe(200);
    expect(answers[0]!.texts.length).toBe(3);
  });

  test("n: more choices than --parallel, or not a whole number from 1, is a 400 naming n", async () => {
    const refusal = async (s: Served, n: unknown) => {
      const response = await fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], n }) });
      const body = (await response.json()) as { error: { param: string; message: string; type: string } };
      return { status: response.status, param: body.error.param, type: body.error.type, message: body.error.message };
    };
    expect(await refusal(one, 2)).toEqual({ status: 400, param: "n", type: "invalid_request_error", message: "n: 2 choices, but this server decodes 1 sequence at once and each choice is one (start it with --parallel 2 or more)" });
    expect(await refusal(four, 5)).toMatchObject({ status: 400, param: "n", message: expect.stringContaining("--parallel 5") });
    expect(await refusal(four, 0)).toMatchObject({ status: 400, param: "n" });
    expect(await refusal(four, "2")).toMatchObject({ status: 400, param: "n" });
  });

  test("multi-turn: the second turn reuses the first turn's ids, as with one conversation", async () => {
    const first = { messages: [{ role: "user", content: "Tell me a story about a dog." }], max_tokens: 20, temperature: 0 };
    const reply = async (s: Served, body: unknown) => (await (await fetch(`${s.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify(body) })).json()) as
      { choices: { message: { role: string; content: string | null; reasoning_content?: string | null } }[]; k3: { reused_prompt_ids: number; prefilled_ids: number } };
    const turns = [];
    for (const s of [one, four]) {
      const a = await reply(s, first);
      const second = { ...first, messages: [...first.messages, a.choices[0]!.message, { role: "user", content: "And then?" }] };
      const b = await reply(s, second);
      expect(b.k3.reused_prompt_ids).toBeGreaterThan(0);
      turns.push([a.choices[0]!.message, b.choices[0]!.message, b.k3.reused_prompt_ids]);
    }
    expect(turns[1]).toEqual(turns[0]!);
  });
});

describe.concurrent("k3 serve --parallel: refusals", () => {
  const home = () => ({ HOME: tempDir("home") });
  test("an N whose states do not fit is refused before loading, naming the most that do (exit 1)", async () => {
    // The demo model's KV cache at a million positions is about 1 GB a conversation.
    const r = await k3Async(["serve", "--demo", "--ctx", "1000000", "--parallel", "256", "--port", "0"], { env: home(), timeoutMs: 30_000 });
    expect(r.code).toBe(1);
    const line = r.stderr.trim().split("\n").at(-1)!;
    const fit = Number(line.match(/^k3: REFUSING TO START: --parallel 256 needs [\d.]+ GB but only [\d.]+ GB is available \(95% usable\); at most --parallel (\d+) fits$/)?.[1]);
    expect(fit).toBeGreaterThanOrEqual(1);
    expect(fit).toBeLessThan(256);
  });

  test("--draft-trunk with --parallel above 1: exit 2, one line", async () => {
    const r = await k3Async(["serve", "--demo", "--parallel", "2", "--draft-trunk", "/nonexistent", "--port", "0"], { env: home() });
    expect([r.code, r.stderr]).toEqual([2, "k3: --draft-trunk drafts for one conversation at a time: it cannot be combined with --parallel\n"]);
  });
});

describe("k3 serve --parallel: fairness", () => {
  test("a 2,000-id prompt admitted while 3 requests decode: none of them waits more than a chunk's step between two of its ids", async () => {
    // The random-weight chat fixture: its replies run as long as they are allowed to.
    const s = await serve(chatModelDir(), ["--parallel", "4", "--prefill-chunk", "64", "--ctx", "4096"]);
    const post = (body: unknown, signal?: AbortSignal) =>
      fetch(`${s.url}/v1/completions`, { method: "POST", signal, headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    /** Arrival times of a stream's data chunks and of its prefill comments, as they come. */
    const watch = async (response: Response) => {
      const data: number[] = [];
      const prefill: number[] = [];
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch {
          break; // this test aborted it: what came is what it measures
        }
        const { value, done } = chunk;
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        const lines = buffered.split("\n");
        buffered = lines.pop()!;
        for (const line of lines) {
          if (line.startsWith("data: {")) data.push(performance.now());
          else if (line.startsWith(": k3 prefill")) prefill.push(performance.now());
        }
      }
      return { data, prefill };
    };
    const stop = new AbortController();
    const decoders = [0, 1, 2].map(async (i) => watch(await post({ prompt: `Story ${i}:`, max_tokens: 1000, temperature: 0, stream: true }, stop.signal)));
    await Bun.sleep(300); // they are decoding
    const long = "a b c d e f g h ".repeat(125); // 2,000 ids with the chat fixture's tokenizer
    const admitted = performance.now();
    const longRun = watch(await post({ prompt: long, max_tokens: 2, temperature: 0, stream: true }));
    const { prefill } = await longRun;
    const finished = prefill.at(-1)!;
    await Bun.sleep(100);
    stop.abort();
    const chunks = prefill.length - 1; // the first comment comes before any chunk
    expect(chunks).toBeGreaterThanOrEqual(25); // fed in chunks of 64, one a step
    // The longest step that carried one of its chunks, from the comments' arrival.
    const chunkStep = Math.max(...prefill.slice(1).map((t, i) => t - prefill[i]!));
    for (const decoder of await Promise.all(decoders)) {
      const during = decoder.data.filter((t) => t > admitted && t < finished);
      expect(during.length).toBeGreaterThanOrEqual(chunks / 2); // it kept emitting while the prompt went in
      const gaps = during.slice(1).map((t, i) => t - during[i]!);
      // Were the prompt fed whole before the others' next step, a gap would be the whole prefill (tens of chunks).
      expect(Math.max(...gaps)).toBeLessThan(3 * chunkStep + 50);
    }
  });
});
