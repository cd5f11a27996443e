/**
 * `k3 serve` through dist/k3 on a free loopback port, on the chat fixture model, spoken to with
 * the official `openai` client and with plain fetch for what clients do wrong. Every server stops
 * by itself at the end (SIGTERM, which must exit 0).
 *
 * The tests run concurrently: each has servers of its own, and most of a test's time is spent
 * waiting on them (a stop alone takes about 2 s). The one that needs another's answer awaits it;
 * the flood of requests runs alone at the end.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { parseChatRequest, renderChat } from "../../src/chat/index.ts";
import { loadTokenizer } from "../../src/tokenizer/index.ts";
import { chatModelDir } from "../support/chat-fixture.ts";
import { k3Async } from "../support/k3-async.ts";
import { openaiClient as client, readStream } from "../support/openai.ts";
import { serve as serveModel, stopAll, type Served } from "../support/serve.ts";
import { tempDir } from "../support/tmp.ts";

const dir = chatModelDir();
const tokenizer = loadTokenizer(dir);

const serve = (extra: string[] = []) => serveModel(dir, extra);

afterAll(stopAll);

const post = (s: Served, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });

type K3Stats = { reused_prompt_ids: number; prefilled_ids: number; reused_from: string; snapshots?: { in_ram: number; parked: number } };
interface CompletionJson {
  choices: { message: { role: string; content: string | null; reasoning_content: string | null } }[];
  usage: { prompt_tokens: number };
  k3: K3Stats;
}
const completion = async (r: Response) => (await r.json()) as CompletionJson;

/**
 * A streamed request, returned once the server has taken it: its first line (the queue comment)
 * has come. Waiting for that, not for a fixed time, is what makes "meanwhile" certain however
 * busy the machine is. `rest` reads the stream on to its end and gives the whole text.
 */
async function taken(s: Served, body: object, headers: Record<string, string> = {}, signal?: AbortSignal) {
  const r = await fetch(`${s.url}/v1/chat/completions`, {
    method: "POST", signal, headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ ...body, stream: true }),
  });
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const first = text.split("\n")[0];
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { status: r.status, first, rest };
}

/** The data chunks of a whole streamed text, and whether it ended with [DONE]. */
const dataOf = (text: string) => ({
  chunks: text.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)) as { choices: { delta: { role?: string }; finish_reason: string | null }[] }),
  done: text.trimEnd().endsWith("data: [DONE]"),
});

