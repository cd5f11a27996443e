/**
 * The reply parser (chat.md 2.9) on crafted id sequences, one group per row of its table, plus
 * its rules: attribute unescaping, argument JSON, truncated calls, tools sections without a call,
 * marker text spelled with ordinary tokens, UTF-8 split across tokens; and the finish mapping
 * (chat.md 4.5) over every engine reason. The ids come from a small synthetic tokenizer whose
 * tokenizer_config.json carries the K3 control names in the released order; vector D of chat.md
 * 2.11 also runs on the released table when it is present.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { finishReasons } from "../../../src/decode/loop.ts";
import { finishReason, openAIFinishReasons } from "../../../src/chat/finish.ts";
import { ReplyParser, type ReplyEvent } from "../../../src/chat/parse.ts";
import { parseReply } from "../../../src/chat/reply-message.ts";
import { controlIds } from "../../../src/chat/specials.ts";
import { loadTokenizer, type Tokenizer } from "../../../src/tokenizer/index.ts";
import { KIMI_DIR, modelText, REAL, removeTokenizerDirs, syntheticConfig, writeTokenizerDir } from "../../fixtures/tokenizer/support.ts";

afterAll(removeTokenizerDirs);

/** Byte b is rank b, then the tag names and attribute pieces as whole tokens. */
const WORDS = ["message", "think", "response", "tools", "call", "argument", "json", " role", " tool", " index", " key", " type", "=\"", "string", "number", "boolean", "object", "assistant"];
const tokens = [...Array.from({ length: 256 }, (_, b) => Uint8Array.of(b)), ...WORDS.map((w) => new TextEncoder().encode(w))];
const tok: Tokenizer = loadTokenizer(writeTokenizerDir("chat-parse", modelText(tokens), syntheticConfig(tokens.length)));
const ctl = controlIds(tok);

type Part = string | number[] | { readonly control: "open" | "close" | "sep" | "endOfMessage" | "eos" };
const O = { control: "open" } as const;
const C = { control: "close" } as const;
const S = { control: "sep" } as const;
const E = { control: "endOfMessage" } as const;
const EOS = { control: "eos" } as const;

/** Ids of the parts: strings encoded as ordinary text (each its own segment), arrays verbatim. */
function ids(...parts: Part[]): number[] {
  return parts.flatMap((part) => {
    if (typeof part === "string") return tok.encode(part, { ordinary: true });
    if (Array.isArray(part)) return part;
    return [ctl[part.control]];
  });
}

const escape = (value: string): string => value.replaceAll("&", "&amp;").replaceAll("\"", "&quot;");
/** An opening tag as the renderer writes it: four text segments per attribute (chat.md 2.2). */
const open = (name: string, attributes: Record<string, string> = {}): Part[] =>
  [O, name, ...Object.entries(attributes).flatMap(([k, v]) => [` ${k}`, "=\"", escape(v), "\""]), S];
const close = (name: string): Part[] => [C, name, S];
const arg = (key: string, type: string, value: string | number[]): Part[] =>
  [...open("argument", { key, type }), value, ...close("argument")];
const callOf = (name: string, index: number, ...body: Part[]): Part[] =>
  [...open("call", { tool: name, index: String(index) }), ...body, ...close("call")];
/** The trained reply shape after the thinking prompt (chat.md 2.8). */
const reply = (reasoning: Part, content: Part, ...tail: Part[]): Part[] =>
  [reasoning, ...close("think"), ...open("response"), content, ...close("response"), ...tail];

const bytes = (...values: number[]): number[] => values.map((b) => tok.encode(Uint8Array.of(b), { ordinary: true })[0] as number);

let counter = 0;
const callId = (index: number): string => `call_${index}_${counter++}`;

function parse(list: number[], thinking = true) {
  return parseReply(tok, list, { thinking, callId: (i) => `call_${i}` });
}

function stream(list: number[], thinking = true): { perId: ReplyEvent[][]; tail: ReplyEvent[]; parser: ReplyParser } {
  const parser = new ReplyParser(tok, { thinking, callId });
  const perId = list.map((id) => parser.push(id));
  return { perId, tail: parser.finish(), parser };
}

const warnings = (list: number[], thinking = true): string[] => parse(list, thinking).warnings.slice();

