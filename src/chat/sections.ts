/** The sections of chat.md 2.6, each appended to a segment list. */
import { dumpsDefault } from "./json-text.ts";
import { isJsonArray, isJsonObject, JsonNumber, type JsonValue } from "./json-value.ts";
import { isBlank } from "./python-text.ts";
import type { AssistantMessage, ContentParts, ToolCall } from "./request-types.ts";
import type { ToolResult } from "./tool-results.ts";
import { closeTag, control, openTag, text, type Attribute, type Segment } from "./xtml.ts";

/**
 * A system message the renderer writes itself: `type` is tool-declare, thinking-effort, ... The
 * reference trims the body; none of notes.ts's bodies has whitespace to trim at either end.
 */
export function systemNote(out: Segment[], type: string, body: string): void {
  out.push(...openTag("message", [["role", "system"], ["type", type]]), text(body), ...closeTag("message"), control("endOfMessage"));
}

function withName(role: string, name: string | undefined): Attribute[] {
  return name === undefined ? [["role", role]] : [["role", role], ["name", name]];
}

function body(out: Segment[], content: ContentParts): void {
  for (const part of content) out.push(text(part));
}

export function textMessage(out: Segment[], role: "system" | "user", name: string | undefined, content: ContentParts): void {
  out.push(...openTag("message", withName(role, name)));
  body(out, content);
  out.push(...closeTag("message"), control("endOfMessage"));
}

/**
 * A history assistant turn. With thinking on the think section is always there (empty when the
 * reasoning is blank: chat.md 2.10 trap 3), and non-blank reasoning is written untrimmed; with
 * thinking off it is left out even when the message carries reasoning.
 */
export function assistantMessage(out: Segment[], message: AssistantMessage, thinking: boolean): void {
  out.push(...openTag("message", withName("assistant", message.name)));
  if (thinking) {
    out.push(...openTag("think"));
    if (message.reasoning !== undefined && !isBlank(message.reasoning)) out.push(text(message.reasoning));
    out.push(...closeTag("think"));
  }
  out.push(...openTag("response"));
  body(out, message.content);
  out.push(...closeTag("response"));
  if (message.toolCalls.length > 0) {
    out.push(...openTag("tools"));
    message.toolCalls.forEach((call, i) => toolCall(out, call, i + 1));
    out.push(...closeTag("tools"));
  }
  out.push(...closeTag("message"), control("endOfMessage"));
}

function toolCall(out: Segment[], call: ToolCall, index: number): void {
  out.push(...openTag("call", [["tool", call.name], ["index", index]]));
  if (call.arguments.kind === "raw") {
    out.push(...openTag("json", [["type", "object"]]), text(call.arguments.text), ...closeTag("json"));
  } else {
    for (const [key, value] of call.arguments.map) {
      out.push(...openTag("argument", [["key", key], ["type", argumentType(value)]]));
      // A string is written raw, without quotes or escapes; anything else as Python's json.dumps.
      out.push(text(typeof value === "string" ? value : dumpsDefault(value)));
      out.push(...closeTag("argument"));
    }
  }
  out.push(...closeTag("call"));
}

/** Booleans are checked before numbers, as the reference must (a Python bool is an int). */
export function argumentType(value: JsonValue): string {
  if (typeof value === "boolean") return "boolean";
  if (value === null) return "null";
  if (value instanceof JsonNumber) return "number";
  if (typeof value === "string") return "string";
  if (isJsonArray(value)) return "array";
  if (isJsonObject(value)) return "object";
  return "string";
}

export function toolResult(out: Segment[], result: ToolResult): void {
  out.push(...openTag("message", [["role", "tool"], ["tool", result.tool], ["index", result.index]]));
  body(out, result.message.content);
  out.push(...closeTag("message"), control("endOfMessage"));
}
