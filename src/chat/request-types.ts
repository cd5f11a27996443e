/**
 * A chat-completions request after validation (chat.md 4.2): everything the renderer and the
 * server read, typed, with the request's own JSON kept where the prompt shows it verbatim (tool
 * declarations, schemas, tool-call arguments).
 */
import type { JsonArray, JsonObject } from "./json-value.ts";

/** The three efforts the renderer accepts (chat.md 2.5); `medium` is advertised but refused. */
export const EFFORTS = ["low", "high", "max"] as const;
export type Effort = (typeof EFFORTS)[number];

/** The text segments of a message body: a string is one, each text part of a list is its own. */
export type ContentParts = readonly string[];

interface FromRequest {
  /** The message's index in the request's `messages`, for error messages. */
  readonly at: number;
}

export interface TextMessage extends FromRequest {
  readonly kind: "system" | "user";
  /** Non-empty, or undefined (an empty name adds no attribute). */
  readonly name: string | undefined;
  readonly content: ContentParts;
}

/** A system message carrying a non-empty `tools` array: a tool declaration where it stands. */
export interface DynamicToolsMessage extends FromRequest {
  readonly kind: "tools";
  readonly tools: JsonArray;
}

/** Arguments as a map (key order as written), or the raw text when it was not JSON (chat.md 2.6.4). */
export type ToolArguments = { readonly kind: "map"; readonly map: JsonObject } | { readonly kind: "raw"; readonly text: string };

export interface ToolCall {
  readonly id: string | undefined;
  readonly name: string;
  readonly arguments: ToolArguments;
}

export interface AssistantMessage extends FromRequest {
  readonly kind: "assistant";
  readonly name: string | undefined;
  readonly content: ContentParts;
  /** `reasoning_content`, else `reasoning`; undefined when neither is given. */
  readonly reasoning: string | undefined;
  readonly toolCalls: readonly ToolCall[];
}

export interface ToolMessage extends FromRequest {
  readonly kind: "tool";
  /** `tool_call_id` (or `id`): which call of the preceding assistant message this answers. */
  readonly toolCallId: string;
  /** The `tool` and `name` fields when non-empty. */
  readonly tool: string | undefined;
  readonly name: string | undefined;
  readonly content: ContentParts;
}

export type ChatMessage = TextMessage | DynamicToolsMessage | AssistantMessage | ToolMessage;

/** `auto` and the named-function object render nothing; `none` and `required` add a note. */
export type ToolChoice = "auto" | "none" | "required" | { readonly function: string };

export type ResponseFormat =
  | { readonly type: "text" }
  | { readonly type: "json_object" }
  | { readonly type: "json_schema"; readonly name: string; readonly schema: JsonObject; readonly strict: boolean | undefined };

/** Sampling knobs as sent (chat.md 3.4 decides the defaults); undefined when absent. */
export interface Sampling {
  readonly temperature: number | undefined;
  readonly topP: number | undefined;
  readonly topK: number | undefined;
  readonly minP: number | undefined;
  readonly seed: number | undefined;
  readonly presencePenalty: number | undefined;
  readonly frequencyPenalty: number | undefined;
}

/** The fields both completion endpoints share (chat/request-generation.ts reads them once). */
export interface GenerationFields {
  readonly sampling: Sampling;
  /** The first of the endpoint's reply-length fields that is given (chat: `max_completion_tokens`, else `max_tokens`). */
  readonly maxTokens: number | undefined;
  readonly stop: readonly string[];
  readonly stream: boolean;
  readonly includeUsage: boolean;
  /** `n`: how many choices to generate from the one prompt, each decoding as one sequence of a batch after one shared prefill (the server checks it against --parallel). */
  readonly choices: number;
  /** Log-probabilities with this many alternatives per id (chat: `top_logprobs`; completions: `logprobs`); undefined: none. */
  readonly logprobs: number | undefined;
}

export interface ChatRequest extends GenerationFields {
  readonly model: string | undefined;
  readonly messages: readonly ChatMessage[];
  /** The request-level `tools`, as sent (validated; sorted only when rendered). */
  readonly tools: JsonArray;
  readonly thinking: boolean;
  /** The thinking effort; rendered only when `thinking` is on. */
  readonly effort: Effort;
  readonly toolChoice: ToolChoice;
  readonly responseFormat: ResponseFormat;
  /** What k3 did that the request did not spell out (an explicit developer-to-system mapping). */
  readonly notes: readonly string[];
  /**
   * Indices into `messages` after which a client marked a prefix it will send again (Anthropic
   * `cache_control`): the prompt cache keeps a state there too.
   */
  readonly cacheBreaks?: readonly number[];
}