describe("the synthetic tokenizer", () => {
  test("carries the K3 control names right after the ranks, in the released order", () => {
    const first = tok.rankCount;
    expect(ctl).toEqual({ bos: first, eos: first + 1, endOfMessage: first + 2, open: first + 3, close: first + 4, sep: first + 5 });
    expect(ids("message")).toHaveLength(1);
    expect(ids("é")).toHaveLength(2); // so a multi-byte character can be split across tokens
  });
});

describe("state R (reasoning)", () => {
  test("text is reasoning; close think moves on", () => {
    const r = parse(ids(...reply("Let me think.", "Hi."), ...close("message"), E));
    expect(r.message).toEqual({ role: "assistant", content: "Hi.", reasoning_content: "Let me think." });
    expect(r.end).toBe("stop-id");
    expect(r.warnings).toEqual([]);
  });

  test("open think as the very first thing is the prompt's echo and is ignored; later it is text", () => {
    expect(parse(ids(...open("think"), "a", ...close("think"))).message.reasoning_content).toBe("a");
    expect(parse(ids("a", ...open("think"), "b", ...close("think"))).message.reasoning_content).toBe("a<|open|>think<|sep|>b");
  });

  test("open response without close think ends the reasoning and starts the content", () => {
    const r = parse(ids("plan", ...open("response"), "answer", ...close("response"), E));
    expect(r.message).toEqual({ role: "assistant", content: "answer", reasoning_content: "plan" });
  });

  test("truncated in R: everything is reasoning and content is null", () => {
    const r = parse(ids("still thinking", " about it"));
    expect(r.message).toEqual({ role: "assistant", content: null, reasoning_content: "still thinking about it" });
    expect(r.end).toBeUndefined();
    expect(finishReason("length", r.message.tool_calls !== undefined)).toBe("length");
  });

  test("an empty reply keeps reasoning_content as an empty string (thinking on)", () => {
    expect(parse(ids(E)).message).toEqual({ role: "assistant", content: null, reasoning_content: "" });
  });
});

describe("state G (between sections)", () => {
  test("whitespace is discarded; other text is content", () => {
    const list = ids("r", ...close("think"), "\n \n", ...open("response"), "x", ...close("response"), "  \n", ...close("message"), E);
    expect(parse(list).message.content).toBe("x");
    const stray = ids("r", ...close("think"), "  stray  words \n", ...open("response"), "x", ...close("response"), E);
    expect(parse(stray).message.content).toBe("stray  wordsx");
  });

  test("held trailing whitespace is released when more text follows it in G", () => {
    const { perId } = stream(ids("r", ...close("think"), "a", " ", "b", " ", ...open("response"), "c"));
    const content = perId.flat().filter((e) => e.kind === "content").map((e) => e.text);
    expect(content).toEqual(["a", " b", "c"]);
  });

  test("open response, open tools and close message lead to C, T and X", () => {
    const toTools = ids("r", ...close("think"), ...open("tools"), ...callOf("f", 1), ...close("tools"), E);
    expect(parse(toTools).message.tool_calls?.map((c) => c.function.name)).toEqual(["f"]);
    const toClosed = ids("r", ...close("think"), ...close("message"), "junk", E);
    const r = parse(toClosed);
    expect(r.message).toEqual({ role: "assistant", content: null, reasoning_content: "r" });
    expect(r.warnings).toEqual(["text after the message was closed is ignored"]);
  });
});

describe("state C (content)", () => {
  test("text is content; close response returns to G", () => {
    const r = parse(ids(...reply("", "one two"), E));
    expect(r.message).toEqual({ role: "assistant", content: "one two", reasoning_content: "" });
  });

  test("open tools while the response is still open starts the tools section", () => {
    const r = parse(ids(...close("think"), ...open("response"), "Calling.", ...open("tools"), ...callOf("f", 1, ...arg("a", "number", "1")), ...close("tools"), E));
    expect(r.message.content).toBe("Calling.");
    expect(r.message.tool_calls).toEqual([{ id: "call_0", type: "function", function: { name: "f", arguments: "{\"a\":1}" } }]);
  });

  test("close message in C closes the message", () => {
    const r = parse(ids(...close("think"), ...open("response"), "done", ...close("message"), E));
    expect(r.message.content).toBe("done");
    expect(r.warnings).toEqual([]);
  });

  test("thinking off starts in C; an echoed open response is ignored; reasoning_content is null", () => {
    expect(parse(ids("hello", ...close("response"), ...close("message"), E), false).message)
      .toEqual({ role: "assistant", content: "hello", reasoning_content: null });
    expect(parse(ids(...open("response"), "hello", E), false).message.content).toBe("hello");
  });

  test("content is null when the response section was empty", () => {
    expect(parse(ids(...reply("r", []), ...close("message"), E)).message.content).toBeNull();
  });
});

