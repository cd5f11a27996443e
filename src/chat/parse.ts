/**
 * The reply parser (chat.md 2.9): generated ids in, one at a time; reasoning deltas, content
 * deltas and complete tool calls out. Structure is decided by the control ids alone, so text
 * that merely spells `<|open|>` or `<|sep|>` with ordinary tokens stays text. A header is the
 * ordinary ids between `<|open|>`/`<|close|>` and the next `<|sep|>`; nothing of it is emitted
 * until the `<|sep|>` shows what it is.
 *
 * States: R reasoning, G between sections, C content, T tools, call (inside a call), X the
 * message is closed. A stop id (`<|end_of_msg|>`, `[EOS]`) ends the reply from any state and is
 * not text; `<|close|>` never stops (it appears mid-reply, after the think section).
 */
import type { Tokenizer } from "../tokenizer/index.ts";
import { type Header, parseHeader } from "./header.ts";
import { type ControlIds, controlIds, stopIds } from "./specials.ts";
import { argumentsObject, argumentValueJson } from "./tool-arguments.ts";
import { randomCallId, type ToolCall } from "./tool-call.ts";
import { TrimmedText } from "./trimmed-text.ts";
import { Utf8Stream } from "./utf8-stream.ts";

export type ReplyEvent =
  | { readonly kind: "reasoning"; readonly text: string }
  | { readonly kind: "content"; readonly text: string }
  | { readonly kind: "tool_call"; readonly call: ToolCall }
  | { readonly kind: "warning"; readonly message: string };

/** How the reply ended before `finish`: a stop id, or the model starting a new turn (chat.md 2.8). */
export type ReplyEnd = "stop-id" | "new-turn";

export interface ReplyParserOptions {
  /** True: generation starts inside the think section (state R); false: inside the response (C). */
  readonly thinking: boolean;
  /** The id of call number `index`; random `call_...` ids by default. */
  readonly callId?: (index: number) => string;
}

type State = "reasoning" | "between" | "content" | "tools" | "call" | "closed";

interface PendingHeader {
  readonly opener: "open" | "close";
  readonly ids: number[];
}

interface Body {
  readonly kind: "argument" | "json";
  readonly key: string | undefined;
  readonly type: string | undefined;
  readonly ids: number[];
}

interface OpenCall {
  readonly name: string | undefined;
  readonly values: Map<string, string>;
  readonly json: string[];
  body: Body | undefined;
}

/** Headers that end an argument or json body whether or not it was closed. */
const STRUCTURAL = new Set(["open call", "close call", "close tools", "close message"]);

const bodyDecoder = new TextDecoder("utf-8", { ignoreBOM: true });

export class ReplyParser {
  private readonly tokenizer: Tokenizer;
  private readonly controls: ControlIds;
  private readonly stops: ReadonlySet<number>;
  private readonly callId: (index: number) => string;
  private state: State;
  /** Nothing but a prompt echo has been seen yet. */
  private atStart = true;
  private header: PendingHeader | undefined;
  private readonly reasoning = new Utf8Stream();
  private readonly content = new Utf8Stream();
  private readonly between = new Utf8Stream();
  private readonly betweenText = new TrimmedText();
  /** Every id of the tools section so far, released as content if it holds no call. */
  private section: number[] = [];
  private sectionHasCall = false;
  private call: OpenCall | undefined;
  private calls = 0;
  private warnedClosed = false;
  private ended: ReplyEnd | "finished" | undefined;
  private channel: "reasoning" | "content" | "structure" = "structure";

  constructor(tokenizer: Tokenizer, options: ReplyParserOptions) {
    this.tokenizer = tokenizer;
    this.controls = controlIds(tokenizer);
    this.stops = stopIds(this.controls);
    this.callId = options.callId ?? randomCallId;
    this.state = options.thinking ? "reasoning" : "content";
  }

  /**
   * How the reply ended, once a stop id or a new turn ended it. The decode loop stops on stop ids
   * itself; "new-turn" is for its onToken to stop on (chat.md 2.8's defensive rule).
   */
  get end(): ReplyEnd | undefined {
    return this.ended === "finished" ? undefined : this.ended;
  }

  /** Tool calls emitted so far. */
  get toolCalls(): number {
    return this.calls;
  }

  /**
   * Where the last id pushed went: the reasoning's or the response's text (what logprobs report
   * per section), or structure (a tag, a tool call, a stop id).
   */
  get lastChannel(): "reasoning" | "content" | "structure" {
    return this.channel;
  }

