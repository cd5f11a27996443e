/**
 * The chat page's parts that need no browser (src/page/): the SSE reader against every way the
 * bytes can be split, the import of a conversation file against hostile files, and the status
 * line from k3's statistics. test/cli/chat-page.test.ts runs the whole page in Chromium.
 */
import { describe, expect, test } from "bun:test";
import { exportConversation, ImportError, parseConversation, titleOf } from "../../../src/page/messages.ts";
import { ApiError, ChatStreamReader } from "../../../src/page/api.ts";
import { parseProgress, progressComment } from "../../../src/page/progress.ts";
import { maxEventChars, SseReader, SseTooLong, type SseItem } from "../../../src/page/sse.ts";
import { describeFinished, describeLive } from "../../../src/page/stats.ts";

const data = (items: SseItem[]) => items.flatMap((i) => (i.kind === "data" ? [i.data] : []));

describe("SseReader", () => {
  const stream = 'data: {"a":1}\n\n: a comment\n\ndata: {"b":\ndata: 2}\n\nevent: x\ndata: "c"\n\ndata: [DONE]\n\ndata: "after"\n\n';
  const items: SseItem[] = [
    { kind: "data", data: '{"a":1}' }, { kind: "comment", text: "a comment" }, { kind: "data", data: '{"b":\n2}' }, { kind: "data", data: '"c"' },
  ];

  test("gives out each event once its blank line has come, each comment once its line has, in order, whatever the split", () => {
    for (const eol of ["\n", "\r\n", "\r"]) {
      const text = stream.replaceAll("\n", eol);
      for (let cut = 0; cut <= text.length; cut++) {
        const reader = new SseReader();
        const got = [...reader.push(text.slice(0, cut)), ...reader.push(text.slice(cut))];
        expect(got).toEqual(items);
        expect(reader.done).toBe(true);
      }
      const reader = new SseReader();
      expect([...text].flatMap((c) => reader.push(c))).toEqual(items);
    }
  });

  test("reads CRLF and CR line ends; nothing after [DONE]; an unfinished event is held back", () => {
    const reader = new SseReader();
    expect(data(reader.push("data: 1\r\n\r\ndata: 2\r\rdata: 3"))).toEqual(["1", "2"]);
    expect(reader.done).toBe(false);
    expect(data(reader.push("\n\ndata: [DONE]\n\n"))).toEqual(["3"]);
    expect(reader.push("data: 4\n\n")).toEqual([]);
  });

  test("a CRLF split between two pieces is one line end, not a blank line; empty pieces change nothing", () => {
    const reader = new SseReader();
    expect(reader.push("data: 1\r")).toEqual([]);
    expect(reader.push("")).toEqual([]);
    expect(reader.push("\ndata: 2\r")).toEqual([]);
    expect(reader.push("\n\r\n")).toEqual([{ kind: "data", data: "1\n2" }]);
  });

  test("comments: with and without the space, empty, with colons inside; fields without a colon or space", () => {
    const reader = new SseReader();
    expect(reader.push(":\n:no space\n:  two spaces\n: a: b\n")).toEqual([
      { kind: "comment", text: "" }, { kind: "comment", text: "no space" }, { kind: "comment", text: " two spaces" }, { kind: "comment", text: "a: b" },
    ]);
    // `data` alone is an empty data line; `data:x` has no space to drop; other fields are not data.
    expect(reader.push("data\ndata:x\ndatax: y\nid: 3\nretry: 10\n\n")).toEqual([{ kind: "data", data: "\nx" }]);
    // A blank line with no data before it dispatches nothing.
    expect(reader.push("\n\n\n: k3 queue 0\n\n")).toEqual([{ kind: "comment", text: "k3 queue 0" }]);
  });

  test("a long line in many pieces is read whole, in time linear in its length; past the limit the stream is refused", () => {
    const long = "x".repeat(4 * 1024 * 1024);
    const reader = new SseReader();
    const started = performance.now();
    for (let at = 0; at < long.length; at += 1024) expect(reader.push(long.slice(at, at + 1024))).toEqual([]);
    expect(reader.push("\n")).toEqual([]); // a field named x...: not data
    expect(reader.push(`: ${long}\ndata: ${long}\n\n`)).toEqual([{ kind: "comment", text: long }, { kind: "data", data: long }]);
    expect(performance.now() - started).toBeLessThan(5000);
    const flood = new SseReader();
    const piece = ":".repeat(1024 * 1024);
    expect(() => { for (let i = 0; i <= maxEventChars / piece.length; i++) flood.push(piece); }).toThrow(SseTooLong);
    // Many short data lines make one long event: bounded too.
    const lines = new SseReader();
    const line = `data: ${"y".repeat(1024 * 1024)}\n`;
    expect(() => { for (let i = 0; i <= maxEventChars / line.length; i++) lines.push(line); }).toThrow(SseTooLong);
  });
});