describe("state T and calls", () => {
  const weather = callOf("get_weather", 1, ...arg("city", "string", "Paris"), ...arg("days", "number", "2"));

  test("a call is emitted once, complete, when close call arrives; whitespace between calls is ignored", () => {
    const list = ids(...reply("r", []), ...open("tools"), "\n", ...weather, " \n ", ...callOf("now", 2), ...close("tools"), ...close("message"), E);
    const { perId } = stream(list);
    const closeCallAt = ids(...reply("r", []), ...open("tools"), "\n", ...weather).length - 1;
    perId.forEach((events, i) => {
      const calls = events.filter((e) => e.kind === "tool_call");
      if (i === closeCallAt) expect(calls).toHaveLength(1);
      else if (calls.length > 0) expect(calls[0]!.kind === "tool_call" && calls[0]!.call.name).toBe("now");
    });
    const r = parse(list);
    expect(r.message.tool_calls).toEqual([
      { id: "call_0", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\",\"days\":2}" } },
      { id: "call_1", type: "function", function: { name: "now", arguments: "{}" } },
    ]);
    expect(r.message.content).toBeNull();
    expect(r.warnings).toEqual([]);
  });

  test("argument values: strings raw, other types as written when valid JSON, else as strings", () => {
    const list = ids(...reply("", []), ...open("tools"), ...callOf("f", 1,
      ...arg("s", "string", "say \"hi\"\n<b>"),
      ...arg("n1", "number", "1e3"),
      ...arg("n2", "number", " 1.10 "),
      ...arg("t", "boolean", "true"),
      ...arg("z", "null", "null"),
      ...arg("o", "object", "{\"a\": 1, \"b\": [1, 2]}"),
      ...arg("a", "array", "[1, 2.50]"),
      ...arg("bad", "number", "12 apples"),
      ...arg("numtext", "string", "42"),
    ), ...close("tools"), E);
    const args = parse(list).message.tool_calls?.[0]?.function.arguments;
    expect(args).toBe("{\"s\":\"say \\\"hi\\\"\\n<b>\",\"n1\":1e3,\"n2\":1.10,\"t\":true,\"z\":null,\"o\":{\"a\": 1, \"b\": [1, 2]},\"a\":[1, 2.50],\"bad\":\"12 apples\",\"numtext\":\"42\"}");
    expect(JSON.parse(args!)).toEqual({ s: "say \"hi\"\n<b>", n1: 1000, n2: 1.1, t: true, z: null, o: { a: 1, b: [1, 2] }, a: [1, 2.5], bad: "12 apples", numtext: "42" });
  });

  test("a repeated key keeps its first place and its last value", () => {
    const list = ids(...reply("", []), ...open("tools"), ...callOf("f", 1, ...arg("a", "number", "1"), ...arg("b", "number", "2"), ...arg("a", "number", "3")), ...close("tools"), E);
    expect(parse(list).message.tool_calls?.[0]?.function.arguments).toBe("{\"a\":3,\"b\":2}");
  });

  test("a json block that is the whole call body becomes the arguments as written", () => {
    const raw = "{\"city\": \"Paris\", oops";
    const list = ids(...reply("", []), ...open("tools"), ...callOf("f", 1, ...open("json", { type: "object" }), raw, ...close("json")), ...close("tools"), E);
    expect(parse(list).message.tool_calls?.[0]?.function.arguments).toBe(raw);
    const mixed = ids(...reply("", []), ...open("tools"), ...callOf("f", 1, ...arg("a", "number", "1"), ...open("json", { type: "object" }), "{}", ...close("json")), ...close("tools"), E);
    const r = parse(mixed);
    expect(r.message.tool_calls?.[0]?.function.arguments).toBe("{\"a\":1}");
    expect(r.warnings).toEqual(["tool call \"f\": a json block that is not the whole call body was ignored"]);
  });

  test("close tools returns to G: text after it is content", () => {
    const r = parse(ids(...reply("", []), ...open("tools"), ...callOf("f", 1), ...close("tools"), "\n", ...open("response"), "after", ...close("response"), E));
    expect(r.message.content).toBe("after");
    expect(r.message.tool_calls).toHaveLength(1);
  });

  test("calls are numbered from 0 across the whole reply and get fresh ids", () => {
    const list = ids(...reply("", []), ...open("tools"), ...callOf("a", 1), ...close("tools"), ...open("tools"), ...callOf("b", 1), ...close("tools"), E);
    const calls = stream(list).perId.flat().flatMap((e) => (e.kind === "tool_call" ? [e.call] : []));
    expect(calls.map((c) => [c.index, c.name])).toEqual([[0, "a"], [1, "b"]]);
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
    const random = parseReply(tok, list, { thinking: true }).message.tool_calls!;
    for (const c of random) expect(c.id).toMatch(/^call_[0-9a-f]{24}$/);
    expect(random[0]!.id).not.toBe(random[1]!.id);
  });

  test("attribute values are unescaped &quot; first, then &amp;", () => {
    // The renderer writes `a"b` as a&quot;b, `x&quot;y` as x&amp;quot;y, `p&q` as p&amp;q.
    const list = ids(...reply("", []), ...open("tools"),
      ...callOf("a\"b", 1), ...callOf("x&quot;y", 2),
      ...callOf("n", 3, ...arg("p&q", "string", "v"), ...arg("k&amp;", "string", "w")),
      ...close("tools"), E);
    const calls = parse(list).message.tool_calls!;
    expect(calls.map((c) => c.function.name)).toEqual(["a\"b", "x&quot;y", "n"]);
    expect(calls[2]!.function.arguments).toBe("{\"p&q\":\"v\",\"k&amp;\":\"w\"}");
  });
});

