/**
 * `parseChatRequest`: an OpenAI chat-completions body (bytes, text, or an already parsed value)
 * to a ChatRequest, or a usage error (exit 2, HTTP 400) whose one line names the field. Fields
 * k3 does not use (`user`, `metadata`, `logprobs`, ...) are accepted and ignored; fields that
 * would change the prompt in a way k3 cannot honour are refused.
 */
import { checkGivenSampling } from "../decode/sampling-options.ts";
import { usageError } from "../errors.ts";
import { inputLimits } from "../input-limits.ts";
import { Fields, quote, refuse, typeName } from "./fields.ts";
import { JsonSyntaxError, parseJson } from "./json-parse.ts";
import { fromPlainValue, isJsonObject, type JsonValue } from "./json-value.ts";
import { parseMessages, type MessageOptions } from "./request-messages.ts";
import { parseThinking } from "./request-thinking.ts";
import { checkTools, parseResponseFormat, parseToolChoice, type DeclaredNames } from "./request-tools.ts";
import type { ChatRequest, Sampling } from "./request-types.ts";
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
  let root: JsonValue;
  if (body instanceof Uint8Array) {
    if (body.length > MAX_REQUEST_BYTES) throw usageError(`${source}: ${body.length} bytes, more than the ${MAX_REQUEST_BYTES} allowed`);
    const decoded = decodeUtf8(body);
    if ("invalidAt" in decoded) {
      const before = new TextDecoder().decode(body.subarray(0, decoded.invalidAt));
      const line = before.split("\n").length;
      const byte = (body[decoded.invalidAt] as number).toString(16).padStart(2, "0");
      throw usageError(`${source}:${line}: not valid UTF-8 (byte 0x${byte} at offset ${decoded.invalidAt})`);
    }
    root = readText(decoded.text, source);
  } else if (typeof body === "string") {
    root = readText(body, source);
  } else {
    root = fromPlainValue(body, source);
  }
  return readRequest(root, options);
}

function readText(text: string, source: string): JsonValue {
  try {
    return parseJson(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw usageError(`${source}:${error.message}`);
    throw error;
  }
}

function readRequest(root: JsonValue, options: ParseOptions): ChatRequest {
  if (!isJsonObject(root)) throw usageError(`${options.source ?? "request"}: expected a JSON object, got ${typeName(root)}`);
  const body = new Fields(root, "");

  const n = body.integer("n", Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY);
  if (n !== undefined && n !== 1) throw refuse("n", `${n} is not supported (k3 returns one choice: n must be 1)`);
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
  const streamOptions = body.object("stream_options");

  return {
    model: body.string("model"),
    messages,
    tools,
    thinking,
    effort,
    toolChoice: parseToolChoice(body, declared.size),
    responseFormat: parseResponseFormat(body),
    sampling: parseSampling(body),
    maxTokens: body.integer("max_completion_tokens", 1, Number.POSITIVE_INFINITY) ?? body.integer("max_tokens", 1, Number.POSITIVE_INFINITY),
    stop: parseStop(body),
    stream: body.boolean("stream") ?? false,
    includeUsage: streamOptions?.boolean("include_usage") ?? false,
    notes,
  };
}

/**
 * Read as numbers here, checked by the one table of ranges (decode/sampling-options.ts) that the
 * flags, /v1/completions and /set use too; chat.md 3.4 rule 5: any valid value is accepted.
 */
function parseSampling(body: Fields): Sampling {
  const numberAt = (key: string) => body.number(key, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY);
  const given = checkGivenSampling({
    temperature: numberAt("temperature"), topP: numberAt("top_p"), topK: numberAt("top_k"), minP: numberAt("min_p"), seed: numberAt("seed"),
    presencePenalty: numberAt("presence_penalty"), frequencyPenalty: numberAt("frequency_penalty"),
  }, "field");
  return {
    temperature: given.temperature, topP: given.topP, topK: given.topK, minP: given.minP, seed: given.seed,
    presencePenalty: given.presencePenalty, frequencyPenalty: given.frequencyPenalty,
  };
}

function parseStop(body: Fields): string[] {
  const value = body.value("stop");
  if (value === undefined) return [];
  if (typeof value === "string") return [value];
  const list = body.array("stop") ?? [];
  return list.map((item, i) => {
    if (typeof item !== "string") throw refuse(`stop[${i}]`, `expected a string, got ${typeName(item)}`);
    if (item.length === 0) throw refuse(`stop[${i}]`, `${quote(item)} is empty`);
    return item;
  });
}
