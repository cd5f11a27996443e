/**
 * The doors agents use (chat.md 4.9), through `dist/k3 serve --demo` with the official clients:
 * `@anthropic-ai/sdk` on `/v1/messages` (and count_tokens) and `openai` on `/v1/responses`.
 * Streamed and non-streamed replies equal (greedy); thinking comes back as thinking blocks and
 * reasoning items; a tool round trip answers in text; a second turn reuses the first's ids;
 * errors come in each API's shape (a missing field, a bad role, a wrong key, an oversize body,
 * a full queue); constrained output goes through these doors too.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { serveDemo, stopAll, type Served } from "../support/serve.ts";

setDefaultTimeout(90_000);

const key = "agent-key";
let server: Served;
let anthropic: Anthropic;
let openai: OpenAI;
beforeAll(async () => {
  server = await serveDemo(["--api-key", key, "--parallel", "2", "--max-body", "1"]);
  anthropic = new Anthropic({ baseURL: server.url, apiKey: key, maxRetries: 0 });
  openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0 });
});
afterAll(stopAll);

const time = { name: "get_time", description: "The time in a city", input_schema: { type: "object" as const, properties: { city: { type: "string", maxLength: 16 } }, required: ["city"] } };
type K3 = { k3: { reused_prompt_ids: number } };

describe("Anthropic Messages", () => {
  const base = { model: "kimi-k3", max_tokens: 200, temperature: 0 };

  test("streamed equals non-streamed; thinking blocks with thinking on; count_tokens equals the reply's input_tokens", async () => {
    const body = { ...base, thinking: { type: "enabled" as const, budget_tokens: 2048 }, messages: [{ role: "user" as const, content: "Tell me about the moon." }] };
    const counted = await anthropic.messages.countTokens({ model: body.model, thinking: body.thinking, messages: body.messages });
    const whole = await anthropic.messages.create(body);
    const streamed = await anthropic.messages.stream(body).finalMessage();
    expect(whole.content.map((b) => b.type)[0]).toBe("thinking");
    expect(streamed.content as unknown).toEqual(whole.content);
    expect([streamed.stop_reason, streamed.usage.output_tokens]).toEqual([whole.stop_reason, whole.usage.output_tokens]);
    // The first request fed the whole prompt; the stream, the same prompt again, reused it.
    expect(whole.usage.input_tokens + (whole.usage.cache_read_input_tokens ?? 0)).toBe(counted.input_tokens);
    expect(streamed.usage.cache_read_input_tokens).toBeGreaterThan(0);
    const off = await anthropic.messages.create({ ...base, messages: body.messages });
    expect(off.content.every((b) => b.type !== "thinking")).toBe(true);
  });

  test("a tool round trip: tool_use, then tool_result, then a text answer that reuses the first turn", async () => {
    const first = await anthropic.messages.create({ ...base, max_tokens: 300, tools: [time], tool_choice: { type: "any" }, messages: [{ role: "user", content: "What time is it in Rome?" }] });
    expect(first.stop_reason).toBe("tool_use");
    const use = first.content.find((b) => b.type === "tool_use");
    // A copy: bun's toMatchObject writes the matchers into the object it checks.
    expect(structuredClone(use)).toMatchObject({ type: "tool_use", name: "get_time", input: { city: expect.any(String) } });
    const second = await anthropic.messages.create({
      ...base, tools: [time],
      messages: [
        { role: "user", content: "What time is it in Rome?" },
        { role: "assistant", content: first.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: (use as { id: string }).id, content: "It is ten o'clock." }] },
      ],
    });
    expect(second.content.some((b) => b.type === "text")).toBe(true);
    expect(["end_turn", "max_tokens", "tool_use"]).toContain(second.stop_reason as string);
    expect((second as unknown as K3).k3.reused_prompt_ids).toBeGreaterThan(0);
    expect(second.usage.cache_read_input_tokens).toBe((second as unknown as K3).k3.reused_prompt_ids);
  });

  test("tool_choice tool: exactly that tool, with arguments that follow its schema", async () => {
    const reply = await anthropic.messages.create({ ...base, max_tokens: 300, tools: [time], tool_choice: { type: "tool", name: "get_time" }, messages: [{ role: "user", content: "Hello" }] });
    const uses = reply.content.filter((b) => b.type === "tool_use");
    expect(uses.map((b) => (b as { name: string }).name)).toEqual(["get_time"]);
    expect(((uses[0] as { input: { city: string } }).input.city.length)).toBeLessThanOrEqual(16);
  });

  test("errors in Anthropic's shape: a missing max_tokens, a bad role, a wrong key, an oversize body, a full queue", async () => {
    const post = (body: unknown, headers: Record<string, string> = { "x-api-key": key }) =>
      fetch(`${server.url}/v1/messages?beta=true`, { method: "POST", headers: { "content-type": "application/json", "anthropic-version": "2023-06-01", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });
    const shape = async (r: Response) => ({ status: r.status, body: (await r.json()) as { type: string; error: { type: string; message: string } } });
    const missing = await shape(await post({ model: "kimi-k3", messages: [{ role: "user", content: "x" }] }));
    expect(missing).toMatchObject({ status: 400, body: { type: "error", error: { type: "invalid_request_error", message: "max_tokens: Field required" } } });
    const role = await shape(await post({ ...base, messages: [{ role: "robot", content: "x" }] }));
    expect(role).toMatchObject({ status: 400, body: { type: "error", error: { type: "invalid_request_error" } } });
    expect(role.body.error.message).toContain('"robot" is not "user" or "assistant"');
    expect(await shape(await post({ ...base, messages: [] }, { "x-api-key": "wrong" }))).toMatchObject({ status: 401, body: { error: { type: "authentication_error" } } });
    expect(await shape(await post("x".repeat(1_100_000)))).toMatchObject({ status: 413, body: { error: { type: "request_too_large" } } });
    const sdkError = await anthropic.messages.create({ model: "kimi-k3", max_tokens: 5, messages: [{ role: "user", content: "x" }], stop_sequences: [""] }).catch((e: unknown) => e);
    expect(sdkError).toBeInstanceOf(Anthropic.BadRequestError);
  });
});

describe("OpenAI Responses", () => {
  const base = { model: "kimi-k3", max_output_tokens: 200, temperature: 0 };

  test("streamed equals non-streamed; a reasoning item with thinking on, none with effort none", async () => {
    const body = { ...base, input: "Tell me about the sun.", reasoning: { effort: "low" as const } };
    const whole = await openai.responses.create(body);
    const stream = openai.responses.stream(body);
    for await (const _ of stream) {
      // drained: finalResponse is built from the events
    }
    const streamed = await stream.finalResponse();
    // The stream helper adds `parsed: null` to text parts; the ids are fresh per reply.
    const strip = (r: OpenAI.Responses.Response) => JSON.parse(JSON.stringify(r.output.map((item) => ({ ...item, id: "" })), (k, v) => (k === "parsed" ? undefined : v))) as unknown;
    expect(strip(streamed)).toEqual(strip(whole));
    expect(streamed.output_text).toBe(whole.output_text);
    expect(whole.output[0]?.type).toBe("reasoning");
    expect(whole.usage?.output_tokens_details.reasoning_tokens).toBeGreaterThan(0);
    const off = await openai.responses.create({ ...body, reasoning: { effort: "none" } });
    expect(off.output.every((item) => item.type !== "reasoning")).toBe(true);
  });

  test("a tool round trip: function_call, then function_call_output, then text, reusing the first turn", async () => {
    const tools = [{ type: "function" as const, name: time.name, description: time.description, parameters: time.input_schema, strict: true }];
    const input: OpenAI.Responses.ResponseInput = [{ role: "user", content: "What time is it in Rome?" }];
    const first = await openai.responses.create({ ...base, max_output_tokens: 300, input, tools, tool_choice: "required" });
    const call = first.output.find((item) => item.type === "function_call") as OpenAI.Responses.ResponseFunctionToolCall;
    expect(structuredClone(call)).toMatchObject({ name: "get_time", call_id: expect.any(String) });
    expect(typeof (JSON.parse(call.arguments) as { city: unknown }).city).toBe("string");
    const second = await openai.responses.create({ ...base, tools, input: [...input, ...first.output as OpenAI.Responses.ResponseInputItem[], { type: "function_call_output", call_id: call.call_id, output: "It is ten o'clock." }] });
    expect(second.output.some((item) => item.type === "message")).toBe(true);
    expect(second.usage?.input_tokens_details.cached_tokens).toBeGreaterThan(0);
  });

  test("text.format json_schema: JSON that validates", async () => {
    const schema = { type: "object", properties: { answer: { type: "integer", minimum: 0, maximum: 99 } }, required: ["answer"], additionalProperties: false };
    const reply = await openai.responses.create({ ...base, input: "What is 2 plus 3?", reasoning: { effort: "none" }, text: { format: { type: "json_schema", name: "sum", schema, strict: true } } });
    const value = JSON.parse(reply.output_text) as { answer: number };
    expect(Number.isInteger(value.answer) && value.answer >= 0 && value.answer <= 99).toBe(true);
  });

  test("errors in OpenAI's shape: previous_response_id, a bad role, an unknown parameter, a wrong key", async () => {
    const error = async (p: Promise<unknown>) => (await p.catch((e: unknown) => e)) as InstanceType<typeof OpenAI.APIError>;
    const previous = await error(openai.responses.create({ ...base, input: "x", previous_response_id: "resp_1" }));
    expect([previous.status, previous.param]).toEqual([400, "previous_response_id"]);
    const role = await error(openai.responses.create({ ...base, input: [{ role: "robot" as "user", content: "x" }] }));
    expect([role.status, role.message]).toEqual([400, expect.stringContaining('"robot" is not one of')]);
    const unknown = await error(openai.responses.create({ ...base, input: "x", frobnicate: 1 } as OpenAI.Responses.ResponseCreateParamsNonStreaming));
    expect([unknown.status, unknown.param]).toEqual([400, "frobnicate"]);
    const wrong = await error(new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "wrong", maxRetries: 0 }).responses.create({ ...base, input: "x" }));
    expect(wrong.status).toBe(401);
  });
});

describe("one conversation across doors", () => {
  test("a first turn on chat completions, the next on Messages and then Responses: each reuses the turn before", async () => {
    const user1 = "Tell me about the moon.";
    const first = await openai.chat.completions.create({ model: "kimi-k3", messages: [{ role: "user", content: user1 }], max_tokens: 60, temperature: 0, thinking: { type: "enabled", effort: "high" } } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const said = first.choices[0]!.message as { content: string | null; reasoning_content?: string };
    const firstPrompt = first.usage!.prompt_tokens;
    const second = await anthropic.messages.create({
      model: "kimi-k3", max_tokens: 40, temperature: 0, thinking: { type: "enabled", budget_tokens: 8000 },
      messages: [
        { role: "user", content: user1 },
        { role: "assistant", content: [{ type: "thinking", thinking: said.reasoning_content ?? "", signature: "" }, { type: "text", text: said.content ?? "" }] },
        { role: "user", content: "And the sun?" },
      ],
    } as Anthropic.MessageCreateParamsNonStreaming);
    // The whole first prompt, at least, came from the state the chat-completions turn left.
    expect(second.usage.cache_read_input_tokens ?? 0).toBeGreaterThanOrEqual(firstPrompt);
    const third = await openai.responses.create({
      model: "kimi-k3", max_output_tokens: 20, temperature: 0, reasoning: { effort: "high" },
      input: [
        { role: "user", content: user1 },
        { type: "reasoning", id: "rs_1", summary: [{ type: "summary_text", text: said.reasoning_content ?? "" }] },
        { role: "assistant", content: said.content ?? "" },
        { role: "user", content: "And the sun?" },
        ...second.content.flatMap((b): OpenAI.Responses.ResponseInputItem[] => (b.type === "thinking" ? [{ type: "reasoning", id: "rs_2", summary: [{ type: "summary_text", text: b.thinking }] }] : b.type === "text" ? [{ role: "assistant", content: b.text }] : [])),
        { role: "user", content: "Thanks." },
      ],
    });
    expect(third.usage!.input_tokens_details.cached_tokens).toBeGreaterThan(second.usage.input_tokens + (second.usage.cache_read_input_tokens ?? 0) - 10);
  });
});

describe("what the agent CLIs send", () => {
  test("max_tokens beyond the context is cut to the room (Claude Code sends 32,000); a tool schema's unenforceable keyword is listed, not refused", async () => {
    const tool = { ...time, input_schema: { ...time.input_schema, properties: { city: { type: "string", allOf: [{ pattern: "^[^\\n]*$" }, { maxLength: 30 }] } } } };
    // Plain fetch: the SDK will not send a non-streamed request this large, and its stream helper keeps no `k3`.
    const r = await fetch(`${server.url}/v1/messages`, {
      method: "POST", headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ model: "kimi-k3", max_tokens: 32000, temperature: 0, tools: [tool], tool_choice: { type: "any" }, messages: [{ role: "user", content: "What time is it in Rome?" }] }),
    });
    const reply = (await r.json()) as { stop_reason: string; k3: { constraint: { unenforced: string[] } } };
    expect([r.status, reply.stop_reason]).toEqual([200, "tool_use"]);
    expect(reply.k3.constraint.unenforced).toEqual(["tools[0].function.parameters.properties.city.allOf"]);
  });

  test("Codex's tools: a namespace's functions are offered by name; hosted tools (web_search) are left out", async () => {
    const fn = { type: "function", name: "get_time", description: time.description, parameters: time.input_schema, strict: false };
    const reply = await openai.responses.create({
      model: "kimi-k3", input: "What time is it in Rome?", max_output_tokens: 300, temperature: 0, tool_choice: "required", reasoning: { effort: "none" },
      tools: [{ type: "namespace", name: "clock", description: "clock tools", tools: [fn] }, { type: "web_search" }] as unknown as OpenAI.Responses.Tool[],
    });
    expect(reply.output.filter((item) => item.type === "function_call").map((item) => (item as { name: string }).name)).toEqual(["get_time"]);
  });
});

describe("a full queue, in each API's shape", () => {
  test("Messages says 529 overloaded_error, Responses 429", async () => {
    const busy = await serveDemo(["--queue", "0"]);
    const long = (path: string, body: object) => fetch(`${busy.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    const running = long("/v1/chat/completions", { messages: [{ role: "user", content: "Tell me a long story." }], max_tokens: 400, stream: true });
    const first = await running;
    const reader = first.body!.getReader();
    await reader.read(); // taken: it holds the one generation slot
    const [messages, responses] = await Promise.all([
      long("/v1/messages", { model: "kimi-k3", max_tokens: 5, messages: [{ role: "user", content: "x" }] }),
      long("/v1/responses", { model: "kimi-k3", input: "x" }),
    ]);
    expect([messages.status, ((await messages.json()) as { error: { type: string } }).error.type]).toEqual([529, "overloaded_error"]);
    expect([responses.status, ((await responses.json()) as { error: { code: string } }).error.code]).toEqual([429, "queue_full"]);
    await reader.cancel();
    expect(await busy.stop()).toBe(0);
  });
});
