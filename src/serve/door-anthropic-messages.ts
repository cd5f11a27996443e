/**
 * `POST /v1/messages` (chat.md 4.9): Anthropic's Messages API over the one chat request. The
 * reply is a `message` with content blocks in the order K3 wrote them: `thinking` (the
 * reasoning, with an empty `signature`: k3 has nothing to sign, and ignores one sent back),
 * `text`, then a `tool_use` per call (`input` the parsed arguments). `stop_reason`: `end_turn`,
 * `stop_sequence` (with `stop_sequence`), `max_tokens`, `tool_use`. `usage.input_tokens` is the
 * prompt ids this request did not reuse and `cache_read_input_tokens` the ones it did (K3's
 * prompt count, chat.md 4.6); k3's statistics are under `k3`.
 *
 * Streamed: `message_start` (once the prompt is in), `ping`, then per block `content_block_start`,
 * its deltas (`thinking_delta`, `text_delta`, one `input_json_delta` with the whole input) and
 * `content_block_stop`, then `message_delta` (stop reason, output tokens) and `message_stop`;
 * the SDK's stream helper rebuilds the non-streamed message from them.
 */
import type { OpenAIFinishReason } from "../chat/finish.ts";
import type { OpenAIToolCall } from "../chat/tool-call.ts";
import type { AssistantMessage } from "../chat/reply-message.ts";
import type { Completion, CompletionChoice } from "./chat-completion.ts";
import type { ApiError } from "./errors.ts";
import type { Usage, CompletionStats } from "./turn-stats.ts";
import { parseMessagesRequest } from "./anthropic-request.ts";
import type { Door, ReplyHead, SendEvent } from "./door.ts";

type StopReason = "end_turn" | "stop_sequence" | "max_tokens" | "tool_use";

function stopReason(finish: OpenAIFinishReason, stopString: string | undefined): StopReason {
  if (finish === "tool_calls") return "tool_use";
  if (finish === "length") return "max_tokens";
  return stopString !== undefined ? "stop_sequence" : "end_turn";
}

/** The arguments as the `input` object (a call whose arguments are not a JSON object gets them under `raw`). */
function inputOf(call: OpenAIToolCall): Record<string, unknown> {
  try {
    const value = JSON.parse(call.function.arguments) as unknown;
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // not JSON: kept as text
  }
  return { raw: call.function.arguments };
}

/** Anthropic's usage: what the prompt reused counts as a cache read. */
function usageOf(usage: Usage, stats: CompletionStats) {
  const cached = Math.min(stats.reused_prompt_ids, usage.prompt_tokens);
  return { input_tokens: usage.prompt_tokens - cached, cache_creation_input_tokens: 0, cache_read_input_tokens: cached, output_tokens: usage.completion_tokens };
}

type Block =
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> };

function blocksOf(message: AssistantMessage): Block[] {
  const blocks: Block[] = [];
  if (message.reasoning_content) blocks.push({ type: "thinking", thinking: message.reasoning_content, signature: "" });
  if (message.content) blocks.push({ type: "text", text: message.content });
  for (const call of message.tool_calls ?? []) blocks.push({ type: "tool_use", id: call.id, name: call.function.name, input: inputOf(call) });
  return blocks;
}

function messageBody(head: ReplyHead, choice: CompletionChoice, content: Block[], c: Completion) {
  const reason = stopReason(choice.finishReason, choice.stopString);
  return {
    id: head.id, type: "message", role: "assistant", model: head.model, content,
    stop_reason: reason, stop_sequence: reason === "stop_sequence" ? choice.stopString ?? null : null,
    usage: usageOf(c.usage, c.stats), k3: c.stats,
  };
}

