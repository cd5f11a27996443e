/**
 * An OpenAI Responses body (`POST /v1/responses`, chat.md 4.9) as the one chat request: the
 * `input` items become the OpenAI chat messages the chat reader checks (chat/request.ts), so
 * every range, context rule and refusal is that reader's. Read here: `instructions` (a system
 * message first), `input` as a string or items (`message` with `input_text`/`output_text`
 * parts, `reasoning` sent back, `function_call`, `function_call_output`), function `tools`,
 * `tool_choice`, `max_output_tokens`, `reasoning.effort`, `text.format`.
 *
 * Effort: `none` is thinking off; `minimal` and `low` are low; `medium` and `high` are high;
 * `xhigh` is max; absent, K3's default (on, max). `store` is accepted and nothing is kept (the
 * reply says `store: false`); `previous_response_id` is refused: send the conversation in
 * `input`, whose prefix the server reuses exactly.
 */
import { Fields, itemFields, quote, refuse, typeName } from "../chat/fields.ts";
import { isJsonArray, type JsonValue } from "../chat/json-value.ts";
import { parseChatRequest } from "../chat/request.ts";
import { requestFields } from "../chat/request-generation.ts";
import type { ChatRequest } from "../chat/request-types.ts";

const knownFields = new Set([
  "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "max_output_tokens", "temperature", "top_p", "reasoning",
  "text", "stream", "store", "include", "metadata", "user", "prompt_cache_key", "prompt_cache_retention", "client_metadata", "service_tier",
  "truncation", "safety_identifier", "stream_options", "previous_response_id", "seed", "background", "max_tool_calls",
]);

type Plain = { [key: string]: unknown };

/** A client's unknown key as a field name: short plain keys as they are, others quoted and cut (one short line). */
export const fieldName = (key: string): string => (/^[A-Za-z0-9_.-]{1,64}$/.test(key) ? key : quote(key));

/** `fields` without its absent ones (the chat reader takes JSON values only). */
export const defined = (fields: Plain): Plain => Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));

function partsText(value: JsonValue, at: string): string {
  if (typeof value === "string") return value;
  if (!isJsonArray(value)) throw refuse(at, `expected a string or a list of content parts, got ${typeName(value)}`);
  return value.map((_, i) => {
    const part = itemFields(value, i, at, "a content part");
    const type = part.requiredString("type", "the part's type");
    if (type !== "input_text" && type !== "output_text" && type !== "text" && type !== "summary_text" && type !== "reasoning_text") {
      throw refuse(part.at("type"), `${quote(type)} parts are not supported (k3 is text-only)`);
    }
    return part.requiredString("text", "the part's text");
  }).join("");
}

/** The input items as chat messages: an assistant message gathers the reasoning before it and the calls after it. */
function messagesOf(items: readonly JsonValue[]): Plain[] {
  const out: Plain[] = [];
  let assistant: Plain | undefined;
  let reasoning: string | undefined;
  const flush = () => {
    if (assistant) out.push(assistant);
    assistant = undefined;
  };
  const openAssistant = () => {
    if (!assistant) {
      assistant = { role: "assistant", content: "", ...(reasoning !== undefined && { reasoning_content: reasoning }) };
      reasoning = undefined;
    }
    return assistant;
  };
  items.forEach((_, i) => {
    const item = itemFields(items, i, "input", "an input item");
    const type = item.string("type") ?? (item.has("role") ? "message" : undefined);
    if (type === "message") {
      const role = item.requiredString("role", '"user", "assistant", "system" or "developer"');
      const text = partsText(item.value("content") ?? "", item.at("content"));
      if (role === "assistant") {
        if (assistant && (assistant.content as string).length > 0) flush();
        openAssistant().content = text;
      } else if (role === "user" || role === "system" || role === "developer") {
        flush();
        out.push({ role: role === "developer" ? "system" : role, content: text });
      } else {
        throw refuse(item.at("role"), `${quote(role)} is not one of "user", "assistant", "system", "developer"`);
      }
    } else if (type === "reasoning") {
      flush();
      const content = item.array("content");
      const summary = item.array("summary");
      reasoning = content && content.length > 0 ? partsText(content, item.at("content")) : summary ? partsText(summary, item.at("summary")) : "";
    } else if (type === "function_call") {
      const call = { id: item.requiredString("call_id", "the call's id"), type: "function", function: { name: item.requiredString("name", "the function's name"), arguments: item.requiredString("arguments", "the arguments as JSON text") } };
      const a = openAssistant();
      a.tool_calls = [...((a.tool_calls as Plain[] | undefined) ?? []), call];
    } else if (type === "function_call_output") {
      flush();
      out.push({ role: "tool", tool_call_id: item.requiredString("call_id", "the call it answers"), content: partsText(item.value("output") ?? "", item.at("output")) });
    } else {
      throw refuse(item.at("type"), `${type === undefined ? "missing" : `${quote(type)} items are not supported`} (message, reasoning, function_call, function_call_output)`);
    }
  });
  flush();
  return out;
}