  /** Feeds one generated id. After the reply has ended, ids are ignored. */
  push(id: number): ReplyEvent[] {
    const out: ReplyEvent[] = [];
    this.channel = "structure";
    if (this.ended !== undefined) return out;
    const c = this.controls;
    if (this.stops.has(id)) {
      this.close(out);
      this.ended = "stop-id";
    } else if (id === c.open || id === c.close) {
      if (this.header !== undefined) this.warn(out, `a tag header ${this.describe(this.header.ids)} was cut off by another tag and dropped`);
      else this.endRun(out);
      this.header = { opener: id === c.open ? "open" : "close", ids: [id] };
    } else if (id === c.sep) {
      const header = this.header;
      this.header = undefined;
      if (header === undefined) {
        this.endRun(out);
        this.warn(out, "a <|sep|> outside any tag header was dropped");
      } else {
        header.ids.push(id);
        this.onHeader(header, out);
      }
    } else if (this.header !== undefined) {
      this.header.ids.push(id);
    } else {
      this.onText(id, out);
    }
    return out;
  }

  /** The generation is over (the budget ran out, or it was stopped): releases what is held. */
  finish(): ReplyEvent[] {
    const out: ReplyEvent[] = [];
    if (this.ended !== undefined) return out;
    this.close(out);
    this.ended = "finished";
    return out;
  }

  private onText(id: number, out: ReplyEvent[]): void {
    const bytes = this.tokenizer.decode([id]);
    switch (this.state) {
      case "reasoning":
        this.atStart = false;
        this.channel = "reasoning";
        this.emit(out, "reasoning", this.reasoning.push(bytes));
        return;
      case "content":
        this.atStart = false;
        this.channel = "content";
        this.emit(out, "content", this.content.push(bytes));
        return;
      case "between":
        this.channel = "content";
        this.emit(out, "content", this.betweenText.push(this.between.push(bytes)));
        return;
      case "tools":
        this.section.push(id);
        return;
      case "call":
        this.section.push(id);
        this.call?.body?.ids.push(id);
        return;
      case "closed":
        if (!this.warnedClosed) this.warn(out, "text after the message was closed is ignored");
        this.warnedClosed = true;
        return;
    }
  }

  private onHeader(header: PendingHeader, out: ReplyEvent[]): void {
    const text = bodyDecoder.decode(this.tokenizer.decode(header.ids.slice(1, -1)));
    const parsed = parseHeader(text);
    const tag = parsed === undefined ? "" : `${header.opener} ${parsed.name}`;
    switch (this.state) {
      case "reasoning":
        return this.inReasoning(tag, header, out);
      case "between":
        return this.inBetween(tag, header, out);
      case "content":
        return this.inContent(tag, header, out);
      case "tools":
        return this.inTools(tag, parsed, header, out);
      case "call":
        return this.inCall(tag, parsed, header, out);
      case "closed":
        if (tag === "open message") this.ended = "new-turn";
        return;
    }
  }

  private inReasoning(tag: string, header: PendingHeader, out: ReplyEvent[]): void {
    const first = this.atStart;
    this.atStart = false;
    if (tag === "open think" && first) return; // the prompt's own opener, echoed
    if (tag === "close think") return this.enter("between");
    if (tag === "open response") return this.enter("content"); // think never closed: G then C
    if (tag === "open tools") return this.openTools(header);
    if (tag === "close message") return this.enter("closed");
    this.emit(out, "reasoning", this.reasoning.push(this.tokenizer.decode(header.ids)));
  }

  private inBetween(tag: string, header: PendingHeader, out: ReplyEvent[]): void {
    if (tag === "open response") return this.enter("content");
    if (tag === "open tools") return this.openTools(header);
    if (tag === "close message") return this.enter("closed");
    this.emit(out, "content", this.betweenText.push(this.between.push(this.tokenizer.decode(header.ids))));
  }

  private inContent(tag: string, header: PendingHeader, out: ReplyEvent[]): void {
    const first = this.atStart;
    this.atStart = false;
    if (tag === "open response" && first) return; // the prompt's own opener, echoed
    if (tag === "close response") return this.enter("between");
    if (tag === "open tools") return this.openTools(header);
    if (tag === "close message") return this.enter("closed");
    this.emit(out, "content", this.content.push(this.tokenizer.decode(header.ids)));
  }

  private inTools(tag: string, parsed: Header | undefined, header: PendingHeader, out: ReplyEvent[]): void {
    if (tag === "close message") {
      this.closeSection(out);
      return this.enter("closed");
    }
    this.section.push(...header.ids);
    if (tag === "open call") return this.openCall(parsed);
    if (tag === "close tools") {
      this.closeSection(out);
      return this.enter("between");
    }
  }