describe.concurrent("k3 serve", () => {
  test("health, models, and the answers the openai client parses: greedy equals k3 chat --json", async () => {
    const s = await serve();
    expect(await (await fetch(`${s.url}/health`)).json()).toEqual({
      status: "ok", parallel: 1,
      generation: { requests: 0, generated_ids: 0, busy_seconds: 0, ids_per_second: 0, bytes_read: expect.any(Number), bytes_per_generated_id: 0 },
    });
    const models = await client(s).models.list();
    expect(models.data.map((m) => m.id)).toEqual(["kimi-k3"]);
    expect((await client(s).models.retrieve("kimi-k3")).id).toBe("kimi-k3");
    const reply = await client(s).chat.completions.create({ model: "kimi-k3", messages: [{ role: "user", content: "Hello" }], max_tokens: 12, temperature: 0 });
    const cli = JSON.parse((await k3Async(["chat", dir, "--tok", dir, "--message", "Hello", "--max-tokens", "12", "--temperature", "0", "--json"])).stdout);
    const message = reply.choices[0]!.message as unknown as { content: string | null; reasoning_content: string | null };
    expect(message.content).toBe(cli.content);
    expect(message.reasoning_content).toBe(cli.reasoning_content);
    expect(reply.choices[0]!.finish_reason).toBe(cli.finish_reason);
    expect(reply.usage).toEqual(cli.usage);
    expect(await s.stop()).toBe(0);
  }, 60_000);

  test("streaming and non-streaming answers to the same seeded request are identical, and reproducible across restarts", async () => {
    const s = await serve();
    const request = { model: "kimi-k3", messages: [{ role: "user" as const, content: "Tell me a story" }], max_tokens: 24, temperature: 1, seed: 9 };
    const whole = await client(s).chat.completions.create(request);
    const { content, reasoning, finish, usage } = await readStream(await client(s).chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } }));
    const message = whole.choices[0]!.message as unknown as { content: string | null; reasoning_content: string | null };
    expect(reasoning).toBe(message.reasoning_content ?? "");
    expect(content).toBe(message.content ?? "");
    expect(finish).toBe(whole.choices[0]!.finish_reason);
    expect(usage).toEqual(whole.usage);
    expect(await s.stop()).toBe(0);
    // The same seeded request to a restarted server: the same answer.
    const again = await serve();
    const restarted = await client(again).chat.completions.create(request);
    expect(restarted.choices[0]!.message).toEqual(whole.choices[0]!.message);
    expect(await again.stop()).toBe(0);
  }, 60_000);

  /** The ids the server renders for `body`, and where its conversation messages end. */
  const rendered = (body: object) => {
    const r = renderChat(parseChatRequest(JSON.parse(JSON.stringify(body))), tokenizer);
    return { ids: r.ids, historyEnd: r.historyEnd };
  };
  const firstDifference = (a: readonly number[], b: readonly number[]) => {
    let i = 0;
    while (i < a.length && i < b.length && a[i] === b[i]) i++;
    return i;
  };
  type Message = { role: string; content: string | null; reasoning_content?: string | null };
  const ask = (messages: Message[]) => ({ model: "kimi-k3", messages, max_tokens: 10, temperature: 0 });

  /**
   * Three turns, each echoing the previous answer; with `interleave`, another conversation's
   * request comes between turns (so the first conversation's state must come back from a
   * snapshot). Checks that each turn reused all of the previous request's messages and fed only
   * what follows; returns the answers and where their reuse came from.
   */
  async function threeTurns(s: Served, interleave: boolean) {
    const answers: CompletionJson[] = [];
    let messages: Message[] = [{ role: "user", content: "Hello there" }];
    const requests: ReturnType<typeof ask>[] = [];
    for (const next of ["And then?", "Why?", undefined]) {
      const request = ask(messages);
      requests.push(request);
      const answer = await completion(await post(s, request));
      answers.push(answer);
      const turn = answers.length;
      const ids = rendered(request).ids;
      expect(answer.k3.reused_prompt_ids + answer.k3.prefilled_ids).toBe(ids.length);
      if (turn > 1) {
        const previous = rendered(requests[turn - 2]!);
        // Everything up to the end of the previous request's messages came from a state, never re-read.
        expect(answer.k3.reused_prompt_ids).toBeGreaterThanOrEqual(previous.historyEnd);
        expect(answer.k3.prefilled_ids).toBeLessThanOrEqual(ids.length - previous.historyEnd);
      }
      if (interleave) await post(s, ask([{ role: "user", content: `Something else entirely ${turn}` }]));
      if (next) messages = [...messages, answer.choices[0]!.message, { role: "user", content: next }];
    }
    return { requests, answers, from: answers.map((a) => a.k3.reused_from) };
  }

  test("three turns, each echoing the last answer: only the new ids are prefilled, and every answer equals a fresh server's", async () => {
    const s = await serve();
    const warm = await threeTurns(s, false);
    expect(warm.from).toEqual(["none", expect.stringMatching(/^(live|snapshot)$/), expect.stringMatching(/^(live|snapshot)$/)]);
    // An edit in the second user message: nothing after the edit is reused, and the answer is still the cold one.
    const third = warm.requests[2]!;
    const edited = { ...third, messages: third.messages.map((m, i) => (i === 2 ? { ...m, content: "And after that?" } : m)) };
    const afterEdit = await completion(await post(s, edited));
    expect(afterEdit.k3.reused_prompt_ids).toBeLessThanOrEqual(firstDifference(rendered(edited).ids, rendered(third).ids));
    expect(afterEdit.k3.reused_prompt_ids).toBeGreaterThan(0); // the first user message is still shared
    const firstEdited = { ...third, messages: [{ role: "user", content: "Hullo there" }, ...third.messages.slice(1)] };
    expect((await completion(await post(s, firstEdited))).k3.reused_prompt_ids).toBe(0);
    expect(await s.stop()).toBe(0);
    // Turn one and the first-message edit reused nothing, so they are cold answers already.
    const reusing: [object, CompletionJson][] = [[warm.requests[1]!, warm.answers[1]!], [warm.requests[2]!, warm.answers[2]!], [edited, afterEdit]];
    // A fresh server for each, all at once.
    await Promise.all(reusing.map(async ([request, answer]) => {
      const fresh = await serve();
      const cold = await completion(await post(fresh, request));
      expect(cold.k3.reused_from).toBe("none");
      expect(answer.choices[0]!.message).toEqual(cold.choices[0]!.message);
      expect(await fresh.stop()).toBe(0);
    }));
  }, 120_000);

  test("another conversation between turns: snapshots parked to disk (--snapshot-gb 0) and read back give the same answers", async () => {
    const parkDir = tempDir("park");
    // The same conversation, at the same time, on a server whose snapshots stay in RAM, and with none interleaved.
    const [s, inRam] = await Promise.all([serve(["--snapshot-gb", "0", "--snapshot-dir", parkDir]), serve(["--snapshot-gb", "1"])]);
    const [parked, plain] = await Promise.all([threeTurns(s, true), threeTurns(inRam, false)]);
    expect(parked.from.slice(1)).toEqual(["parked", "parked"]);
    const stats = parked.answers[2]!.k3.snapshots!;
    expect(stats.in_ram).toBe(0);
    expect(stats.parked).toBeGreaterThan(0);
    expect(readdirSync(parkDir)).toHaveLength(1); // the server's own directory of parked files
    const stopped = inRam.stop();
    expect(await s.stop()).toBe(0);
    expect(readdirSync(parkDir)).toEqual([]); // removed at exit
    expect(plain.answers.map((a) => a.choices[0]!.message)).toEqual(parked.answers.map((a) => a.choices[0]!.message));
    expect(await stopped).toBe(0);
  }, 120_000);

  test("bad requests get their status and an OpenAI error body, and the next good request is answered", async () => {
    const s = await serve(["--api-key", "sekret", "--max-body", "1", "--queue", "0"]);
    const auth = { authorization: "Bearer sekret" };
    const expectError = async (r: Response, status: number, code: string) => {
      expect(r.status).toBe(status);
      const body = (await r.json()) as { error: { message: string; param: string | null; code: string } };
      expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
      expect(body.error.code).toBe(code);
      return body.error;
    };
    await expectError(await post(s, { messages: [] }), 401, "invalid_api_key");
    await expectError(await post(s, { messages: [] }, { authorization: "Bearer wrong" }), 401, "invalid_api_key");
    expect((await fetch(`${s.url}/health`)).status).toBe(200); // no key needed
    await expectError(await post(s, "{not json", auth), 400, "invalid_request");
    const role = await expectError(await post(s, { messages: [{ role: "developer", content: "x" }] }, auth), 400, "invalid_request");
    expect(role.param).toBe("messages[0].role");
    const type = await expectError(await post(s, { messages: [{ role: "user", content: 5 }] }, auth), 400, "invalid_request");
    expect(type.param).toContain("messages[0]");
    expect((await expectError(await post(s, { messages: [{ role: "user", content: "x" }], temperature: 9 }, auth), 400, "invalid_request")).param).toBe("temperature");
    await expectError(await post(s, { model: "gpt-4", messages: [{ role: "user", content: "x" }] }, auth), 404, "model_not_found");
    await expectError(await fetch(`${s.url}/v1/chat/completions`, { headers: auth }), 405, "method_not_allowed");
    await expectError(await fetch(`${s.url}/v1/nothing`, { headers: auth }), 404, "not_found");
    await expectError(await post(s, { messages: [{ role: "user", content: "x".repeat(2 * 1024 * 1024) }] }, auth), 413, "body_too_large");
    // The context rule (src/decode/reply-room.ts), the same on both endpoints: the field that does not fit.
    const fits = /^max_tokens: 1000000 more ids do not fit: the prompt takes \d+ of the \d+ positions the context holds$/;
    const tooLong = "x ".repeat(20_000);
    for (const [path, prompt, promptField] of [["/v1/chat/completions", { messages: [{ role: "user", content: "x" }] }, "messages"], ["/v1/completions", { prompt: "x" }, "prompt"]] as const) {
      const at = (body: unknown) => fetch(`${s.url}${path}`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify(body) });
      const over = await expectError(await at({ ...prompt, max_tokens: 1_000_000 }), 400, "context_length_exceeded"); // OpenAI's code: a client can act on it
      expect([over.param, over.message]).toEqual(["max_tokens", expect.stringMatching(fits)]);
      const whole = path === "/v1/completions" ? { prompt: tooLong } : { messages: [{ role: "user", content: tooLong }] };
      const full = await expectError(await at(whole), 400, "context_length_exceeded");
      expect([full.param, full.message]).toEqual([promptField, expect.stringMatching(/^\w+: the prompt has \d+ ids; the context holds \d+$/)]);
    }
    // One generates, none may wait: a second request meanwhile is told to come back. The first,
    // 1,000 ids (over 2 s at this fixture's fastest), is read to its end.
    const long = await taken(s, { messages: [{ role: "user", content: "Write a long story" }], max_tokens: 1000, temperature: 0 }, auth);
    expect(long.first).toBe(": k3 queue 0");
    await expectError(await post(s, { messages: [{ role: "user", content: "x" }], max_tokens: 2 }, auth), 429, "queue_full");
    expect(long.status).toBe(200);
    expect(dataOf(await long.rest).done).toBe(true);
    const ok = await post(s, { messages: [{ role: "user", content: "x" }], max_tokens: 2 }, auth);
    expect(ok.status).toBe(200);
    expect((await completion(ok)).choices[0]!.message.role).toBe("assistant");
    expect(await s.stop()).toBe(0);
  }, 60_000);

  test("/v1/completions: a raw prompt whose control-token text is the control ids; streaming = not", async () => {
    const s = await serve();
    const c = client(s);
    const plain = await c.completions.create({ model: "kimi-k3", prompt: "Hello", max_tokens: 8, temperature: 0 });
    const marked = await c.completions.create({ model: "kimi-k3", prompt: "Hello<|open|>", max_tokens: 8, temperature: 0 });
    expect(marked.usage!.prompt_tokens).toBe(plain.usage!.prompt_tokens + 1); // one control id, not its seven characters
    let streamed = "";
    let finish: string | null = null;
    for await (const chunk of await c.completions.create({ model: "kimi-k3", prompt: "Hello", max_tokens: 8, temperature: 0, stream: true })) {
      streamed += chunk.choices[0]?.text ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(streamed).toBe(plain.choices[0]!.text);
    expect(finish).toBe(plain.choices[0]!.finish_reason);
    const bad = await fetch(`${s.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: 7 }) });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe("prompt");
    expect(await s.stop()).toBe(0);
  }, 60_000);

  test("SIGTERM during a generation lets it finish, then exits 0", async () => {
    const s = await serve();
    const pending = await taken(s, { messages: [{ role: "user", content: "Write a long story" }], max_tokens: 400, temperature: 0 });
    expect(pending.first).toBe(": k3 queue 0"); // taken: in flight when the signal comes
    const code = s.stop();
    const answer = dataOf(await pending.rest);
    expect(pending.status).toBe(200);
    expect(answer.chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(answer.done).toBe(true); // finished, not cut off
    expect(answer.chunks.some((c) => c.choices[0]?.finish_reason)).toBe(true);
    expect(await code).toBe(0);
  }, 60_000);

  test("SIGTERM with nothing in flight exits 0 at once, not after the shutdown grace period", async () => {
    const s = await serve();
    expect((await post(s, { messages: [{ role: "user", content: "Hi" }], max_tokens: 2, temperature: 0 })).status).toBe(200);
    const signalled = performance.now();
    expect(await s.stop()).toBe(0);
    // The grace period for responses still being written is 2 s; a stop that waits it out
    // (its timer left pending after the connections drained) takes all of it.
    expect(performance.now() - signalled).toBeLessThan(1_500);
  }, 60_000);

  test("a client that disconnects mid-stream stops its generation; the server goes on", async () => {
    const s = await serve();
    const abort = new AbortController();
    const r = await fetch(`${s.url}/v1/chat/completions`, {
      method: "POST", signal: abort.signal, headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Write a long story" }], max_tokens: 3000, temperature: 0, stream: true }),
    });
    const reader = r.body!.getReader();
    await reader.read(); // the first chunk arrived: the generation is running
    abort.abort();
    const started = performance.now();
    const next = await post(s, { messages: [{ role: "user", content: "Hi" }], max_tokens: 3, temperature: 0 });
    expect(next.status).toBe(200);
    // The 3,000-token story was cut short: the next answer did not wait for it to finish.
    expect(performance.now() - started).toBeLessThan(20_000);
    expect(await s.stop()).toBe(0);
  }, 60_000);
});

/** A raw SSE body as it arrived: its lines, and which read each came in. */
async function rawStream(r: Response, stop?: (line: string) => boolean): Promise<{ lines: string[]; reads: number[] }> {
  const lines: string[] = [];
  const reads: number[] = [];
  const reader = r.body!.getReader();
  const decoder = new TextDecoder();
  let pending = "";
  for (let read = 0; ; read++) {
    const { value, done } = await reader.read();
    if (done) break;
    pending += decoder.decode(value, { stream: true });
    const parts = pending.split("\n");
    pending = parts.pop()!;
    for (const line of parts) {
      lines.push(line);
      reads.push(read);
      if (stop?.(line)) {
        await reader.cancel();
        return { lines, reads };
      }
    }
  }
  return { lines, reads };
}

const prefillLine = /^: k3 prefill (\d+)\/(\d+) (\d+\.\d{3})s reused=(\d+) from=(\w+)$/;

describe.concurrent("k3 serve: prefill progress in the stream", () => {
  // About 450 prompt ids, fed 4 at a time: a prefill of some 110 chunks.
  const content = Array.from({ length: 40 }, (_, i) => `word${i % 10} and`).join(" ");
  const request = { model: "kimi-k3", messages: [{ role: "user" as const, content }], max_tokens: 8, temperature: 0 };
  const prompt = renderChat(parseChatRequest(JSON.parse(JSON.stringify(request))), tokenizer);
  const chunk = 4;
  const serveChunked = () => serve(["--prefill-chunk", String(chunk)]);
  /** A fresh server's streamed answer to `request` (the first test), for the test after it, which awaits it. */
  const coldAnswer = Promise.withResolvers<{ reasoning: string; content: string } | undefined>();
  const streamed = (s: Served, body: object, signal?: AbortSignal) =>
    fetch(`${s.url}/v1/chat/completions`, { method: "POST", signal, headers: { "content-type": "application/json" }, body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }) });

  test("a comment per chunk, in order, before the first data chunk, totalling the ids the usage says were fed; the openai client reads the same answer", async () => {
    try {
      await progressComments();
    } finally {
      coldAnswer.resolve(undefined); // failed before it had the answer: the test waiting on it fails too, instead of hanging
    }
  }, 60_000);

  async function progressComments() {
    expect(prompt.ids.length).toBeGreaterThan(400);
    const s = await serveChunked();
    const { lines, reads } = await rawStream(await streamed(s, request));
    expect(lines[0]).toBe(": k3 queue 0");
    const firstData = lines.findIndex((l) => l.startsWith("data: "));
    const progress = lines.flatMap((l, i) => (l.startsWith(": k3 prefill") ? [i] : []));
    expect(progress.every((i) => i < firstData)).toBe(true);
    const fed = progress.map((i) => {
      const m = prefillLine.exec(lines[i]!);
      expect(m).not.toBeNull();
      return { fed: Number(m![1]), total: Number(m![2]), seconds: Number(m![3]), reused: Number(m![4]), from: m![5] };
    });
    const data = lines.filter((l) => l.startsWith("data: ") && l !== "data: [DONE]").map((l) => JSON.parse(l.slice(6)));
    const last = data.at(-1) as { usage: { prompt_tokens: number }; k3: { prefilled_ids: number; reused_prompt_ids: number } };
    expect(last.usage.prompt_tokens).toBe(prompt.promptTokens);
    expect(last.k3).toMatchObject({ prefilled_ids: prompt.ids.length, reused_prompt_ids: 0 });
    // Before the first chunk and after every one: 0, 4, 8, ... to the messages' end, then on from there.
    const chunks = Math.ceil(prompt.historyEnd / chunk) + Math.ceil((prompt.ids.length - prompt.historyEnd) / chunk);
    expect(fed).toHaveLength(chunks + 1);
    expect(fed.map((p) => p.total)).toEqual(fed.map(() => last.k3.prefilled_ids));
    expect(fed[0]!.fed).toBe(0);
    expect(fed.at(-1)!.fed).toBe(last.k3.prefilled_ids);
    for (let i = 1; i < fed.length; i++) {
      expect(fed[i]!.fed - fed[i - 1]!.fed).toBeGreaterThan(0);
      expect(fed[i]!.fed - fed[i - 1]!.fed).toBeLessThanOrEqual(chunk);
      expect(fed[i]!.seconds).toBeGreaterThanOrEqual(fed[i - 1]!.seconds);
    }
    expect(fed.every((p) => p.reused === 0 && p.from === "none")).toBe(true);
    // Live: the comments came in many reads, while the prefill ran, not in one piece at its end.
    expect(new Set(progress.map((i) => reads[i])).size).toBeGreaterThan(3);
    // The role chunk opens the reply; what the raw stream says is what the openai client reads.
    expect(data[0].choices[0].delta).toEqual({ role: "assistant" });
    const rawText = (key: string) => data.map((d) => d.choices[0]?.delta?.[key] ?? "").join("");
    const raw = { reasoning: rawText("reasoning_content"), content: rawText("content") };
    coldAnswer.resolve(raw);
    // The same request through the openai client (reusing the messages' end, a shorter prefill, still commented).
    const parsed = await readStream(await client(s).chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } }));
    expect({ reasoning: parsed.reasoning, content: parsed.content }).toEqual(raw);
    expect(parsed.usage).toEqual(last.usage);
    const whole = (await completion(await post(s, request))).choices[0]!.message;
    expect({ reasoning: whole.reasoning_content ?? "", content: whole.content ?? "" }).toEqual(raw);
    // /v1/completions streams its prefill the same way.
    const text = await rawStream(await fetch(`${s.url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: content, max_tokens: 2, stream: true, stream_options: { include_usage: true } }) }));
    const textProgress = text.lines.filter((l) => prefillLine.test(l));
    expect(text.lines.filter(Boolean).slice(0, 2)).toEqual([": k3 queue 0", textProgress[0]!]);
    expect(text.lines.findIndex((l) => l.startsWith("data: "))).toBeGreaterThan(text.lines.indexOf(textProgress.at(-1)!));
    const textUsage = JSON.parse(text.lines.filter((l) => l.startsWith("data: {")).at(-1)!.slice(6)).usage;
    const [, fedText, totalText, , reusedText] = prefillLine.exec(textProgress.at(-1)!)!;
    expect(fedText).toBe(totalText);
    expect(Number(totalText) + Number(reusedText)).toBe(textUsage.prompt_tokens);
    expect(await s.stop()).toBe(0);
  }

  test("a client that goes away during the prefill stops it at the next chunk; the next request is answered as a fresh server answers it", async () => {
    const s = await serveChunked();
    const abort = new AbortController();
    const seen = await rawStream(await streamed(s, request, abort.signal), (line) => Number(prefillLine.exec(line)?.[1] ?? 0) >= 40);
    abort.abort();
    expect(seen.lines.some((l) => l.startsWith("data: "))).toBe(false);
    // The same request again: it goes on from the ids the stopped prefill fed, no more and no fewer.
    const again = await completion(await post(s, request));
    expect(again.k3.reused_from).toBe("live");
    expect(again.k3.reused_prompt_ids).toBeGreaterThanOrEqual(40);
    expect(again.k3.reused_prompt_ids).toBeLessThan(prompt.ids.length / 2); // it stopped well before the end
    expect(again.k3.reused_prompt_ids % chunk).toBe(0);
    expect(again.k3.reused_prompt_ids + again.k3.prefilled_ids).toBe(prompt.ids.length);
    // The answer a fresh server gave the same request (the test before, which reused nothing).
    const cold = await coldAnswer.promise;
    expect(cold).toBeDefined();
    const message = again.choices[0]!.message;
    expect({ reasoning: message.reasoning_content ?? "", content: message.content ?? "" }).toEqual(cold!);
    expect(await s.stop()).toBe(0);
  }, 60_000);

  test("a request queued behind a generation gets its headers and the queue comment at once", async () => {
    const s = await serveChunked();
    const busy = new AbortController();
    let busyDone = false;
    const taking = await taken(s, { messages: [{ role: "user", content: "Write a long story" }], max_tokens: 3000, temperature: 0 }, {}, busy.signal);
    expect(taking.first).toBe(": k3 queue 0");
    const long = taking.rest.then(() => { busyDone = true; }, () => { busyDone = true; });
    const queued = new AbortController();
    const r = await streamed(s, { messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }, queued.signal);
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toBe("text/event-stream");
    const first = await rawStream(r, () => true);
    expect(first.lines).toEqual([": k3 queue 1"]);
    expect(busyDone).toBe(false); // it came while the other generation still ran
    queued.abort();
    busy.abort();
    await long;
    expect(await s.stop()).toBe(0);
  }, 60_000);
});