describe("k3's progress comments", () => {
  test("what the server writes, the page reads back", () => {
    const prefill = { kind: "prefill", fed: 128, total: 512, seconds: 3.1041, reused: 40, reusedFrom: "live" } as const;
    const line = progressComment(prefill);
    expect(line).toBe(": k3 prefill 128/512 3.104s reused=40 from=live\n\n");
    const [comment] = new SseReader().push(line);
    expect(comment).toEqual({ kind: "comment", text: "k3 prefill 128/512 3.104s reused=40 from=live" });
    expect(parseProgress((comment as { text: string }).text)).toEqual({ ...prefill, seconds: 3.104 });
    expect(progressComment({ kind: "queue", ahead: 2 })).toBe(": k3 queue 2\n\n");
    expect(parseProgress("k3 queue 2")).toEqual({ kind: "queue", ahead: 2 });
    // Without the reuse fields (a future server may drop them) the counts still read.
    expect(parseProgress("k3 prefill 0/9 0s")).toEqual({ kind: "prefill", fed: 0, total: 9, seconds: 0, reused: 0, reusedFrom: "none" });
  });

  test("anything else is not k3 progress: other comments, impossible counts, hostile lines", () => {
    for (const text of [
      "", "ping", "k3", "k3 queue", "k3 queue -1", "k3 queue 1.5", "k3 queue 1 2", "K3 queue 1", " k3 queue 1",
      "k3 prefill 5/4 1s", "k3 prefill 0/0 0s", "k3 prefill 1/2", "k3 prefill 1/2 1", "k3 prefill 1/2 -1s", "k3 prefill 1/2 1e3s",
      "k3 prefill 1 / 2 1s", "k3 prefill 1/2 1s reused", "k3 prefill 1/2 1s reused=x=y", "k3 prefill 1/2 1s <img src=x>",
      `k3 prefill 1/${"9".repeat(20)} 1s`, `k3 queue ${"9".repeat(16)}`, `k3 prefill 1/2 1s reused=1${" a=b".repeat(60)}`,
    ]) {
      expect(`${text}: ${JSON.stringify(parseProgress(text))}`).toBe(`${text}: undefined`);
    }
  });
});