  private inCall(tag: string, parsed: Header | undefined, header: PendingHeader, out: ReplyEvent[]): void {
    const call = this.call as OpenCall;
    const body = call.body;
    if (body !== undefined && !STRUCTURAL.has(tag)) {
      this.section.push(...header.ids);
      if (tag === `close ${body.kind}`) this.endBody(call, body, out);
      else body.ids.push(...header.ids); // bodies are raw text: a nested tag is part of the value
      return;
    }
    if (body !== undefined) {
      this.dropCall(out, `its ${body.kind === "json" ? "json block" : `argument ${JSON.stringify(body.key ?? "")}`} was never closed`);
      this.state = "tools";
      return this.inTools(tag === "close call" ? "" : tag, parsed, header, out);
    }
    if (tag === "close message" || tag === "close tools" || tag === "open call") {
      this.dropCall(out, tag === "open call" ? "the next call began before <|close|>call" : "<|close|>call never came");
      this.state = "tools";
      return this.inTools(tag, parsed, header, out);
    }
    this.section.push(...header.ids);
    if (tag === "open argument" || tag === "open json") {
      const attributes = parsed?.attributes;
      call.body = { kind: tag === "open json" ? "json" : "argument", key: attributes?.get("key"), type: attributes?.get("type"), ids: [] };
    } else if (tag === "close call") {
      this.emitCall(call, out);
      this.call = undefined;
      this.state = "tools";
    } else {
      this.warn(out, `a tag header ${this.describe(header.ids)} inside a tool call was ignored`);
    }
  }

  private openTools(header: PendingHeader): void {
    this.enter("tools");
    this.section = [...header.ids];
    this.sectionHasCall = false;
  }

  private openCall(parsed: Header | undefined): void {
    this.sectionHasCall = true;
    this.call = { name: parsed?.attributes.get("tool"), values: new Map(), json: [], body: undefined };
    this.state = "call";
  }

  private endBody(call: OpenCall, body: Body, out: ReplyEvent[]): void {
    call.body = undefined;
    const raw = bodyDecoder.decode(this.tokenizer.decode(body.ids));
    if (body.kind === "json") call.json.push(raw);
    else if (body.key === undefined) this.warn(out, "an argument without a key was dropped");
    else call.values.set(body.key, argumentValueJson(body.type, raw));
  }

  private emitCall(call: OpenCall, out: ReplyEvent[]): void {
    if (call.name === undefined || call.name === "") {
      this.warn(out, "a tool call without a tool name was dropped");
      return;
    }
    let args: string;
    // A json block stands for the arguments only when it is the whole body (chat.md 2.9).
    if (call.json.length === 1 && call.values.size === 0) args = call.json[0] as string;
    else {
      if (call.json.length > 0) this.warn(out, `tool call ${JSON.stringify(call.name)}: a json block that is not the whole call body was ignored`);
      args = argumentsObject(call.values);
    }
    const index = this.calls++;
    out.push({ kind: "tool_call", call: { index, id: this.callId(index), name: call.name, arguments: args } });
  }

  private dropCall(out: ReplyEvent[], why: string): void {
    const name = this.call?.name;
    this.call = undefined;
    this.warn(out, `an unfinished tool call${name === undefined ? "" : ` to ${JSON.stringify(name)}`} was dropped: ${why}`);
  }

  /** The tools section is over; with no call in it, it was prose about the format: content. */
  private closeSection(out: ReplyEvent[]): void {
    if (!this.sectionHasCall) {
      const stream = this.content;
      this.emit(out, "content", stream.push(this.tokenizer.decode(this.section)) + stream.end());
    }
    this.section = [];
    this.sectionHasCall = false;
  }

  /** A control id ends the current run of text: its held bytes will never be completed. */
  private endRun(out: ReplyEvent[]): void {
    this.emit(out, "reasoning", this.reasoning.end());
    this.emit(out, "content", this.content.end());
    this.emit(out, "content", this.betweenText.push(this.between.end()));
  }

  private enter(state: State): void {
    if (this.state === "between") this.betweenText.reset();
    this.state = state;
  }

  /** Ends the reply wherever it stands: releases held text, drops what cannot be finished. */
  private close(out: ReplyEvent[]): void {
    if (this.header !== undefined) {
      this.warn(out, `an unfinished tag header ${this.describe(this.header.ids)} was dropped`);
      this.header = undefined;
    }
    this.endRun(out);
    if (this.state === "call") this.dropCall(out, "the reply ended inside it");
    if (this.state === "call" || this.state === "tools") this.closeSection(out);
    this.enter("closed");
  }

  private emit(out: ReplyEvent[], kind: "reasoning" | "content", text: string): void {
    if (text.length > 0) out.push({ kind, text });
  }

  private warn(out: ReplyEvent[], message: string): void {
    out.push({ kind: "warning", message });
  }

  private describe(ids: readonly number[]): string {
    return JSON.stringify(bodyDecoder.decode(this.tokenizer.decode(ids)));
  }
}
