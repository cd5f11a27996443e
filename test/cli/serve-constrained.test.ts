/**
 * Constrained replies and log-probabilities through `dist/k3 serve --demo`, spoken to with the
 * official `openai` client (chat.md 4.8): the demo model is weak, so whatever it would say, a
 * reply that ends is JSON that validates (ajv, JSON Schema 2020-12 with formats), tool calls name
 * declared tools with valid arguments, the tool-choice rules hold, a stream concatenates to the
 * non-streamed reply, what cannot be enforced is a 400 naming the keyword, and logprobs have
 * OpenAI's shape and agree between the endpoints.
 *
 * The schemas are the in-process suite's (test/unit/chat/reply-constraint.test.ts walks them
 * unbounded), with strings, arrays and integers given bounds here: left unbounded, a weak model
 * writes one string until the budget ends, which is a `length` reply and proves nothing.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import Ajv from "ajv/dist/2020";
import addFormats from "ajv-formats";
import OpenAI from "openai";
import { openaiClient, readStream } from "../support/openai.ts";
import { constraintSchemas } from "../support/constraint-schemas.ts";
import { serveDemo, stopAll, type Served } from "../support/serve.ts";
import { parseChatRequest, renderChat } from "../../src/chat/index.ts";
import { loadTokenizer } from "../../src/tokenizer/index.ts";
import { demoDir } from "../support/demo.ts";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(90_000);

const ajv = new Ajv({ strict: false });
addFormats(ajv);

type Schema = { [key: string]: unknown };

/** The schema with every unbounded string, array and integer given a bound. */
function bounded(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(bounded);
  if (typeof schema !== "object" || schema === null) return schema;
  const s = Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, k === "enum" || k === "const" ? v : bounded(v)])) as Schema;
  const types = Array.isArray(s.type) ? s.type : [s.type];
  const free = s.enum === undefined && s.const === undefined && s.format === undefined && s.pattern === undefined;
  if (types.includes("string") && free && s.maxLength === undefined) s.maxLength = 12;
  if (types.includes("array") && s.maxItems === undefined) s.maxItems = 3;
  if (s.type === "integer" && s.minimum === undefined && s.exclusiveMinimum === undefined) s.minimum = 0;
  if (s.type === "integer" && s.maximum === undefined && s.exclusiveMaximum === undefined) s.maximum = 999;
  return s;
}

let server: Served;
let client: OpenAI;
beforeAll(async () => {
  server = await serveDemo(["--parallel", "4", "--queue", "64"]);
  client = openaiClient(server);
});
afterAll(stopAll);

const user = (content: string) => [{ role: "user" as const, content }];
const off = { thinking: { type: "disabled" } } as Record<string, unknown>;

describe("response_format json_schema: every reply that ends validates", () => {
  const prompts = ["Tell me about a cat.", "What is 2 plus 3?", "Describe your day."];
  const cases = Object.entries(constraintSchemas).flatMap(([name, schema], i) => {
    const runs = [{ temperature: 0, seed: undefined as number | undefined }];
    if (i % 6 === 0) runs.push({ temperature: 1, seed: 1 }, { temperature: 1, seed: 2 });
    return runs.map((r) => ({ name, schema: bounded(schema) as Schema, prompt: prompts[i % prompts.length] as string, ...r }));
  });

  test(`${cases.length} requests over ${Object.keys(constraintSchemas).length} schemas`, async () => {
    const results = await Promise.all(cases.map(async (c) => {
      const reply = await client.chat.completions.create({
        model: "kimi-k3", messages: user(c.prompt), max_tokens: 80, temperature: c.temperature, ...(c.seed !== undefined && { seed: c.seed }),
        response_format: { type: "json_schema", json_schema: { name: c.name, schema: c.schema, strict: true } }, ...off,
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      return { c, choice: reply.choices[0] as OpenAI.ChatCompletion.Choice };
    }));
    let stopped = 0;
    for (const { c, choice } of results) {
      expect(choice.message.tool_calls ?? []).toEqual([]);
      if (choice.finish_reason === "length") continue; // the one way an invalid reply may come back, and it says so
      expect(choice.finish_reason).toBe("stop");
      stopped++;
      const validate = ajv.compile(c.schema);
      const value = JSON.parse(choice.message.content ?? "") as unknown;
      if (!validate(value)) throw new Error(`${c.name} (t=${c.temperature}): ${choice.message.content}: ${ajv.errorsText(validate.errors)}`);
    }
    expect(stopped).toBeGreaterThanOrEqual(Math.ceil(results.length * 0.8));
  });

  test("json_object: JSON objects, with thinking on (the think section closes first)", async () => {
    // An object with no bounds lets the weak demo write one string until the budget ends: of these, greedy ends the first by itself.
    const prompts = ["What do cats eat?", "Name an animal.", "Who are you?"];
    const replies = await Promise.all(prompts.map((p) => client.chat.completions.create({
      model: "kimi-k3", messages: user(p), max_tokens: 300, temperature: 0, response_format: { type: "json_object" },
    })));
    let stopped = 0;
    for (const reply of replies) {
      const choice = reply.choices[0]!;
      expect(typeof (choice.message as { reasoning_content?: string }).reasoning_content).toBe("string");
      if (choice.finish_reason === "length") continue;
      stopped++;
      const value = JSON.parse(choice.message.content ?? "") as unknown;
      expect(typeof value === "object" && value !== null && !Array.isArray(value)).toBe(true);
      expect((reply as unknown as { k3: { constraint: { forced_ids: number } } }).k3.constraint.forced_ids).toBeGreaterThan(5);
    }
    expect(stopped).toBeGreaterThan(0);
  });

  test("a keyword k3 cannot enforce is a 400 naming it, through the client", async () => {
    const error = await client.chat.completions.create({
      model: "kimi-k3", messages: user("Hi"),
      response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { n: { type: "integer", multipleOf: 2 } } } } },
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.BadRequestError);
    const e = error as InstanceType<typeof OpenAI.BadRequestError>;
    expect(e.status).toBe(400);
    expect(e.param).toBe("response_format.json_schema.schema.properties.n.multipleOf");
    expect(e.message).toContain('"multipleOf" is not enforced');
  });
});

