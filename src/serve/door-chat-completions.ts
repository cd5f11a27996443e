/**
 * `POST /v1/chat/completions` (chat.md 4.2-4.4): the OpenAI body is the chat request itself; the
 * reply is `chat.completion`, the stream `chat.completion.chunk`s (a role chunk per choice once
 * the prompt is in, deltas, a finish chunk per choice, the usage chunk when asked) and `[DONE]`.
 */
import { parseChatRequest } from "../chat/request.ts";
import type { ReplyLogprobs } from "../session/reply.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { Completion } from "./chat-completion.ts";
import { chatLogprobs } from "./logprob-shapes.ts";
import type { Door } from "./door.ts";

/** A chunk's or a choice's `logprobs`: the response's ids under `content`, the reasoning's under k3's `reasoning_content`. */
function chunkLogprobs(l: Partial<ReplyLogprobs>, tokenizer: Tokenizer) {
  return {
    content: chatLogprobs(l.content ?? [], tokenizer),
    ...(l.reasoning && l.reasoning.length > 0 && { reasoning_content: chatLogprobs(l.reasoning, tokenizer) }),
    refusal: null,
  };
}

export const chatCompletionsDoor: Door = {
  idPrefix: "chatcmpl-",
  clampMaxTokens: false,
  doneLine: true,
  parse: (bytes) => parseChatRequest(bytes, { source: "request" }),
  body: (head, prepared, c: Completion, tokenizer) => {
    const logprobsOn = prepared.request.logprobs !== undefined;
    return {
      ...head, object: "chat.completion",
      choices: c.choices.map((choice) => ({
        index: choice.index, message: choice.message,
        ...(logprobsOn && { logprobs: choice.logprobs ? chunkLogprobs(choice.logprobs, tokenizer) : null }),
        finish_reason: choice.finishReason,
      })),
      usage: c.usage,
      k3: c.stats,
    };
  },
  stream: (head, prepared, send, tokenizer) => {
    const logprobsOn = prepared.request.logprobs !== undefined;
    const chunk = (index: number, delta: Record<string, unknown>, finish: string | null, logprobs?: Partial<ReplyLogprobs>) =>
      send({
        ...head, object: "chat.completion.chunk",
        choices: [{ index, delta, ...(logprobsOn && { logprobs: logprobs ? chunkLogprobs(logprobs, tokenizer) : null }), finish_reason: finish }],
      });
    // Each choice's role chunk opens its reply once the prompt is in: every prefill comment comes before the first data chunk.
    const opened = new Set<number>();
    const openAll = () => {
      for (let index = 0; index < prepared.request.choices; index++) {
        if (!opened.has(index)) chunk(index, { role: "assistant" }, null);
        opened.add(index);
      }
    };
    return {
      prefill: (p) => {
        if (p.fed === p.total) openAll();
      },
      delta: (delta, index, logprobs) => {
        openAll();
        chunk(index, delta, null, logprobs);
      },
      choiceEnd: (choice) => {
        openAll();
        chunk(choice.index, {}, choice.finishReason, choice.unsentLogprobs);
      },
      end: (c) => {
        if (prepared.request.includeUsage) send({ ...head, object: "chat.completion.chunk", choices: [], usage: c.usage, k3: c.stats });
      },
    };
  },
  streamError: (e, send) => send({ error: { message: e.message, type: e.type, param: e.param, code: e.code } }),
};