describe("truncated and malformed calls", () => {
  test("a call truncated mid-argument is dropped with a warning; finish_reason is length", () => {
    const list = ids(...reply("r", "Let me check."), ...open("tools"), ...open("call", { tool: "get_weather", index: "1" }), ...open("argument", { key: "city", type: "string" }), "Par");
    const { perId, tail, parser } = stream(list);
    expect(perId.flat().concat(tail).some((e) => e.kind === "tool_call")).toBe(false);
    expect(tail.filter((e) => e.kind === "warning").map((e) => e.kind === "warning" && e.message))
      .toEqual(["an unfinished tool call to \"get_weather\" was dropped: the reply ended inside it"]);
    const r = parse(list);
    expect(r.message).toEqual({ role: "assistant", content: "Let me check.", reasoning_content: "r" });
    expect(finishReason("length", parser.toolCalls > 0)).toBe("length");
  });

  test("a call the next open call interrupted is dropped; the next one is kept", () => {
    const list = ids(...reply("", []), ...open("tools"), ...open("call", { tool: "first", index: "1" }), ...arg("a", "number", "1"), ...callOf("second", 2), ...close("tools"), E);
    const r = parse(list);
    expect(r.message.tool_calls?.map((c) => c.function.name)).toEqual(["second"]);
    expect(r.warnings).toEqual(["an unfinished tool call to \"first\" was dropped: the next call began before <|close|>call"]);
  });

  test("an argument never closed spoils its call, whatever ends it", () => {
    const unclosed = [...open("call", { tool: "f", index: "1" }), ...open("argument", { key: "k", type: "string" }), "v"];
    const r1 = parse(ids(...reply("", []), ...open("tools"), ...unclosed, ...close("call"), ...close("tools"), E));
    expect(r1.message.tool_calls).toBeUndefined();
    expect(r1.warnings).toEqual(["an unfinished tool call to \"f\" was dropped: its argument \"k\" was never closed"]);
    const r2 = parse(ids(...reply("", []), ...open("tools"), ...unclosed, ...callOf("g", 2), ...close("tools"), E));
    expect(r2.message.tool_calls?.map((c) => c.function.name)).toEqual(["g"]);
    const r3 = parse(ids(...reply("", []), ...open("tools"), ...unclosed, E));
    expect(r3.message.tool_calls).toBeUndefined();
    expect(r3.message.content).toBeNull();
  });

  test("close tools inside a call drops the call and returns to G", () => {
    const list = ids(...reply("", []), ...open("tools"), ...open("call", { tool: "f", index: "1" }), ...arg("a", "number", "1"), ...close("tools"), ...open("response"), "later", E);
    const r = parse(list);
    expect(r.message.tool_calls).toBeUndefined();
    expect(r.message.content).toBe("later");
    expect(r.warnings).toEqual(["an unfinished tool call to \"f\" was dropped: <|close|>call never came"]);
  });

  test("a tag inside an argument body that is not structure stays part of the value", () => {
    const list = ids(...reply("", []), ...open("tools"), ...callOf("f", 1, ...arg("k", "string", [...ids("a", ...open("b"), "c")])), ...close("tools"), E);
    expect(parse(list).message.tool_calls?.[0]?.function.arguments).toBe("{\"k\":\"a<|open|>b<|sep|>c\"}");
  });

  test("a tools section with no call in it is released as content text", () => {
    const list = ids(...reply("", "See:"), ...open("tools"), " the format ", ...close("tools"), ...close("message"), E);
    const r = parse(list);
    expect(r.message.content).toBe("See:<|open|>tools<|sep|> the format <|close|>tools<|sep|>");
    expect(r.message.tool_calls).toBeUndefined();
    expect(finishReason("stop", false)).toBe("stop");
    // Cut off before the section closed, the same.
    expect(parse(ids(...reply("", []), ...open("tools"), "text")).message.content).toBe("<|open|>tools<|sep|>text");
  });

  test("a call without a tool name, and an argument without a key, are dropped with warnings", () => {
    const list = ids(...reply("", []), ...open("tools"), ...open("call"), ...close("call"), ...callOf("f", 1, ...open("argument", { type: "string" }), "v", ...close("argument")), ...close("tools"), E);
    const r = parse(list);
    expect(r.message.tool_calls?.map((c) => [c.function.name, c.function.arguments])).toEqual([["f", "{}"]]);
    expect(r.warnings).toEqual(["a tool call without a tool name was dropped", "an argument without a key was dropped"]);
  });
});

