/**
 * The chat page's parts that need no browser (src/page/): the SSE reader against every way the
 * bytes can be split, the import of a conversation file against hostile files, and the status
 * line from k3's statistics. test/cli/chat-page.test.ts runs the whole page in Chromium.
 */
import { describe, expect, test } from "bun:test";
import { exportConversation, ImportError, parseConversation, titleOf } from "../../src/page/messages.ts";
import { SseReader } from "../../src/page/sse.ts";
import { describeFinished, describeLive } from "../../src/page/stats.ts";

describe("SseReader", () => {
  const stream = 'data: {"a":1}\n\n: a comment\n\ndata: {"b":\ndata: 2}\n\nevent: x\ndata: "c"\n\ndata: [DONE]\n\ndata: "after"\n\n';
  const events = ['{"a":1}', '{"b":\n2}', '"c"'];

  test("gives out each event once its blank line has come, whatever the split", () => {
    for (let cut = 0; cut <= stream.length; cut++) {
      const reader = new SseReader();
      const got = [...reader.push(stream.slice(0, cut)), ...reader.push(stream.slice(cut))];
      expect(got).toEqual(events);
      expect(reader.done).toBe(true);
    }
    const reader = new SseReader();
    expect([...stream].flatMap((c) => reader.push(c))).toEqual(events);
  });

  test("reads CRLF and CR line ends; nothing after [DONE]; an unfinished event is held back", () => {
    const reader = new SseReader();
    expect(reader.push('data: 1\r\n\r\ndata: 2\r\rdata: 3')).toEqual(["1", "2"]);
    expect(reader.done).toBe(false);
    expect(reader.push("\n\ndata: [DONE]\n\n")).toEqual(["3"]);
    expect(reader.push("data: 4\n\n")).toEqual([]);
  });
});

describe("importing a conversation", () => {
  const good = [
    { role: "system", content: "Be brief." },
    { role: "user", content: [{ type: "text", text: "Hi " }, { type: "text", text: "there" }] },
    { role: "assistant", content: null, reasoning_content: "hm", tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] },
    { role: "tool", content: "42", tool_call_id: "c1" },
    { role: "assistant", content: "ok", reasoning: "from a peer's field" },
    { role: "assistant", content: "no thinking", reasoning_content: null },
  ];

  test("a messages array or a request object; content parts joined; reasoning under either name; null kept", () => {
    const messages = parseConversation(JSON.stringify(good));
    expect(messages[1]).toEqual({ role: "user", content: "Hi there" });
    expect(messages[2]!.tool_calls![0]!.function.name).toBe("f");
    expect(messages[3]).toEqual({ role: "tool", content: "42", tool_call_id: "c1" });
    expect(messages[4]!.reasoning_content).toBe("from a peer's field");
    expect(messages[5]).toEqual({ role: "assistant", content: "no thinking", reasoning_content: null });
    expect(parseConversation(JSON.stringify({ model: "kimi-k3", messages: good }))).toEqual(messages);
    // An export reads back as it was written.
    expect(parseConversation(exportConversation(messages))).toEqual(messages);
  });

  test("hostile files are refused with the field named", () => {
    const refusals: [string, string][] = [
      ["", "not valid JSON"],
      ["{", "not valid JSON"],
      ["null", "expected a JSON array of messages"],
      ['{"messages": 3}', "expected a JSON array of messages"],
      ['"text"', "expected a JSON array of messages"],
      ["[null]", "messages[0]: expected an object"],
      ["[[]]", "messages[0]: expected an object"],
      ['[{"content": "x"}]', "messages[0].role: expected one of system, user, assistant, tool"],
      ['[{"role": "developer", "content": "x"}]', "messages[0].role: expected one of"],
      ['[{"role": "__proto__", "content": "x"}]', "messages[0].role: expected one of"],
      ['[{"role": "user", "content": 5}]', "messages[0].content: expected a string, null or text parts"],
      ['[{"role": "user"}]', "messages[0].content: a user message needs content"],
      ['[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]', "messages[0].content[0]: expected a"],
      ['[{"role": "assistant", "content": "x", "reasoning_content": 1}]', "messages[0].reasoning_content: expected a string or null"],
      ['[{"role": "assistant", "content": null, "tool_calls": {}}]', "messages[0].tool_calls: expected an array"],
      ['[{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "", "arguments": "{}"}}]}]', "messages[0].tool_calls[0].function.name"],
      ['[{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}]', "messages[0].tool_calls[0].function.arguments"],
      [`${"[".repeat(100_000)}${"]".repeat(100_000)}`, ""],
    ];
    for (const [text, message] of refusals) {
      let thrown: unknown;
      try {
        parseConversation(text);
      } catch (error) {
        thrown = error;
      }
      expect(thrown).toBeInstanceOf(ImportError);
      expect((thrown as Error).message).toContain(message);
    }
  });

  test("the title is the first user line, cut to fit the list", () => {
    expect(titleOf([])).toBe("New chat");
    expect(titleOf([{ role: "system", content: "s" }, { role: "user", content: "  First line\nsecond" }])).toBe("First line");
    expect(titleOf([{ role: "user", content: "x".repeat(100) }])).toBe(`${"x".repeat(47)}…`);
  });
});

describe("the status line", () => {
  test("k3's statistics: prefill, reuse, tokens/s and time per token", () => {
    const line = describeFinished({
      usage: { prompt_tokens: 200, completion_tokens: 50, total_tokens: 250 },
      k3: { reused_prompt_ids: 180, prefilled_ids: 23, reused_from: "snapshot", prefill_seconds: 0.5, decode_seconds: 10 },
      finishReason: "stop", stopped: false, elapsedSeconds: 11, firstDeltaSeconds: 0.6, deltas: 48,
    });
    expect(line).toBe("prefill 23 ids in 500 ms (46.0 ids/s), 180 ids reused (snapshot) · 50 tokens in 10.0 s: 5.0 tok/s, 200 ms/token · finish stop");
  });

  test("a stopped reply says so with the page's own count; live lines name the phase", () => {
    expect(describeFinished({ usage: undefined, k3: undefined, finishReason: undefined, stopped: true, elapsedSeconds: 2.5, firstDeltaSeconds: 1, deltas: 30 }))
      .toBe("Stopped after 2.50 s (≈30 tokens, first text after 1.00 s)");
    expect(describeLive({ phase: "waiting", elapsedSeconds: 3, firstDeltaSeconds: undefined, deltas: 0 })).toBe("Waiting for the first token (queue, then prefill)… 3.00 s · Esc stops");
    expect(describeLive({ phase: "thinking", elapsedSeconds: 5, firstDeltaSeconds: 1, deltas: 8 })).toBe("Thinking… ≈8 tokens in 4.00 s, ≈2.0 tok/s · first text after 1.00 s · Esc stops");
  });
});
