/**
 * The generation fields of a request (`n`, `logprobs`, the reply's length, `stop`, `stream`,
 * `stream_options`, the sampling knobs) are read by one reader for both completion endpoints
 * (src/chat/request-generation.ts): each hostile value gets the same verdict, naming the same
 * field with the same words, from /v1/chat/completions' parser and /v1/completions' parser.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { parseChatRequest } from "../../../src/chat/request.ts";
import { K3Error } from "../../../src/errors.ts";
import { parseTextRequest } from "../../../src/serve/text-completion.ts";
import { loadTokenizer } from "../../../src/tokenizer/index.ts";
import { chatTokenizerDir } from "../../support/chat-fixture.ts";

const tokenizer = loadTokenizer(chatTokenizerDir);
const utf8 = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

type Verdict = "ok" | { param: string | undefined; message: string };

function verdict(read: () => unknown): Verdict {
  try {
    read();
    return "ok";
  } catch (error) {
    if (!(error instanceof K3Error)) throw error;
    return { param: error.field, message: error.message };
  }
}

const viaChat = (fields: Record<string, unknown>) =>
  verdict(() => parseChatRequest(utf8({ messages: [{ role: "user", content: "Hi" }], ...fields })));
const viaText = (fields: Record<string, unknown>) => verdict(() => parseTextRequest(utf8({ prompt: "Once", ...fields }), tokenizer, 4096));

describe("one reader of the generation fields for both endpoints", () => {
  const cases: [string, Record<string, unknown>, string | undefined][] = [
    // the fields, and the param a refusal names (undefined: accepted)
    ["n 1", { n: 1 }, undefined],
    ["n 2", { n: 2 }, undefined],
    ["n 0", { n: 0 }, "n"],
    ["n 257 (beyond the request limit)", { n: 257 }, "n"],
    ["n 1.5", { n: 1.5 }, "n"],
    ["n as text", { n: "1" }, "n"],
    ["max_tokens 1", { max_tokens: 1 }, undefined],
    ["max_tokens 0", { max_tokens: 0 }, "max_tokens"],
    ["max_tokens 1.5", { max_tokens: 1.5 }, "max_tokens"],
    ["max_tokens as text", { max_tokens: "8" }, "max_tokens"],
    ["stop as a string", { stop: "END" }, undefined],
    ["stop as a list", { stop: ["a", "b"] }, undefined],
    ["stop null", { stop: null }, undefined],
    ["stop empty string", { stop: "" }, "stop"],
    ["stop with an empty item", { stop: ["a", ""] }, "stop[1]"],
    ["stop with a number", { stop: ["a", 3] }, "stop[1]"],
    ["stop as a number", { stop: 3 }, "stop"],
    ["stream true", { stream: true }, undefined],
    ["stream as text", { stream: "yes" }, "stream"],
    ["stream_options as text", { stream_options: "x" }, "stream_options"],
    ["include_usage as a number", { stream_options: { include_usage: 1 } }, "stream_options.include_usage"],
    ["temperature out of range", { temperature: 2.5 }, "temperature"],
    ["top_k -1 (off)", { top_k: -1 }, undefined],
    ["seed too large", { seed: 2 ** 53 }, "seed"],
    ["logprobs null", { logprobs: null }, undefined],
  ];
  for (const [label, fields, param] of cases) {
    test(label, () => {
      const chat = viaChat(fields);
      expect(viaText(fields)).toEqual(chat);
      if (param === undefined) expect(chat).toBe("ok");
      else expect(chat).toMatchObject({ param });
    });
  }

  test("log-probabilities in each endpoint's shape: chat's logprobs and top_logprobs 0-20, completions' legacy logprobs 0-5", () => {
    const chatTop = (fields: Record<string, unknown>) => parseChatRequest(utf8({ messages: [{ role: "user", content: "Hi" }], ...fields })).logprobs;
    const textTop = (fields: Record<string, unknown>) => parseTextRequest(utf8({ prompt: "Once", ...fields }), tokenizer, 4096).logprobs;
    expect([chatTop({}), chatTop({ logprobs: false }), chatTop({ logprobs: true }), chatTop({ logprobs: true, top_logprobs: 20 })]).toEqual([undefined, undefined, 0, 20]);
    expect([textTop({}), textTop({ logprobs: 0 }), textTop({ logprobs: 5 })]).toEqual([undefined, 0, 5]);
    for (const [fields, param, message] of [
      [{ logprobs: 2 }, "logprobs", /expected true or false/],
      [{ top_logprobs: 3 }, "top_logprobs", /needs logprobs: true/],
      [{ logprobs: false, top_logprobs: 3 }, "top_logprobs", /needs logprobs: true/],
      [{ logprobs: true, top_logprobs: 21 }, "top_logprobs", /20/],
      [{ logprobs: true, top_logprobs: 1.5 }, "top_logprobs", /whole number/],
    ] as const) expect(viaChat(fields)).toMatchObject({ param, message: expect.stringMatching(message) });
    for (const [fields, param, message] of [
      [{ logprobs: true }, "logprobs", /expected a number/],
      [{ logprobs: 6 }, "logprobs", /5/],
      [{ logprobs: -1 }, "logprobs", /0/],
      [{ top_logprobs: 2 }, "top_logprobs", /chat-completions field/],
    ] as const) expect(viaText(fields)).toMatchObject({ param, message: expect.stringMatching(message) });
  });

  test("each endpoint keeps its own: max_completion_tokens is chat's name, the prompt is text's", () => {
    expect(viaChat({ max_completion_tokens: 0 })).toMatchObject({ param: "max_completion_tokens" });
    expect(viaText({ max_completion_tokens: 0 })).toBe("ok"); // not a /v1/completions field: ignored, as OpenAI's unknown fields are
    expect(verdict(() => parseTextRequest(utf8({ prompt: "" }), tokenizer, 4096))).toMatchObject({ param: "prompt" });
    expect(verdict(() => parseTextRequest(utf8({ prompt: 5 }), tokenizer, 4096))).toMatchObject({ param: "prompt" });
    const read = parseTextRequest(utf8({ prompt: "Once", stop: "x", stream: true, stream_options: { include_usage: true }, max_tokens: 3 }), tokenizer, 4096);
    expect(read).toMatchObject({ stop: ["x"], stream: true, includeUsage: true, maxTokens: 3 });
  });
});

describe("the request limits of one table (src/input-limits.ts)", () => {
  test("more messages than a request may hold are refused, naming messages, before any is read", async () => {
    const { inputLimits } = await import("../../../src/input-limits.ts");
    const many = Array.from({ length: inputLimits.requestMessages + 1 }, () => 0); // not even messages: the count is checked first
    expect(viaChat({ messages: many })).toEqual({ param: "messages", message: `messages: ${many.length} messages, more than the ${inputLimits.requestMessages} a request may hold` });
  });
});
