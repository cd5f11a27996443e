/**
 * The `messages` array (chat.md 2.3, 2.6, 4.2): roles, bodies, assistant reasoning and tool
 * calls, tool results, dynamic tool declarations. The reference drops what it does not know
 * (a `developer` message, an image); k3 refuses it instead, because a dropped instruction is a
 * silent wrong answer.
 */
import { Fields, itemFields, quote, refuse, typeName } from "./fields.ts";
import { JsonSyntaxError, parseJson } from "./json-parse.ts";
import { isJsonArray, isJsonObject, type JsonArray, type JsonValue } from "./json-value.ts";
import { isBlank } from "./python-text.ts";
import { checkTools, type DeclaredNames } from "./request-tools.ts";
import type { AssistantMessage, ChatMessage, ContentParts, ToolArguments, ToolCall, ToolMessage } from "./request-types.ts";
import { inputLimits } from "../input-limits.ts";

export interface MessageOptions {
  /** Render `developer` messages as `system` (and say so in the request's notes) instead of refusing them. */
  readonly developerAsSystem?: boolean;
}

const ROLES = ["system", "user", "assistant", "tool"];
/** Content part types of other modalities: k3 is a text-only engine (chat.md 2.6.8). */
const MEDIA_PARTS = ["image", "image_url", "input_image", "video", "video_url", "audio", "input_audio", "file"];

export function parseMessages(items: JsonArray, path: string, declared: DeclaredNames, options: MessageOptions, notes: string[]): ChatMessage[] {
  if (items.length === 0) throw refuse(path, "is empty (a chat needs at least one message)");
  if (items.length > inputLimits.requestMessages) throw refuse(path, `${items.length} messages, more than the ${inputLimits.requestMessages} a request may hold`);
  return items.map((_, i) => parseMessage(itemFields(items, i, path, "a message"), i, declared, options, notes));
}

function parseMessage(m: Fields, at: number, declared: DeclaredNames, options: MessageOptions, notes: string[]): ChatMessage {
  let role = m.requiredString("role", `one of ${ROLES.map((r) => `"${r}"`).join(", ")}`);
  if (role === "developer" && options.developerAsSystem === true) {
    notes.push(`${m.at("role")}: "developer" rendered as "system"`);
    role = "system";
  }
  if (!ROLES.includes(role)) {
    const hint = role === "developer" ? " (send developer instructions as a system message)" : "";
    throw refuse(m.at("role"), `${quote(role)} is not one of ${ROLES.map((r) => `"${r}"`).join(", ")}${hint}`);
  }
  if (m.boolean("partial") === true) {
    throw refuse(m.at("partial"), "assistant prefill is not supported (the reference renderer always closes the last assistant message)");
  }
  if (role !== "system" && m.has("tools")) throw refuse(m.at("tools"), `tools can be declared only in system messages, not in ${role === "assistant" ? "an" : "a"} ${role} message`);
  const name = nonEmpty(m.string("name"));

  if (role === "system") {
    const tools = m.array("tools");
    if (tools !== undefined && tools.length > 0) {
      checkTools(tools, m.at("tools"), declared);
      if (contentOf(m).some((part) => part.length > 0)) throw refuse(m.at("content"), "must be empty in a system message that carries tools");
      return { kind: "tools", at, tools };
    }
    return { kind: "system", at, name, content: contentOf(m) };
  }
  if (role === "user") return { kind: "user", at, name, content: contentOf(m) };
  if (role === "assistant") return parseAssistant(m, at, name);
  return parseToolResult(m, at);
}

function nonEmpty(text: string | undefined): string | undefined {
  return text === undefined || text.length === 0 ? undefined : text;
}

/** A body: a string is one segment, a list of text parts one segment each, null nothing. */
function contentOf(m: Fields): ContentParts {
  const value = m.value("content");
  const path = m.at("content");
  if (value === undefined) return [];
  if (typeof value === "string") return [value];
  if (!isJsonArray(value)) throw refuse(path, `expected a string, a list of text parts or null, got ${typeName(value)}`);
  return value.map((_, j) => {
    const part = itemFields(value, j, path, "a content part");
    const type = part.requiredString("type", '"text"');
    if (MEDIA_PARTS.includes(type)) throw refuse(part.at("type"), `${quote(type)} parts are not supported (k3 is a text-only engine)`);
    if (type !== "text") throw refuse(part.at("type"), `${quote(type)} is not a known content part type (k3 reads "text" parts)`);
    return part.requiredString("text", "the text of a text part");
  });
}

function parseAssistant(m: Fields, at: number, name: string | undefined): AssistantMessage {
  if (m.has("function_call")) throw refuse(m.at("function_call"), "the legacy form is not supported (send tool_calls)");
  const reasoning = m.string("reasoning_content") ?? m.string("reasoning");
  const calls = m.array("tool_calls") ?? [];
  const toolCalls = calls.map((_, j) => parseToolCall(itemFields(calls, j, m.at("tool_calls"), "a tool call")));
  return { kind: "assistant", at, name, content: contentOf(m), reasoning, toolCalls };
}

function parseToolCall(call: Fields): ToolCall {
  const type = call.string("type");
  if (type !== undefined && type !== "function") throw refuse(call.at("type"), `${quote(type)} is not "function"`);
  const fn = call.object("function");
  if (fn === undefined) throw refuse(call.at("function"), "missing (the called function's name and arguments)");
  const name = fn.requiredString("name", "the called function's name");
  if (name.length === 0) throw refuse(fn.at("name"), "is empty");
  return { id: call.string("id"), name, arguments: parseArguments(fn) };
}

/**
 * chat.md 2.3: a JSON object string becomes the argument map (key order as written), a blank
 * string `{}`, text that is not JSON stays raw (the model sees its own malformed arguments), and
 * JSON that is not an object is refused. Read as Python's `json.loads` reads it, NaN included.
 */
function parseArguments(fn: Fields): ToolArguments {
  const path = fn.at("arguments");
  const value = fn.value("arguments");
  if (value === undefined) throw refuse(path, "missing (a JSON object, or a string holding one)");
  if (isJsonObject(value)) return { kind: "map", map: value };
  if (typeof value !== "string") throw refuse(path, `expected a string or an object, got ${typeName(value)}`);
  if (isBlank(value)) return { kind: "map", map: new Map() };
  let parsed: JsonValue;
  try {
    parsed = parseJson(value, { pythonConstants: true });
  } catch (error) {
    if (error instanceof JsonSyntaxError && error.kind === "syntax") return { kind: "raw", text: value };
    if (error instanceof JsonSyntaxError) throw refuse(path, `${error.line}:${error.column}: ${error.reason}`);
    throw error;
  }
  if (!isJsonObject(parsed)) throw refuse(path, `is JSON but ${typeName(parsed)}, not an object`);
  return { kind: "map", map: parsed };
}

function parseToolResult(m: Fields, at: number): ToolMessage {
  const toolCallId = m.string("tool_call_id") ?? m.string("id");
  if (toolCallId === undefined || toolCallId.length === 0) {
    throw refuse(m.at("tool_call_id"), "missing (a tool message names the call it answers)");
  }
  return { kind: "tool", at, toolCallId, tool: nonEmpty(m.string("tool")), name: nonEmpty(m.string("name")), content: contentOf(m) };
}
