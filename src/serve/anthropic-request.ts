/**
 * An Anthropic Messages body (`POST /v1/messages`, chat.md 4.9) as the one chat request: the
 * blocks become the OpenAI messages the chat reader checks (chat/request.ts), so every range,
 * context rule and refusal is that reader's. What is Anthropic's own is read here: `max_tokens`
 * (required), `system` as a string or text blocks, content blocks (`text`, `thinking`,
 * `tool_use`, `tool_result`), tools with `input_schema`, `tool_choice`, `thinking`,
 * `stop_sequences`. `cache_control` is accepted and ignored (every prefix is reused anyway).
 *
 * Thinking (K3's switch and effort): `{"type": "disabled"}` or absent (as the hosted API) is off;
 * `{"type": "enabled", "budget_tokens": N}` is on at effort low below 4,096, high below 16,384,
 * max from there; `{"type": "adaptive"}` is on at `output_config.effort` (low; medium and high
 * are high; max), max when not given.
 */
import { dumpsCompact } from "../chat/json-text.ts";
import { Fields, itemFields, quote, refuse, typeName } from "../chat/fields.ts";
import { isJsonArray, isJsonObject, type JsonValue } from "../chat/json-value.ts";
import { parseChatRequest } from "../chat/request.ts";
import type { ChatRequest } from "../chat/request-types.ts";
import { defined, doorFields } from "./responses-request.ts";

/** Top-level fields the API takes (with its beta headers); any other is refused, as the API does. */
const knownFields = new Set([
  "model", "max_tokens", "messages", "system", "stop_sequences", "stream", "temperature", "top_p", "top_k", "tools", "tool_choice",
  "thinking", "metadata", "service_tier", "output_config", "context_management", "container", "mcp_servers", "betas", "seed",
]);

export interface MessagesRequest {
  chat: ChatRequest;
  /** The stop sequences as sent, to name the one that ended a reply. */
  stopSequences: readonly string[];
}

type Plain = { [key: string]: unknown };

/** Whether a block list carries a `cache_control` mark. */
function marked(content: JsonValue | undefined): boolean {
  return isJsonArray(content) && content.some((block) => isJsonObject(block) && block.get("cache_control") !== undefined && block.get("cache_control") !== null);
}

/** Text of a `text` block list, or a string as it is; `what` names the field in refusals. */
function textBlocks(value: JsonValue, at: string, allowed: readonly string[] = ["text"]): string[] {
  if (typeof value === "string") return [value];
  if (!isJsonArray(value)) throw refuse(at, `expected a string or a list of content blocks, got ${typeName(value)}`);
  return value.map((_, i) => {
    const block = itemFields(value, i, at, "a content block");
    const type = block.requiredString("type", "the block's type");
    if (!allowed.includes(type)) throw refuse(block.at("type"), `${quote(type)} blocks are not supported here (only ${allowed.join(", ")}; k3 is text-only)`);
    return block.requiredString("text", "the block's text");
  });
}

function thinkingFields(body: Fields): Plain {
  const thinking = body.object("thinking");
  if (thinking === undefined) return { thinking: { type: "disabled" } };
  const type = thinking.requiredString("type", '"enabled", "disabled" or "adaptive"');
  if (type === "disabled") return { thinking: { type: "disabled" } };
  if (type === "enabled") {
    const budget = thinking.integer("budget_tokens", 1, Number.POSITIVE_INFINITY);
    if (budget === undefined) throw refuse(thinking.at("budget_tokens"), "missing (the thinking budget)");
    return { thinking: { type: "enabled", effort: budget < 4096 ? "low" : budget < 16384 ? "high" : "max" } };
  }
  if (type !== "adaptive") throw refuse(thinking.at("type"), `${quote(type)} is not one of "enabled", "disabled", "adaptive"`);
  const effort = body.object("output_config")?.string("effort");
  const efforts: Record<string, string> = { low: "low", medium: "high", high: "high", max: "max" };
  if (effort !== undefined && !(effort in efforts)) throw refuse("output_config.effort", `${quote(effort)} is not one of "low", "medium", "high", "max"`);
  return { thinking: { type: "enabled", effort: effort === undefined ? "max" : efforts[effort] } };
}

function toolFields(body: Fields): Plain {
  const out: Plain = {};
  const tools = body.array("tools");
  if (tools !== undefined) {
    out.tools = tools.map((_, i) => {
      const tool = itemFields(tools, i, "tools", "a tool");
      const type = tool.string("type");
      if (type !== undefined && type !== "custom") throw refuse(tool.at("type"), `${quote(type)}: server tools are not available here (only custom tools with an input_schema)`);
      const schema = tool.value("input_schema");
      if (schema === undefined) throw refuse(tool.at("input_schema"), "missing (the tool's JSON schema)");
      return { type: "function", function: defined({ name: tool.requiredString("name", "the tool's name"), description: tool.string("description"), parameters: schema }) };
    });
  }
  const choice = body.object("tool_choice");
  if (choice !== undefined) {
    const type = choice.requiredString("type", '"auto", "any", "tool" or "none"');
    if (type === "auto" || type === "none") out.tool_choice = type;
    else if (type === "any") out.tool_choice = "required";
    else if (type === "tool") out.tool_choice = { type: "function", function: { name: choice.requiredString("name", "the tool to call") } };
    else throw refuse(choice.at("type"), `${quote(type)} is not one of "auto", "any", "tool", "none"`);
  }
  return out;
}

