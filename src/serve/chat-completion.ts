/**
 * One chat completion on the server's conversation: the validated request is rendered, the
 * conversation reuses the longest exact id prefix it holds (chat.md 5.5), the reply streams
 * through the parser, and the events come out as OpenAI deltas. Streaming and non-streaming
 * share this one path, so they cannot disagree.
 */
import type { OpenAIFinishReason } from "../chat/finish.ts";
import type { AssistantMessage } from "../chat/reply-message.ts";
import { renderChat } from "../chat/render.ts";
import type { ChatRequest } from "../chat/request-types.ts";
import { openAIToolCall, type OpenAIToolCall } from "../chat/tool-call.ts";
import { freshSeed, resolveSampling, samplingDefaults } from "../decode/sampling-options.ts";
import { fitReply } from "../decode/reply-room.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { PrefillProgress } from "../session/conversation.ts";
import { generateReply, type GenerationSource } from "../session/reply.ts";
import { statsOf, usageOf, type CompletionStats, type Usage } from "./turn-stats.ts";

export type { GenerationSource };

/** What a streaming client is sent as the reply grows (chat.md 4.4 deltas). */
export type Delta =
  | { reasoning_content: string }
  | { content: string }
  | { tool_calls: (OpenAIToolCall & { index: number })[] };

export interface Completion {
  message: AssistantMessage;
  finishReason: OpenAIFinishReason;
  usage: Usage;
  stats: CompletionStats;
}

export interface CompletionLimits {
  /** The reply's length when the request gives none. */
  defaultMaxTokens: number;
}

/** The chat defaults under the request's sampling knobs (checked when the request was read), the prompt, and the reply budget against the context. */
export function prepareCompletion(request: ChatRequest, tokenizer: Tokenizer, capacity: number, limits: CompletionLimits) {
  const sampling = resolveSampling({ ...request.sampling, seed: request.sampling.seed ?? freshSeed() }, samplingDefaults.chat, "field");
  const rendered = renderChat(request, tokenizer, capacity);
  const maxTokens = fitReply({
    promptIds: rendered.ids.length, maxTokens: request.maxTokens, defaultMaxTokens: limits.defaultMaxTokens, capacity,
    promptField: "messages", maxTokensField: "max_tokens",
  });
  return { request, sampling, rendered, maxTokens };
}

export type PreparedCompletion = ReturnType<typeof prepareCompletion>;

/** Runs a prepared completion; `onDelta` sees every delta as it is produced, `onPrefill` the prompt going in. */
export async function runCompletion(
  prepared: PreparedCompletion,
  source: GenerationSource,
  tokenizer: Tokenizer,
  stopIds: ReadonlySet<number>,
  onDelta: (delta: Delta) => void,
  cancelled: () => boolean,
  onPrefill?: (progress: PrefillProgress) => void,
): Promise<Completion> {
  const { request, sampling, rendered, maxTokens } = prepared;
  let calls = 0;
  const { message, finishReason, turn } = await generateReply(source, rendered, tokenizer, {
    thinking: request.thinking, sampling, maxNewTokens: maxTokens, stopIds, stop: request.stop, cancelled, onPrefill,
    onEvent: (event) => {
      if (event.kind === "reasoning") onDelta({ reasoning_content: event.text });
      else if (event.kind === "content") onDelta({ content: event.text });
      else if (event.kind === "tool_call") onDelta({ tool_calls: [{ index: calls++, ...openAIToolCall(event.call) }] });
    },
  });
  return { message, finishReason, usage: usageOf(rendered.promptTokens, turn), stats: statsOf(turn, sampling.seed) };
}