// Alone, after the others: a thousand requests at once keep this process's event loop busy, which
// would delay the other tests' clients, whose checks are about what a server does while they read.
describe("k3 serve under a flood", () => {
  test("hostile traffic: a 100 MB body, 1,000 requests against a queue of 4; memory stays bounded and the next request is answered", async () => {
    // --max-body above the request reader's 64 MB is held to it, and says so: one limit, always 413.
    const s = await serve(["--queue", "4", "--max-body", "200"]);
    expect(s.startupLog).toContain("--max-body 200 is above the 64 MB a request may be: bodies over 64 MB get 413");
    const rss = () => Number(readFileSync(`/proc/${s.child.pid}/status`, "utf8").match(/^VmRSS:\s+(\d+) kB/m)?.[1] ?? 0) * 1024;
    const before = rss();
    const huge = new Uint8Array(100 * 1024 * 1024).fill(0x20);
    const big = await fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: huge });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code: "body_too_large", message: `the body is over the ${64 * 1024 * 1024}-byte limit (--max-body)` });
    const flood = await Promise.all(Array.from({ length: 1000 }, () => post(s, { messages: [{ role: "user", content: "Hi" }], max_tokens: 4, temperature: 0 }).then(async (r) => {
      const body = await r.json() as { error?: { code: string } };
      return r.status === 200 ? "ok" : `${r.status} ${body.error?.code}`;
    })));
    const counts = flood.reduce<Record<string, number>>((acc, x) => ({ ...acc, [x]: (acc[x] ?? 0) + 1 }), {});
    expect(Object.keys(counts).sort()).toEqual(["429 queue_full", "ok"].filter((k) => counts[k]));
    expect(counts.ok).toBeGreaterThanOrEqual(5); // one running + four waiting at least
    // Bounded: the 100 MB body was never held, and the flood leaves nothing behind it.
    expect(rss() - before).toBeLessThan(64 * 1024 * 1024);
    expect((await post(s, { messages: [{ role: "user", content: "Hi" }], max_tokens: 2 })).status).toBe(200);
    expect(await s.stop()).toBe(0);
  }, 60_000);
});