describe("the stream reader of a reply", () => {
  function read(pieces: string[]) {
    const log: unknown[] = [];
    const reader = new ChatStreamReader({
      onReasoning: (t) => log.push(["reasoning", t]), onContent: (t) => log.push(["content", t]), onToolCalls: (c) => log.push(["calls", structuredClone(c)]),
      onFinish: (r) => log.push(["finish", r]), onUsage: (u, k3) => log.push(["usage", u, k3]), onProgress: (p) => log.push(["progress", p]),
    });
    for (const piece of pieces) reader.push(piece);
    return log;
  }

  test("the speculation object is read only in its own shape; anything else leaves it out, the rest kept", () => {
    const k3 = { reused_prompt_ids: 1, prefilled_ids: 2, reused_from: "live", prefill_seconds: 0, decode_seconds: 0 };
    const usage = { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 };
    const final = (speculation: unknown) => read([`data: ${JSON.stringify({ choices: [], usage, k3: { ...k3, speculation } })}\n\ndata: [DONE]\n\n`]);
    expect(final({ drafted: 8, accepted: 5, max_draft: 4, sweeps: 2 })).toEqual([["usage", usage, { ...k3, speculation: { drafted: 8, accepted: 5 } }]]);
    for (const bad of [null, 5, "x", [], { drafted: 4 }, { drafted: 4, accepted: 5 }, { drafted: -1, accepted: 0 }, { drafted: 1.5, accepted: 1 }, { drafted: "8", accepted: 5 }]) {
      expect(final(bad)).toEqual([["usage", usage, k3]]);
    }
  });

  test("progress comments come out before the chunks they preceded, and odd shapes are read for what they hold", () => {
    const stream = [
      ": k3 queue 0\n\n: k3 prefill 0/8 0.000s reused=2 from=snapshot\n\n: keep-alive\n\n: k3 prefill 8/8 0.010s reused=2 from=snapshot\n\n",
      'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n',
      'data: {"choices":[null, 5, {"delta":null}, {"delta":{"reasoning_content":"hm"}}]}\n\n',
      'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\\"a\\""}}, 7, {"index":0,"function":{"arguments":":1}"}}]}}]}\n\n',
      'data: {"choices":5}\n\ndata: {"usage":"lots"}\n\ndata: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\n',
      'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3},"k3":{"reused_prompt_ids":"2"}}\n\ndata: [DONE]\n\n',
    ];
    const whole = read(stream);
    expect(whole).toEqual([
      ["progress", { kind: "queue", ahead: 0 }],
      ["progress", { kind: "prefill", fed: 0, total: 8, seconds: 0, reused: 2, reusedFrom: "snapshot" }],
      ["progress", { kind: "prefill", fed: 8, total: 8, seconds: 0.01, reused: 2, reusedFrom: "snapshot" }],
      ["reasoning", "hm"],
      ["calls", [{ id: "c", type: "function", function: { name: "f", arguments: '{"a":1}' } }]],
      ["finish", "stop"],
      ["usage", { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 }, undefined],
    ]);
    const text = stream.join("");
    for (const size of [1, 3, 7, 64]) {
      const pieces = Array.from({ length: Math.ceil(text.length / size) }, (_, i) => text.slice(i * size, (i + 1) * size));
      expect(read(pieces)).toEqual(whole);
    }
  });

  test("a stream that is not SSE of JSON objects, or an error event, ends the reply with an ApiError", () => {
    for (const [text, message] of [
      ["data: {not json\n\n", "not JSON"], ["data: [1]\n\n", "not a JSON object"], ["data: null\n\n", "not a JSON object"],
      ['data: {"error":{"message":"boom","code":"x"}}\n\n', "boom"], ['data: {"error":7}\n\n', "the server reported an error"],
    ] as const) {
      expect(() => read([text])).toThrow(message);
      try {
        read([text]);
      } catch (error) {
        expect(error).toBeInstanceOf(ApiError);
      }
    }
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

  test("a speculative server's figures: how many drafted ids were accepted", () => {
    const line = describeFinished({
      usage: { prompt_tokens: 20, completion_tokens: 40, total_tokens: 60 },
      k3: { reused_prompt_ids: 0, prefilled_ids: 20, reused_from: "none", prefill_seconds: 1, decode_seconds: 4, speculation: { drafted: 32, accepted: 24 } },
      finishReason: "length", stopped: false, elapsedSeconds: 5, firstDeltaSeconds: 1, deltas: 40,
    });
    expect(line).toBe("prefill 20 ids in 1.00 s (20.0 ids/s), nothing reused · 40 tokens in 4.00 s: 10.0 tok/s, 100 ms/token · 24 of 32 drafted ids accepted · finish length");
  });

  test("a stopped reply says so with the page's own count; live lines name the phase", () => {
    expect(describeFinished({ usage: undefined, k3: undefined, finishReason: undefined, stopped: true, elapsedSeconds: 2.5, firstDeltaSeconds: 1, deltas: 30 }))
      .toBe("Stopped after 2.50 s (≈30 tokens, first text after 1.00 s)");
    expect(describeLive({ phase: "waiting", elapsedSeconds: 3, firstDeltaSeconds: undefined, deltas: 0 })).toBe("Waiting for the first token (queue, then prefill)… 3.00 s · Esc stops");
    expect(describeLive({ phase: "thinking", elapsedSeconds: 5, firstDeltaSeconds: 1, deltas: 8 })).toBe("Thinking… ≈8 tokens in 4.00 s, ≈2.0 tok/s · first text after 1.00 s · Esc stops");
  });

  test("before the first token: the queue, then the prefill as k3's comments report it, its time ticking on between them", () => {
    const waiting = { phase: "waiting", elapsedSeconds: 2, firstDeltaSeconds: undefined, deltas: 0 } as const;
    expect(describeLive({ ...waiting, queueAhead: 2 })).toBe("Queued behind 2 requests… 2.00 s · Esc stops");
    expect(describeLive({ ...waiting, queueAhead: 1 })).toBe("Queued behind 1 request… 2.00 s · Esc stops");
    expect(describeLive({ ...waiting, queueAhead: 0 })).toBe("Waiting for the prefill to start… 2.00 s · Esc stops");
    const prefill = { kind: "prefill", fed: 128, total: 512, seconds: 3.1, reused: 40, reusedFrom: "live", arrivedSeconds: 4 } as const;
    expect(describeLive({ ...waiting, phase: "prefill", elapsedSeconds: 4, prefill }))
      .toBe("Prefill: 128 / 512 ids (25%), 3.10 s, ≈9.30 s left · 40 ids reused (live) · Esc stops");
    // Half a second after the comment: the prefill's time goes on, what is left goes down.
    expect(describeLive({ ...waiting, phase: "prefill", elapsedSeconds: 4.5, prefill: { ...prefill, reused: 0 } }))
      .toBe("Prefill: 128 / 512 ids (25%), 3.60 s, ≈8.80 s left · Esc stops");
    expect(describeLive({ ...waiting, phase: "prefill", elapsedSeconds: 4, prefill: { ...prefill, fed: 0, seconds: 0.2 } }))
      .toBe("Prefill: 0 / 512 ids (0%), 200 ms · 40 ids reused (live) · Esc stops");
    expect(describeLive({ ...waiting, phase: "prefill", elapsedSeconds: 4, prefill: { ...prefill, fed: 511 } })).toMatch(/^Prefill: 511 \/ 512 ids \(99%\)/);
    expect(describeLive({ ...waiting, phase: "prefill", elapsedSeconds: 4, prefill: { ...prefill, fed: 512, seconds: 12.4 } }))
      .toBe("Prefill: 512 / 512 ids (100%), 12.4 s · 40 ids reused (live) · Esc stops");
  });
});