const weather = {
  type: "function" as const, function: {
    name: "get_weather", description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 20 }, days: { type: "integer", minimum: 1, maximum: 7 } }, required: ["city"], additionalProperties: false },
  },
};
const time = { type: "function" as const, function: { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET", "PST"] } }, required: ["zone"] } } };
const validators = new Map([weather, time].map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

function checkCalls(choice: OpenAI.ChatCompletion.Choice) {
  const calls = choice.message.tool_calls ?? [];
  for (const call of calls) {
    if (call.type !== "function") throw new Error("not a function call");
    const validate = validators.get(call.function.name);
    if (!validate) throw new Error(`a call to ${call.function.name}, which was not declared`);
    const args = JSON.parse(call.function.arguments) as unknown;
    if (!validate(args)) throw new Error(`${call.function.name}(${call.function.arguments}): ${ajv.errorsText(validate.errors)}`);
  }
  return calls.map((c) => (c.type === "function" ? c.function.name : ""));
}

describe("tool calls", () => {
  const ask = (extra: Record<string, unknown>, temperature = 0, seed?: number) =>
    client.chat.completions.create({
      model: "kimi-k3", messages: user("What time is it in Bath?"), tools: [weather, time], max_tokens: 300, temperature, ...(seed !== undefined && { seed }), ...extra,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);

  test("required: at least one call, each to a declared tool with valid arguments (thinking on and off, seeded)", async () => {
    const replies = await Promise.all([ask({ tool_choice: "required" }), ask({ tool_choice: "required", ...off }), ask({ tool_choice: "required" }, 1, 3)]);
    for (const reply of replies) {
      const choice = reply.choices[0]!;
      expect(choice.finish_reason).toBe("tool_calls");
      expect(checkCalls(choice).length).toBeGreaterThan(0);
    }
  });

  test("a named function: exactly one call, to it (even while thinking)", async () => {
    const named = (name: string) => ({ tool_choice: { type: "function", function: { name } } });
    const [weatherCall, timeCall] = await Promise.all([ask(named("get_weather")), ask({ ...named("get_time"), ...off }, 1, 9)]);
    for (const [reply, name] of [[weatherCall, "get_weather"], [timeCall, "get_time"]] as const) {
      expect(reply.choices[0]!.finish_reason).toBe("tool_calls");
      expect(checkCalls(reply.choices[0]!)).toEqual([name]);
    }
  });

  test("none: no call; auto: only declared tools", async () => {
    const none = (await ask({ tool_choice: "none" })).choices[0]!;
    expect(none.message.tool_calls ?? []).toEqual([]);
    expect(none.finish_reason).toBe("stop");
    for (const reply of await Promise.all([ask({ tool_choice: "auto" }), ask({}, 1, 5)])) checkCalls(reply.choices[0]!);
  });

  test("an undeclared named function is a 400 naming tool_choice.function.name", async () => {
    const error = (await ask({ tool_choice: { type: "function", function: { name: "get_tides" } } }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.BadRequestError>;
    expect(error.status).toBe(400);
    expect(error.param).toBe("tool_choice.function.name");
  });

  test("a constrained stream concatenates to the non-streamed reply", async () => {
    const body = {
      model: "kimi-k3", messages: user("What time is it in Bath?"), tools: [weather, time], tool_choice: "required" as const, max_tokens: 300, temperature: 1, seed: 21,
    };
    const whole = (await client.chat.completions.create(body)).choices[0]!;
    const stream = await client.chat.completions.create({ ...body, stream: true });
    const calls: OpenAI.ChatCompletionChunk.Choice.Delta.ToolCall[] = [];
    const answer = await readStream((async function* () {
      for await (const chunk of stream) {
        for (const call of chunk.choices[0]?.delta.tool_calls ?? []) calls.push(call);
        yield chunk;
      }
    })());
    expect(answer.finish).toBe(whole.finish_reason);
    expect(answer.reasoning).toBe((whole.message as { reasoning_content?: string }).reasoning_content ?? "");
    expect(calls.map((c) => [c.function?.name, c.function?.arguments])).toEqual((whole.message.tool_calls ?? []).map((c) => (c.type === "function" ? [c.function.name, c.function.arguments] : [])));
  });
});

describe("logprobs", () => {
  test("chat, temperature 0: the chosen id is the most probable; alternatives sum to at most 1; the stream carries the same entries", async () => {
    const body = { model: "kimi-k3", messages: user("What is 2 plus 3?"), max_tokens: 40, temperature: 0, logprobs: true, top_logprobs: 5, ...off };
    const reply = await client.chat.completions.create(body as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const content = reply.choices[0]!.logprobs!.content!;
    expect(content.length).toBeGreaterThan(0);
    expect(content.map((e) => e.token).join("")).toBe(reply.choices[0]!.message.content ?? "");
    for (const e of content) {
      expect(e.top_logprobs.length).toBe(5);
      expect(e.logprob).toBe(e.top_logprobs[0]!.logprob);
      expect(e.top_logprobs.reduce((sum, t) => sum + Math.exp(t.logprob), 0)).toBeLessThanOrEqual(1 + 1e-9);
      expect(Buffer.from(e.bytes ?? []).toString("utf8")).toBe(e.token);
    }
    const stream = await client.chat.completions.create({ ...body, stream: true } as OpenAI.ChatCompletionCreateParamsStreaming);
    const streamed: OpenAI.ChatCompletionTokenLogprob[] = [];
    for await (const chunk of stream) streamed.push(...(chunk.choices[0]?.logprobs?.content ?? []));
    expect(streamed).toEqual(content);
  });

  test("top_logprobs without logprobs, and more than 20, are 400s naming the field", async () => {
    for (const [extra, field] of [[{ top_logprobs: 2 }, "top_logprobs"], [{ logprobs: true, top_logprobs: 21 }, "top_logprobs"]] as const) {
      const error = (await client.chat.completions.create({ model: "kimi-k3", messages: user("Hi"), ...extra }).catch((e: unknown) => e)) as InstanceType<typeof OpenAI.BadRequestError>;
      expect(error.status).toBe(400);
      expect(error.param).toBe(field);
    }
  });

  test("the two endpoints agree: chat's content entries are the completions entries of the same prompt ids", async () => {
    const messages = user("What is 2 plus 3?");
    const chat = await client.chat.completions.create({ model: "kimi-k3", messages, max_tokens: 30, temperature: 0, logprobs: true, top_logprobs: 3, ...off } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    const prompt = renderText(messages);
    const text = await client.completions.create({ model: "kimi-k3", prompt, max_tokens: 30, temperature: 0, logprobs: 3 });
    const legacy = text.choices[0]!.logprobs!;
    const entries = chat.choices[0]!.logprobs!.content!;
    expect(entries.length).toBeGreaterThan(0);
    expect(legacy.tokens!.slice(0, entries.length)).toEqual(entries.map((e) => e.token));
    expect(legacy.token_logprobs!.slice(0, entries.length)).toEqual(entries.map((e) => e.logprob));
    expect(Object.keys(legacy.top_logprobs![0]!).length).toBe(3);
    expect(legacy.text_offset![1]).toBe(legacy.tokens![0]!.length);
  });
});

/**
 * The chat prompt of `messages` (thinking off) as text: /v1/completions reads control-token text
 * as control ids, and this prompt encodes back to the very ids the chat endpoint rendered.
 */
function renderText(messages: unknown): string {
  const tokenizer = loadTokenizer(demoDir);
  const rendered = renderChat(parseChatRequest({ messages, ...off }), tokenizer, 8192);
  const text = tokenizer.decodeText(rendered.ids);
  expect(tokenizer.encode(text)).toEqual(rendered.ids);
  return text;
}

describe("k3 chat --json-schema, --tools, --tool-choice, --logprobs", () => {
  const home = tempDir("home");
  const files = tempDir("chat-constraint");
  const write = (name: string, value: unknown) => {
    const path = join(files, name);
    writeFileSync(path, JSON.stringify(value));
    return path;
  };
  const chat = (args: string[]) => k3Async(["chat", "--demo", "--temperature", "0", "--max-tokens", "200", ...args], { env: { HOME: home } });

  test("the answer validates against the schema; the call is to the named tool, with valid arguments; logprobs are in the message", async () => {
    const schema = { type: "object", properties: { answer: { type: "integer", minimum: 0, maximum: 99 } }, required: ["answer"], additionalProperties: false };
    const [json, tool] = await Promise.all([
      chat(["--message", "What is 2 plus 3?", "--no-think", "--json-schema", write("schema.json", schema), "--json", "--logprobs", "2"]),
      chat(["--message", "What time is it in Rome?", "--tools", write("tools.json", [weather, time]), "--tool-choice", "get_weather", "--json"]),
    ]);
    expect([json.code, tool.code]).toEqual([0, 0]);
    const answer = JSON.parse(json.stdout) as { content: string; finish_reason: string; logprobs: { content: { token: string; logprob: number; top_logprobs: unknown[] }[] } };
    expect(answer.finish_reason).toBe("stop");
    expect(ajv.validate(schema, JSON.parse(answer.content))).toBe(true);
    expect(answer.logprobs.content.map((e) => e.token).join("")).toBe(answer.content);
    const called = JSON.parse(tool.stdout) as OpenAI.ChatCompletion.Choice["message"] & { finish_reason: OpenAI.ChatCompletion.Choice["finish_reason"] };
    expect(checkCalls({ index: 0, logprobs: null, finish_reason: called.finish_reason, message: called })).toEqual(["get_weather"]);
  });

  test("refusals: a keyword k3 cannot enforce names the field; --tool-choice without --tools; a file that is not JSON names it", async () => {
    const [keyword, noTools, notJson] = await Promise.all([
      chat(["--message", "x", "--json-schema", write("bad.json", { type: "array", uniqueItems: true })]),
      chat(["--message", "x", "--tool-choice", "required"]),
      (writeFileSync(join(files, "broken.json"), "{"), chat(["--message", "x", "--json-schema", join(files, "broken.json")])),
    ]);
    expect(keyword.code).toBe(2);
    expect(keyword.stderr).toContain('k3: response_format.json_schema.schema.uniqueItems: the JSON Schema keyword "uniqueItems" is not enforced');
    expect([noTools.code, noTools.stderr.trim()]).toEqual([2, "k3: --tool-choice needs --tools FILE (the tools to choose from)"]);
    expect(notJson.code).toBe(2);
    expect(notJson.stderr).toContain("--json-schema");
    expect(notJson.stderr).toContain("broken.json: not JSON");
  });
});

describe("k3 <model_dir> --json-schema: a raw continuation, and --batch lines", () => {
  const files = tempDir("run-schema");
  const schema = { type: "object", properties: { n: { type: "integer", minimum: 0, maximum: 99 }, ok: { type: "boolean" } }, required: ["n", "ok"], additionalProperties: false };
  const schemaFile = join(files, "schema.json");
  writeFileSync(schemaFile, JSON.stringify(schema));

  test("each line's continuation is JSON that validates, ended by <|end_of_msg|>; one run alone gives the same", async () => {
    const batch = join(files, "prompts.txt");
    writeFileSync(batch, ['"The answer is "', '"Data: "', '"x"'].join("\n") + "\n");
    const common = ["--tok", demoDir, "--json-schema", schemaFile, "--gen", "60"];
    const [many, one] = await Promise.all([
      k3Async([demoDir, "--batch", batch, "--parallel", "3", ...common]),
      k3Async([demoDir, "--prompt", "The answer is ", ...common, "--out", "-"]),
    ]);
    expect([many.code, one.code]).toEqual([0, 0]);
    const lines = many.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l) as { generated_ids: number[]; finish_reason: string });
    const tokenizer = loadTokenizer(demoDir);
    for (const line of lines) {
      expect(line.finish_reason).toBe("stop");
      const text = tokenizer.decodeText(line.generated_ids.slice(0, -1));
      expect(ajv.validate(schema, JSON.parse(text))).toBe(true);
    }
    expect((JSON.parse(one.stdout) as { generated_ids: number[] }).generated_ids).toEqual(lines[0]!.generated_ids);
  });

  test("refusals: without --tok; a keyword k3 cannot enforce names it", async () => {
    const noTok = await k3Async([demoDir, "--ids", "1,2", "--json-schema", schemaFile]);
    expect([noTok.code, noTok.stderr.trim()]).toEqual([2, "k3: --json-schema needs --tok DIR: the grammar is over the tokenizer's pieces"]);
    const bad = join(files, "bad.json");
    writeFileSync(bad, JSON.stringify({ type: "string", not: { const: "x" } }));
    const refused = await k3Async([demoDir, "--tok", demoDir, "--prompt", "x", "--json-schema", bad]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('k3: --json-schema.not: the JSON Schema keyword "not" is not enforced');
  });
});