/** One Anthropic message as OpenAI messages: a user turn's tool results become tool messages. */
function messageOf(m: Fields): Plain[] {
  const role = m.requiredString("role", '"user" or "assistant"');
  const content = m.value("content");
  if (content === undefined) throw refuse(m.at("content"), "missing");
  if (role === "system") return [{ role: "system", content: textBlocks(content, m.at("content")).join("\n") }];
  if (role !== "user" && role !== "assistant") throw refuse(m.at("role"), `${quote(role)} is not "user" or "assistant"`);
  if (typeof content === "string") return [{ role, content }];
  if (!isJsonArray(content)) throw refuse(m.at("content"), `expected a string or a list of content blocks, got ${typeName(content)}`);
  const texts: string[] = [];
  const out: Plain[] = [];
  let reasoning: string | undefined;
  const calls: Plain[] = [];
  content.forEach((_, i) => {
    const block = itemFields(content, i, m.at("content"), "a content block");
    const type = block.requiredString("type", "the block's type");
    if (type === "text") texts.push(block.requiredString("text", "the block's text"));
    else if (role === "assistant" && type === "thinking") reasoning = (reasoning ?? "") + block.requiredString("thinking", "the reasoning");
    else if (role === "assistant" && type === "redacted_thinking") return;
    else if (role === "assistant" && type === "tool_use") {
      const input = block.value("input") ?? new Map();
      if (!isJsonObject(input)) throw refuse(block.at("input"), `expected an object, got ${typeName(input)}`);
      calls.push({ id: block.requiredString("id", "the call's id"), type: "function", function: { name: block.requiredString("name", "the tool's name"), arguments: dumpsCompact(input) } });
    } else if (role === "user" && type === "tool_result") {
      const result = block.value("content");
      out.push({ role: "tool", tool_call_id: block.requiredString("tool_use_id", "the call it answers"), content: result === undefined ? "" : textBlocks(result, block.at("content")).join("\n") });
    } else {
      throw refuse(block.at("type"), `${quote(type)} blocks are not supported in ${role} messages (k3 is text-only)`);
    }
  });
  if (role === "user") return texts.length > 0 || out.length === 0 ? [...out, { role, content: texts.join("\n") }] : out;
  return [{ role, content: texts.join("\n"), ...(reasoning !== undefined && { reasoning_content: reasoning }), ...(calls.length > 0 && { tool_calls: calls }) }];
}

/** `count_tokens` takes the same body without `max_tokens` (and nothing is generated). */
export function parseMessagesRequest(bytes: Uint8Array, purpose: "generate" | "count" = "generate"): MessagesRequest {
  const body = doorFields(bytes, knownFields, () => "Extra inputs are not permitted");
  const maxTokens = body.integer("max_tokens", 1, Number.POSITIVE_INFINITY);
  if (maxTokens === undefined && purpose === "generate") throw refuse("max_tokens", "Field required");
  const items = body.array("messages");
  if (items === undefined) throw refuse("messages", "Field required");
  const system = body.value("system");
  const messages: Plain[] = system === undefined ? [] : [{ role: "system", content: textBlocks(system, "system").join("\n") }];
  // A cache_control mark says the client will send this prefix again: the prompt cache keeps a state after it.
  const cacheBreaks: number[] = system !== undefined && marked(system) ? [0] : [];
  items.forEach((item, i) => {
    messages.push(...messageOf(itemFields(items, i, "messages", "a message")));
    if (isJsonObject(item) && marked(item.get("content"))) cacheBreaks.push(messages.length - 1);
  });
  const stops = body.array("stop_sequences") ?? [];
  const stopSequences = stops.map((s, i) => {
    if (typeof s !== "string") throw refuse(`stop_sequences[${i}]`, `expected a string, got ${typeName(s)}`);
    return s;
  });
  const passed = (key: string) => (body.value(key) === undefined ? {} : { [key]: body.value(key) });
  const chat = parseChatRequest({
    messages, ...(purpose === "generate" && passed("max_tokens")), ...passed("model"), ...passed("stream"), ...passed("temperature"), ...passed("top_p"),
    ...passed("top_k"), ...passed("seed"), ...(stopSequences.length > 0 && { stop: stopSequences }), ...thinkingFields(body), ...toolFields(body),
  }, { source: "request" });
  return { chat: { ...chat, ...(cacheBreaks.length > 0 && { cacheBreaks }) }, stopSequences };
}