export const anthropicMessagesDoor: Door = {
  idPrefix: "msg_",
  clampMaxTokens: true,
  doneLine: false,
  parse: (bytes) => parseMessagesRequest(bytes).chat,
  body: (head, _prepared, c) => {
    const choice = c.choices[0] as CompletionChoice;
    return messageBody(head, choice, blocksOf(choice.message), c);
  },
  stream: (head, prepared, send) => {
    let started = false;
    let open: "thinking" | "text" | undefined;
    let index = -1;
    const start = (reused: number) => {
      if (started) return;
      started = true;
      const input = Math.max(0, prepared.rendered.promptTokens - reused);
      send({
        type: "message_start",
        message: {
          id: head.id, type: "message", role: "assistant", model: head.model, content: [], stop_reason: null, stop_sequence: null,
          usage: { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: prepared.rendered.promptTokens - input, output_tokens: 0 },
        },
      }, "message_start");
      send({ type: "ping" }, "ping");
    };
    const close = () => {
      if (open !== undefined) send({ type: "content_block_stop", index }, "content_block_stop");
      open = undefined;
    };
    const block = (kind: "thinking" | "text", text: string) => {
      start(0);
      if (open !== kind) {
        close();
        open = kind;
        index++;
        send({ type: "content_block_start", index, content_block: kind === "thinking" ? { type: "thinking", thinking: "", signature: "" } : { type: "text", text: "" } }, "content_block_start");
      }
      const delta = kind === "thinking" ? { type: "thinking_delta", thinking: text } : { type: "text_delta", text };
      send({ type: "content_block_delta", index, delta }, "content_block_delta");
    };
    return {
      prefill: (p) => {
        if (p.fed === p.total) start(p.reused);
      },
      delta: (delta) => {
        if ("reasoning_content" in delta) block("thinking", delta.reasoning_content);
        else if ("content" in delta) block("text", delta.content);
        else {
          start(0);
          for (const call of delta.tool_calls) {
            close();
            index++;
            send({ type: "content_block_start", index, content_block: { type: "tool_use", id: call.id, name: call.function.name, input: {} } }, "content_block_start");
            send({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(inputOf(call)) } }, "content_block_delta");
            send({ type: "content_block_stop", index }, "content_block_stop");
          }
        }
      },
      end: (c) => {
        start(0);
        close();
        const body = messageBody(head, c.choices[0] as CompletionChoice, [], c);
        send({ type: "message_delta", delta: { stop_reason: body.stop_reason, stop_sequence: body.stop_sequence }, usage: body.usage, k3: c.stats }, "message_delta");
        send({ type: "message_stop" }, "message_stop");
      },
    };
  },
  streamError: (e, send) => send(anthropicErrorBody(e), "error"),
};

/** Anthropic's error types by status; a full queue is "overloaded" (529), as the API says it. */
export function anthropicStatus(e: ApiError): { status: number; type: string } {
  if (e.code === "queue_full") return { status: 529, type: "overloaded_error" };
  const types: Record<number, string> = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 405: "invalid_request_error",
    408: "timeout_error", 413: "request_too_large", 429: "rate_limit_error", 503: "overloaded_error",
  };
  return { status: e.status, type: types[e.status] ?? "api_error" };
}

export function anthropicErrorBody(e: ApiError) {
  return { type: "error", error: { type: anthropicStatus(e).type, message: e.message } };
}

/** An answer in OpenAI's error shape rewritten in Anthropic's (its status too); other answers pass. */
export async function asAnthropicError(response: Response): Promise<Response> {
  if (response.status < 400 || !response.headers.get("content-type")?.includes("application/json")) return response;
  const body = (await response.clone().json().catch(() => undefined)) as { error?: { message?: string; type?: string; code?: string | null; param?: string | null } } | undefined;
  if (!body?.error) return response;
  const e: ApiError = { status: response.status, type: body.error.type ?? "", message: body.error.message ?? "", code: body.error.code ?? null, param: body.error.param ?? null };
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  return Response.json(anthropicErrorBody(e), { status: anthropicStatus(e).status, headers });
}

export type { SendEvent };
