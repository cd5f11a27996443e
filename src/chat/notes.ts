/**
 * The fixed texts of the system messages the renderer adds (chat.md 2.6.6 and 2.6.7), with their
 * real line breaks and no trailing newline. They are the released training-time wording, down
 * to the `medium` the effort note advertises and the renderer refuses.
 */
import { dumpsCompact } from "./json-text.ts";
import { sortKeysDeep, type JsonValue } from "./json-value.ts";
import type { Effort, ResponseFormat } from "./request-types.ts";

const fence = "```";

/** Declarations and schemas are shown compact and deep-sorted (chat.md 2.3-2.4). */
function sortedCompact(value: JsonValue): string {
  return dumpsCompact(sortKeysDeep(value));
}

export function toolDeclareBody(tools: JsonValue): string {
  return `# Tools\nHere are the available tools, described in JSONSchema.\n\n${fence}json\n${sortedCompact(tools)}\n${fence}`;
}

export function dynamicToolsBody(tools: JsonValue): string {
  return "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n" +
    "You have access to all existing and extended tools.\nHere are the specs for the extended tools.\n\n" +
    `${fence}json\n${sortedCompact(tools)}\n${fence}`;
}

export function effortBody(effort: Effort): string {
  return "`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), " +
    "supported values include `low`, `medium`, `high`, and `max`.\n" +
    `Now the system is invoked with \`thinking_effort=${effort}\`.`;
}

export function toolChoiceBody(choice: "required" | "none"): string {
  return choice === "required"
    ? "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message."
    : "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.";
}

const rawJson = `Your response must be raw JSON data without markdown code blocks (${fence}json) or any additional formatting.`;

/** The response-format body, or undefined for `text` (which adds no message). */
export function responseFormatBody(format: ResponseFormat): string | undefined {
  if (format.type === "json_object") return `The system is invoked with \`response_format=json_object\`.\n${rawJson}`;
  if (format.type === "json_schema") {
    return `The system is invoked with \`response_format=json_schema\`.\n${rawJson}\n` +
      `The JSON data must match the following schema:\n${fence}json\n${sortedCompact(format.schema)}\n${fence}`;
  }
  return undefined;
}
