/**
 * `parseChatRequest`: an OpenAI chat-completions body (bytes, text, or an already parsed value)
 * to a ChatRequest, or a usage error (exit 2, HTTP 400) whose one line names the field. Fields
 * k3 does not use (`user`, `metadata`, ...) are accepted and ignored; fields that
 * would change the prompt in a way k3 cannot honour are refused.
 */
import { usageError } from "../errors.ts";
import { inputLimits } from "../input-limits.ts";
import { refuse, type Fields } from "./fields.ts";
import { fromPlainValue } from "./json-value.ts";
import { parseMessages, type MessageOptions } from "./request-messages.ts";
import { parseThinking } from "./request-thinking.ts";
import { checkTools, parseResponseFormat, parseToolChoice, type DeclaredNames } from "./request-tools.ts";
import { objectFields, readGenerationFields, requestFields } from "./request-generation.ts";
import type { ChatRequest } from "./request-types.ts";
import { decodeUtf8 } from "./utf8.ts";

/** A body larger than this is refused before it is decoded. */
export const MAX_REQUEST_BYTES = inputLimits.requestBytes;

export interface ParseOptions extends MessageOptions {
  /** How syntax errors name the body (`request:3:14: ...`). */
  readonly source?: string;
}

/**
 * A ChatRequest from the body's bytes or text (number lexemes kept), or from a value already
 * parsed (a JsonValue from `parseJson`, or plain JavaScript data, whose numbers lost their lexemes).
 */
export function parseChatRequest(body: unknown, options: ParseOptions = {}): ChatRequest {
  const source = options.source ?? "request";
  if (body instanceof Uint8Array) {
    if (body.length > MAX_REQUEST_BYTES) throw usageError(`${source}: ${body.length} bytes, more than the ${MAX_REQUEST_BYTES} allowed`);
    const decoded = decodeUtf8(body);
    if ("invalidAt" in decoded) {
      const before = new TextDecoder().decode(body.subarray(0, decoded.invalidAt));
      const line = before.split("\n").length;
      const byte = (body[decoded.invalidAt] as number).toString(16).padStart(2, "0");
      throw usageError(`${source}:${line}: not valid UTF-8 (byte 0x${byte} at offset ${decoded.invalidAt})`);
    }
    return readRequest(requestFields(decoded.text, source), options);
  }
  if (typeof body === "string") return readRequest(requestFields(body, source), options);
  return readRequest(objectFields(fromPlainValue(body, source), source), options);
}

function readRequest(body: Fields, options: ParseOptions): ChatRequest {
  if (body.boolean("continue_final_message") === true) {
    throw refuse("continue_final_message", "assistant prefill is not supported (the reference renderer always closes the last assistant message)");
  }
  if (body.boolean("add_generation_prompt") === false) throw refuse("add_generation_prompt", "false is not supported (a chat request always ends with the assistant's turn)");

  const declared: DeclaredNames = new Map();
  const tools = checkTools(body.array("tools") ?? [], "tools", declared);
  const notes: string[] = [];
  const messageItems = body.array("messages");
  if (messageItems === undefined) throw refuse("messages", "missing (the conversation)");
  const messages = parseMessages(messageItems, "messages", declared, options, notes);
  const { thinking, effort } = parseThinking(body);
  const toolChoice = parseToolChoice(body, declared.size);
  const responseFormat = parseResponseFormat(body);
  return {
    model: body.string("model"), messages, tools, thinking, effort, toolChoice, responseFormat,
    ...readGenerationFields(body, ["max_completion_tokens", "max_tokens"], "chat"), notes,
  };
}