describe("any state: stop ids, and X", () => {
  test("<|end_of_msg|> and [EOS] end the reply and are not content; <|close|> does not stop", () => {
    for (const stop of [E, EOS]) {
      const { perId, parser } = stream(ids(...reply("", "text"), stop, "after"));
      expect(parser.end).toBe("stop-id");
      expect(perId.flat().map((e) => e.kind === "content" && e.text).filter(Boolean).join("")).toBe("text");
    }
    const parser = new ReplyParser(tok, { thinking: true });
    parser.push(ctl.close);
    expect(parser.end).toBeUndefined();
  });

  test("a stop id in any state ends it: R, G, C, T, call, header", () => {
    const cases: [Part[], Record<string, unknown>][] = [
      [["r"], { reasoning_content: "r", content: null }],
      [["r", ...close("think")], { reasoning_content: "r", content: null }],
      [[...reply("r", "c").slice(0, 5)], { reasoning_content: "r", content: null }],
      [["r", ...close("think"), ...open("response"), "c"], { reasoning_content: "r", content: "c" }],
      [[...reply("", []), ...open("tools"), ...callOf("f", 1)], { tool_calls: [{ id: "call_0", type: "function", function: { name: "f", arguments: "{}" } }] }],
      [[...reply("", []), ...open("tools"), ...open("call", { tool: "f", index: "1" })], { content: null }],
      [["r", O, "resp"], { reasoning_content: "r" }],
    ];
    for (const [parts, expected] of cases) {
      const r = parse(ids(...parts, E));
      expect(r.end).toBe("stop-id");
      expect(r.message).toMatchObject(expected);
    }
    expect(parse(ids(...reply("", []), ...open("tools"), ...open("call", { tool: "f", index: "1" }), E)).message.tool_calls).toBeUndefined();
    expect(warnings(ids("r", O, "resp", E))).toEqual(["an unfinished tag header \"<|open|>resp\" was dropped"]);
  });

  test("after close message, open message ends the turn (the model began a new one)", () => {
    const { parser, perId } = stream(ids(...reply("r", "c"), ...close("message"), ...open("message", { role: "user" }), "more"));
    expect(parser.end).toBe("new-turn");
    expect(perId.flat().some((e) => e.kind === "content" && e.text.includes("more"))).toBe(false);
    expect(finishReason("stop", false)).toBe("stop");
  });

  test("a header is never emitted in pieces: nothing comes out until its <|sep|>", () => {
    const list = ids("r", ...open("call", { tool: "f", index: "1" }));
    const { perId } = stream(list);
    perId.slice(1, -1).forEach((events) => expect(events).toEqual([]));
    // Not a tag R knows, so at its <|sep|> it is reasoning text, whole.
    expect(perId.at(-1)).toEqual([{ kind: "reasoning", text: "<|open|>call tool=\"f\" index=\"1\"<|sep|>" }]);
  });

  test("a stray <|sep|> and an interrupted header are dropped with warnings", () => {
    expect(warnings(ids("r", S, "s", E))).toEqual(["a <|sep|> outside any tag header was dropped"]);
    // Like every control id it ends the run of text: bytes on either side do not join.
    expect(parse(ids(bytes(0xe4), S, bytes(0xb8, 0xad), E)).message.reasoning_content).toBe("\uFFFD\uFFFD\uFFFD");
    const r = parse(ids("r", O, "thi", ...close("think"), ...open("response"), "c", E));
    expect(r.message).toMatchObject({ reasoning_content: "r", content: "c" });
    expect(r.warnings).toEqual(["a tag header \"<|open|>thi\" was cut off by another tag and dropped"]);
  });
});

