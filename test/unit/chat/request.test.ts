/**
 * parseChatRequest (chat.md 4.2): every request the spec says to refuse is a usage error (exit 2)
 * whose one line names the field, and what passes comes out typed.
 */
import { describe, expect, test } from "bun:test";
import { parseChatRequest } from "../../../src/chat/index.ts";
import { REFUSALS } from "../../support/chat-refusals.ts";
import { refusal } from "../../support/chat.ts";

describe("refusals: one line naming the field, exit 2", () => {
  for (const { name, request, message } of REFUSALS) {
    test(name, () => {
      expect(refusal(request)).toStartWith(message);
    });
  }

  test("a client's value in a message is quoted and shortened, so it cannot break the line", () => {
    const message = refusal({ messages: [{ role: `evil\nrole${"x".repeat(500)}`, content: "x" }] });
    expect(message).toStartWith('messages[0].role: "evil\\nrole');
    expect(message.length).toBeLessThan(200);
  });
});

describe("what passes comes out typed", () => {
  const hi = { role: "user", content: "hi" };

  test("sampling, limits, stop and streaming fields", () => {
    const request = parseChatRequest(JSON.stringify({
      model: "kimi-k3", messages: [hi], temperature: 1.0, top_p: 0.95, top_k: 40, min_p: 0.05, seed: 7,
      presence_penalty: 0, frequency_penalty: -0.5, max_tokens: 100, max_completion_tokens: 50, stop: "END",
      stream: true, stream_options: { include_usage: true }, n: 1,
    }));
    expect(request.model).toBe("kimi-k3");
    expect(request.sampling).toEqual({ temperature: 1, topP: 0.95, topK: 40, minP: 0.05, seed: 7, presencePenalty: 0, frequencyPenalty: -0.5 });
    expect(request.maxTokens).toBe(50);
    expect(request.stop).toEqual(["END"]);
    expect([request.stream, request.includeUsage]).toEqual([true, true]);
  });

  test("defaults: thinking on at effort max, tool_choice auto, text format, nothing else set", () => {
    const request = parseChatRequest(new TextEncoder().encode(JSON.stringify({ messages: [hi] })));
    expect([request.thinking, request.effort, request.toolChoice, request.responseFormat]).toEqual([true, "max", "auto", { type: "text" }]);
    expect([request.maxTokens, request.stop, request.stream, request.notes]).toEqual([undefined, [], false, []]);
  });

  test("messages keep their kind, name, parts, reasoning, calls and results", () => {
    const request = parseChatRequest(JSON.stringify({
      tool_choice: { type: "function", function: { name: "f" } },
      tools: [{ type: "function", function: { name: "f", description: "d", strict: true } }],
      messages: [
        { role: "system", content: [{ type: "text", text: "a" }, { type: "text", text: "b" }], name: "" },
        { role: "assistant", content: null, reasoning: "r", tool_calls: [{ id: "c1", function: { name: "f", arguments: "{\"x\": 1}" } }] },
        { role: "tool", id: "c1", content: "ok" },
      ],
    }));
    expect(request.toolChoice).toEqual({ function: "f" });
    const [system, assistant, tool] = request.messages;
    expect(system).toEqual({ kind: "system", at: 0, name: undefined, content: ["a", "b"] });
    expect(assistant?.kind === "assistant" && [assistant.reasoning, assistant.content, assistant.toolCalls[0]?.name, assistant.toolCalls[0]?.arguments.kind])
      .toEqual(["r", [], "f", "map"]);
    expect(tool).toEqual({ kind: "tool", at: 2, toolCallId: "c1", tool: undefined, name: undefined, content: ["ok"] });
  });

  test("json_schema: name, schema and strict are kept", () => {
    const request = parseChatRequest(JSON.stringify({ messages: [hi], response_format: { type: "json_schema", json_schema: { name: "n", schema: { type: "object" }, strict: false } } }));
    expect(request.responseFormat.type === "json_schema" && [request.responseFormat.name, request.responseFormat.strict]).toEqual(["n", false]);
  });

  test("a 64 MiB limit on the body, checked before decoding", () => {
    expect(() => parseChatRequest(new Uint8Array(64 * 1024 * 1024 + 1))).toThrow(/request: 67108865 bytes, more than the 67108864 allowed/);
  });
});