/** Hosted tools the API runs itself; k3 runs no tool, so they are not offered to the model (docs/serving.md says so). */
const hostedTools = new Set(["web_search", "web_search_preview", "file_search", "code_interpreter", "computer_use_preview", "image_generation", "mcp", "local_shell", "shell", "apply_patch", "custom"]);

function toolsOf(body: Fields): Plain {
  const out: Plain = {};
  const tools = body.array("tools");
  const fn = (tool: Fields) => ({
    type: "function",
    function: defined({ name: tool.requiredString("name", "the function's name"), description: tool.string("description"), parameters: tool.value("parameters"), strict: tool.boolean("strict") }),
  });
  if (tools !== undefined) {
    out.tools = tools.flatMap((_, i) => {
      const tool = itemFields(tools, i, "tools", "a tool");
      const type = tool.requiredString("type", '"function"');
      if (type === "function") return [fn(tool)];
      // A namespace groups function tools (Codex's sub-agent tools): they are offered by their own names.
      if (type === "namespace") {
        const inner = tool.array("tools") ?? [];
        return inner.map((_, j) => {
          const t = itemFields(inner, j, tool.at("tools"), "a tool");
          if (t.string("type") !== "function") throw refuse(t.at("type"), 'a namespace holds "function" tools');
          return fn(t);
        });
      }
      if (hostedTools.has(type)) return [];
      throw refuse(tool.at("type"), `${quote(type)} tools are not available here (only "function" tools; hosted tools are left out)`);
    });
  }
  const choice = body.value("tool_choice");
  if (typeof choice === "string") out.tool_choice = choice;
  else if (choice !== undefined) {
    const c = body.object("tool_choice") as Fields;
    if (c.string("type") !== "function") throw refuse(c.at("type"), 'the object form is {"type": "function", "name": ...}');
    out.tool_choice = { type: "function", function: { name: c.requiredString("name", "the function to call") } };
  }
  return out;
}

function reasoningOf(body: Fields): Plain {
  const effort = body.object("reasoning")?.string("effort");
  if (effort === undefined) return {};
  const efforts: Record<string, string> = { minimal: "low", low: "low", medium: "high", high: "high", xhigh: "max" };
  if (effort === "none") return { thinking: { type: "disabled" } };
  if (!(effort in efforts)) throw refuse("reasoning.effort", `${quote(effort)} is not one of "none", "minimal", "low", "medium", "high", "xhigh"`);
  return { thinking: { type: "enabled", effort: efforts[effort] } };
}

function formatOf(body: Fields): Plain {
  const format = body.object("text")?.object("format");
  if (format === undefined) return {};
  const type = format.requiredString("type", '"text", "json_object" or "json_schema"');
  if (type === "text" || type === "json_object") return { response_format: { type } };
  if (type !== "json_schema") throw refuse(format.at("type"), `${quote(type)} is not one of "text", "json_object", "json_schema"`);
  return { response_format: { type, json_schema: defined({ name: format.requiredString("name", "the schema's name"), schema: format.value("schema"), strict: format.boolean("strict") }) } };
}

/** A door's body as fields: UTF-8, one JSON object, only the top-level fields its API knows (`unknown` says the refusal). */
export function doorFields(bytes: Uint8Array, known: ReadonlySet<string>, unknown: (key: string) => string): Fields {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw refuse("body", "not valid UTF-8");
  }
  const body = requestFields(text, "request");
  for (const key of body.map.keys()) if (!known.has(key)) throw refuse(fieldName(key), unknown(key));
  return body;
}

export function parseResponsesRequest(bytes: Uint8Array): ChatRequest {
  const body = doorFields(bytes, knownFields, (key) => `Unknown parameter: ${quote(key)}`);
  if (body.has("previous_response_id")) {
    throw refuse("previous_response_id", "not supported: k3 keeps no responses; send the whole conversation in input (its prefix is reused exactly)");
  }
  const input = body.value("input");
  if (input === undefined) throw refuse("input", "missing (the conversation: a string or a list of items)");
  const instructions = body.string("instructions");
  const messages = [
    ...(instructions === undefined ? [] : [{ role: "system", content: instructions }]),
    ...(typeof input === "string" ? [{ role: "user", content: input }] : isJsonArray(input) ? messagesOf(input) : (() => { throw refuse("input", `expected a string or a list of items, got ${typeName(input)}`); })()),
  ];
  const passed = (from: string, to = from) => (body.value(from) === undefined ? {} : { [to]: body.value(from) });
  return parseChatRequest({
    messages, ...passed("model"), ...passed("max_output_tokens", "max_tokens"), ...passed("temperature"), ...passed("top_p"), ...passed("seed"),
    ...passed("stream"), ...toolsOf(body), ...reasoningOf(body), ...formatOf(body),
  }, { source: "request" });
}