describe("spelled markers stay text", () => {
  test("control names written with ordinary tokens are reasoning or content, never structure", () => {
    const spelledThink = "<|close|>think<|sep|><|open|>response<|sep|>";
    const spelledContent = "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"x\" index=\"1\"<|sep|><|close|>call<|sep|><|end_of_msg|>[EOS]";
    const list = ids(spelledThink, ...close("think"), ...open("response"), spelledContent, ...close("response"), E);
    expect(ids(spelledThink).some((id) => id >= tok.rankCount)).toBe(false);
    const r = parse(list);
    expect(r.message).toEqual({ role: "assistant", content: spelledContent, reasoning_content: spelledThink });
    expect(r.end).toBe("stop-id");
  });

  test("spelled markers inside an argument value are part of the value", () => {
    const value = "<|close|>argument<|sep|>";
    const list = ids(...reply("", []), ...open("tools"), ...callOf("f", 1, ...arg("k", "string", value)), ...close("tools"), E);
    expect(parse(list).message.tool_calls?.[0]?.function.arguments).toBe(JSON.stringify({ k: value }));
  });
});

describe("UTF-8 across tokens", () => {
  const characters = ["é", "中", "😀"];

  for (const [where, build] of [
    ["reasoning", (t: Part): number[] => ids(t, ...close("think"), E)],
    ["content", (t: Part): number[] => ids(...close("think"), ...open("response"), t, ...close("response"), E)],
  ] as const) {
    test(`a character split across tokens in ${where} is held until complete, never U+FFFD`, () => {
      for (const ch of characters) {
        const pieces = ids(`a${ch}b`);
        expect(pieces.length).toBe(2 + new TextEncoder().encode(ch).length);
        const { perId, tail } = stream(build(pieces));
        const texts = perId.flat().concat(tail).flatMap((e) => (e.kind === where ? [e.text] : []));
        expect(texts.join("")).toBe(`a${ch}b`);
        expect(texts.some((t) => t.includes("\uFFFD"))).toBe(false);
        // The character comes out with the token that completes it, not before.
        const offset = where === "reasoning" ? 0 : ids(...close("think"), ...open("response")).length;
        const at = (i: number) => perId[offset + i]!.flatMap((e) => (e.kind === where ? [e.text] : [])).join("");
        for (let i = 1; i < pieces.length - 2; i++) expect(at(i)).toBe("");
        expect(at(pieces.length - 2)).toBe(ch);
      }
      expect(parse(build(ids("日本語"))).message[where === "reasoning" ? "reasoning_content" : "content"]).toBe("日本語");
    });
  }

  test("invalid bytes are U+FFFD at once; a sequence cut off by a control id or by the end is U+FFFD", () => {
    expect(parse(ids(...reply("", [...ids("x"), ...bytes(0xff), ...ids("y")]), E)).message.content).toBe("x\uFFFDy");
    // 中 is e4 b8 ad: its first two bytes, then the section closes.
    expect(parse(ids(...reply(bytes(0xe4, 0xb8), "c"), E)).message).toMatchObject({ reasoning_content: "\uFFFD", content: "c" });
    const cut = stream(bytes(0xf0, 0x9f));
    expect(cut.perId.flat()).toEqual([]);
    expect(cut.tail).toEqual([{ kind: "reasoning", text: "\uFFFD" }]);
    expect(parse(ids(...close("think"), ...open("response"), "a", bytes(0xf0, 0x9f, 0x98))).message.content).toBe("a\uFFFD");
  });

  test("for random bytes cut anywhere, the deltas joined are a one-shot decode of the bytes", () => {
    let state = 99;
    const next = () => (state = (Math.imul(state, 1103515245) + 12345) >>> 0) >>> 24;
    const pool = [...new TextEncoder().encode("aé中😀\u{10FFFF}"), 0x80, 0xff, 0xc0, 0xed, 0xa0, 0xf4, 0x90];
    for (let round = 0; round < 200; round++) {
      const raw = Array.from({ length: 1 + (next() % 24) }, () => pool[next() % pool.length] as number);
      const { perId, tail } = stream([...bytes(...raw), ctl.endOfMessage]);
      const streamed = perId.flat().concat(tail).flatMap((e) => (e.kind === "reasoning" ? [e.text] : [])).join("");
      const whole = new TextDecoder("utf-8", { ignoreBOM: true }).decode(Uint8Array.from(raw));
      expect(streamed).toBe(whole);
    }
  });
});

