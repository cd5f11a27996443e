/**
 * The server's HTTP path driven by a scripted generation source: crafted id sequences (a
 * reasoning/content split, two tool calls, a call truncated mid-argument, spelled markers, a stop
 * inside the reasoning) go through the real parser, the real JSON and SSE responses, and the
 * official `openai` client's parsing, streaming and not.
 */
import { afterAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { controlIds } from "../../../src/chat/specials.ts";
import { startServer, type RunningServer } from "../../../src/serve/http.ts";
import type { GenerationSource } from "../../../src/session/reply.ts";
import type { TurnOptions, TurnResult } from "../../../src/session/conversation.ts";
import { loadTokenizer } from "../../../src/tokenizer/index.ts";
import { chatTokenizerDir } from "../../support/chat-fixture.ts";

const tok = loadTokenizer(chatTokenizerDir);
const ctl = controlIds(tok);

type Part = string | "<open>" | "<close>" | "<sep>" | "<end>";
const ids = (...parts: Part[]): number[] =>
  parts.flatMap((p) =>
    p === "<open>" ? [ctl.open] : p === "<close>" ? [ctl.close] : p === "<sep>" ? [ctl.sep] : p === "<end>" ? [ctl.endOfMessage] : tok.encode(p, { ordinary: true }));
const open = (name: string, attrs: Record<string, string> = {}): Part[] =>
  ["<open>", name, ...Object.entries(attrs).flatMap(([k, v]): Part[] => [` ${k}`, "=\"", v, "\""]), "<sep>"];
const close = (name: string): Part[] => ["<close>", name, "<sep>"];
const arg = (key: string, type: string, value: string): Part[] => [...open("argument", { key, type }), value, ...close("argument")];
const call = (tool: string, index: number, ...body: Part[]): Part[] => [...open("call", { tool, index: String(index) }), ...body, ...close("call")];

/** Replies with the next script, id by id, through the same callbacks the model's conversation uses. */
class ScriptedSource implements GenerationSource {
  readonly capacity = 4096;
  readonly #scripts: number[][];

  constructor(scripts: number[][]) {
    this.#scripts = scripts;
  }

  async turn(prompt: { ids: readonly number[] }, options: TurnOptions): Promise<TurnResult> {
    const script = this.#scripts.shift() ?? [];
    const generated: number[] = [];
    let finish: TurnResult["finish"] = "length";
    for (const id of script.slice(0, options.maxNewTokens)) {
      generated.push(id);
      if (options.onToken?.(id) === "stop" || options.stopIds.has(id)) {
        finish = "stop";
        break;
      }
    }
    return { generated, finish, fedPromptIds: prompt.ids.length, reusedPromptIds: 0, reusedFrom: "none", prefillSeconds: 0, decodeSeconds: 0 };
  }
}

const servers: RunningServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.stop();
});

/** A server on a free loopback port whose replies are `script`, once for JSON and once for SSE. */
function serving(script: number[]): OpenAI {
  const running = startServer(new ScriptedSource([script, script]), tok, {
    host: "127.0.0.1", port: 0, apiKey: undefined, modelName: "kimi-k3", maxBodyBytes: 1 << 20, queue: 4, defaultMaxTokens: 512,
  });
  servers.push(running);
  return new OpenAI({ baseURL: `${running.url}/v1`, apiKey: "unused", maxRetries: 0 });
}

interface Seen {
  reasoning: string | null;
  content: string | null;
  calls: { name: string; arguments: string }[];
  finish: string | null;
}

/** The same request as JSON and as SSE, folded the way a client folds it. */
async function both(client: OpenAI): Promise<[Seen, Seen]> {
  const request = { model: "kimi-k3", messages: [{ role: "user" as const, content: "Go" }] };
  const whole = await client.chat.completions.create(request);
  const m = whole.choices[0]!.message as unknown as { content: string | null; reasoning_content: string | null; tool_calls?: { function: { name: string; arguments: string } }[] };
  const json: Seen = {
    reasoning: m.reasoning_content, content: m.content,
    calls: (m.tool_calls ?? []).map((c) => ({ name: c.function.name, arguments: c.function.arguments })), finish: whole.choices[0]!.finish_reason,
  };
  let reasoning = "";
  let content = "";
  const calls: { name: string; arguments: string }[] = [];
  let finish: string | null = null;
  for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) {
    const choice = chunk.choices[0];
    const delta = (choice?.delta ?? {}) as { content?: string; reasoning_content?: string; tool_calls?: { function?: { name?: string; arguments?: string } }[] };
    reasoning += delta.reasoning_content ?? "";
    content += delta.content ?? "";
    for (const c of delta.tool_calls ?? []) calls.push({ name: c.function?.name ?? "", arguments: c.function?.arguments ?? "" });
    finish = choice?.finish_reason ?? finish;
  }
  return [json, { reasoning, content: content === "" ? null : content, calls, finish }];
}

describe("the HTTP path on crafted replies (openai client)", () => {
  test("reasoning then content: split into reasoning_content and content, finish stop", async () => {
    const [json, sse] = await both(serving(ids("Let me think.", ...close("think"), ...open("response"), "Hello world", ...close("response"), "<end>")));
    expect(json).toEqual({ reasoning: "Let me think.", content: "Hello world", calls: [], finish: "stop" });
    expect(sse).toEqual(json);
  });

  test("two tool calls: finish tool_calls, arguments keep the model's numbers", async () => {
    const tools = [...open("tools"), ...call("get_weather", 1, ...arg("city", "string", "Paris"), ...arg("days", "number", "2")), ...call("now", 2), ...close("tools")];
    const [json, sse] = await both(serving(ids("r", ...close("think"), ...open("response"), "Checking.", ...close("response"), ...tools, ...close("message"), "<end>")));
    expect(json.calls).toEqual([{ name: "get_weather", arguments: "{\"city\":\"Paris\",\"days\":2}" }, { name: "now", arguments: "{}" }]);
    expect(json.finish).toBe("tool_calls");
    expect(json.content).toBe("Checking.");
    expect(sse).toEqual(json);
  });

  test("a call truncated mid-argument is dropped; the reply ends by length", async () => {
    const script = ids("r", ...close("think"), ...open("tools"), ...open("call", { tool: "f", index: "1" }), ...open("argument", { key: "a", type: "string" }), "unfinished");
    const [json, sse] = await both(serving(script));
    expect(json.calls).toEqual([]);
    expect(json.finish).toBe("length");
    expect(sse).toEqual(json);
  });

  test("markers spelled with ordinary tokens stay text", async () => {
    const [json, sse] = await both(serving(ids(...close("think"), ...open("response"), "<|close|>response<|sep|> is text", ...close("response"), "<end>")));
    expect(json.content).toBe("<|close|>response<|sep|> is text");
    expect(json.finish).toBe("stop");
    expect(sse).toEqual(json);
  });

  test("a stop id inside the reasoning ends the reply: content null, finish stop", async () => {
    const [json, sse] = await both(serving(ids("Still thinking", "<end>", "never seen")));
    expect(json).toEqual({ reasoning: "Still thinking", content: null, calls: [], finish: "stop" });
    expect(sse).toEqual(json);
  });
});
