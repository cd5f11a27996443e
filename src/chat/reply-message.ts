/**
 * The whole reply as one OpenAI assistant message (chat.md 4.3): the parser's events folded
 * together. The non-streaming path runs the parser over every generated id; a streaming server
 * can fold the same events as it sends them, so both report the same message.
 */
import type { Tokenizer } from "../tokenizer/index.ts";
import { type ReplyEnd, type ReplyEvent, ReplyParser, type ReplyParserOptions } from "./parse.ts";
import { type OpenAIToolCall, openAIToolCall } from "./tool-call.ts";

export interface AssistantMessage {
  readonly role: "assistant";
  /** Null when the response section was empty. */
  readonly content: string | null;
  /** Always a string (possibly empty) with thinking on, so an echoed message keeps its reasoning; null with thinking off. */
  readonly reasoning_content: string | null;
  /** Omitted when the reply made no complete call. */
  readonly tool_calls?: readonly OpenAIToolCall[];
}

export interface ParsedReply {
  readonly message: AssistantMessage;
  readonly warnings: readonly string[];
  /** How the reply ended inside the ids, if it did (a stop id or a new turn). */
  readonly end: ReplyEnd | undefined;
}

export class MessageBuilder {
  private readonly thinking: boolean;
  private reasoning = "";
  private content = "";
  private readonly calls: OpenAIToolCall[] = [];
  private readonly warned: string[] = [];

  constructor(thinking: boolean) {
    this.thinking = thinking;
  }

  add(events: readonly ReplyEvent[]): void {
    for (const event of events) {
      if (event.kind === "reasoning") this.reasoning += event.text;
      else if (event.kind === "content") this.content += event.text;
      else if (event.kind === "tool_call") this.calls.push(openAIToolCall(event.call));
      else this.warned.push(event.message);
    }
  }

  get warnings(): readonly string[] {
    return this.warned;
  }

  message(): AssistantMessage {
    return {
      role: "assistant",
      content: this.content === "" ? null : this.content,
      reasoning_content: this.thinking ? this.reasoning : null,
      ...(this.calls.length > 0 ? { tool_calls: [...this.calls] } : {}),
    };
  }
}

/** Parses a complete list of generated ids (the stop id included or not). */
export function parseReply(tokenizer: Tokenizer, ids: readonly number[], options: ReplyParserOptions): ParsedReply {
  const parser = new ReplyParser(tokenizer, options);
  const builder = new MessageBuilder(options.thinking);
  for (const id of ids) builder.add(parser.push(id));
  builder.add(parser.finish());
  return { message: builder.message(), warnings: builder.warnings, end: parser.end };
}