describe("finish_reason (chat.md 4.5)", () => {
  test("every engine reason x tool-call presence maps onto the three OpenAI values", () => {
    const table = finishReasons.flatMap((engine) => [false, true].map((calls) => [engine, calls, finishReason(engine, calls)]));
    expect(table).toEqual([
      ["length", false, "length"], ["length", true, "tool_calls"],
      ["stop", false, "stop"], ["stop", true, "tool_calls"],
      ["cancelled", false, "length"], ["cancelled", true, "tool_calls"],
    ]);
    for (const [, , value] of table) expect(openAIFinishReasons).toContain(value as (typeof openAIFinishReasons)[number]);
    expect([...openAIFinishReasons]).toEqual(["stop", "length", "tool_calls"]);
  });
});

describe(`chat.md 2.11 vector D, parsed${REAL}`, () => {
  test.skipIf(KIMI_DIR === undefined)("the ideal reply gives the reasoning, no content, one call, tool_calls", () => {
    const real = loadTokenizer(KIMI_DIR as string);
    const asst = [163587, 2778, 6244, 878, 69702, 1, 163589, 163587, 39964, 163589, 20082, 276, 4453, 13, 163588, 39964, 163589,
      163587, 12092, 163589, 163588, 12092, 163589, 163587, 25385, 163589, 163587, 10257, 4453, 878, 618, 21055, 2800,
      1, 4002, 878, 16, 1, 163589, 163587, 47185, 2355, 878, 37666, 1, 1798, 878, 2033, 1, 163589, 113476, 163588, 47185,
      163589, 163587, 47185, 2355, 878, 21030, 1, 1798, 878, 10006, 1, 163589, 17, 163588, 47185, 163589, 163588, 10257,
      163589, 163588, 25385, 163589, 163588, 2778, 163589, 163586];
    const generated = asst.slice(10);
    expect(generated).toHaveLength(69);
    const r = parseReply(real, generated, { thinking: true, callId: () => "call_1" });
    expect(r.message).toEqual({
      role: "assistant", content: null, reasoning_content: "Need the tool.",
      tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\",\"days\":2}" } }],
    });
    expect(r.warnings).toEqual([]);
    expect(r.end).toBe("stop-id");
    expect(finishReason("stop", true)).toBe("tool_calls");
  });
});
