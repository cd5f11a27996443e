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
import { choiceSampling, freshSeed, resolveSampling, samplingDefaults } from "../decode/sampling-options.ts";
import { fitReply } from "../decode/reply-room.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { PrefillProgress } from "../session/conversation.ts";
import { generateReplies, type GenerationSource } from "../session/reply.ts";
import type { ReplyEvent } from "../chat/parse.ts";
import { ReplyConstraint, type ReplyShape } from "../chat/reply-constraint.ts";
import { replyShape } from "../chat/reply-shape.ts";
import type { TokenLogprob } from "../decode/logprobs.ts";
import type { ReplyLogprobs } from "../session/reply.ts";
import { statsOf, usageOf, type CompletionStats, type Usage } from "./turn-stats.ts";

export type { GenerationSource };

/** What a streaming client is sent as the reply grows (chat.md 4.4 deltas). */
export type Delta =
  | { reasoning_content: string }
  | { content: string }
  | { tool_calls: (OpenAIToolCall & { index: number })[] };

/** One choice of a completion, as it ends. */
export interface CompletionChoice {
  index: number;
  message: AssistantMessage;
  finishReason: OpenAIFinishReason;
  /** With `logprobs`: every id of the reasoning and of the response's text. */
  logprobs?: ReplyLogprobs;
  /** Streaming: the entries not yet sent with a delta (they go with the choice's last chunk). */
  unsentLogprobs?: ReplyLogprobs;
  /** The stop string that ended the reply, if one did. */
  stopString?: string;
  /** Ids of the reasoning's text. */
  reasoningIds: number;
}

export interface Completion {
  choices: CompletionChoice[];
  usage: Usage;
  stats: CompletionStats;
}

export interface CompletionLimits {
  /** The reply's length when the request gives none. */
  defaultMaxTokens: number;
  /** A stated length beyond the room is cut to it (the agent doors), not refused (chat completions, as OpenAI does). */
  clampMaxTokens?: boolean;
}

export interface PreparedCompletion {
  request: ChatRequest;
  sampling: ReturnType<typeof resolveSampling>;
  rendered: ReturnType<typeof renderChat>;
  maxTokens: number;
  /** What the reply is held to (response_format, tools), compiled; undefined: nothing is masked. */
  shape: ReplyShape | undefined;
}

/**
 * The chat defaults under the request's sampling knobs (checked when the request was read), the
 * prompt, the reply budget against the context, and the reply's constraint, compiled (a schema
 * that cannot be enforced is refused here, before anything is generated).
 */
export async function prepareCompletion(request: ChatRequest, tokenizer: Tokenizer, capacity: number, limits: CompletionLimits): Promise<PreparedCompletion> {
  const sampling = resolveSampling({ ...request.sampling, seed: request.sampling.seed ?? freshSeed() }, samplingDefaults.chat, "field");
  const rendered = renderChat(request, tokenizer, capacity);
  const maxTokens = fitReply({
    promptIds: rendered.ids.length, maxTokens: request.maxTokens, defaultMaxTokens: limits.defaultMaxTokens, capacity,
    promptField: "messages", maxTokensField: "max_tokens", clamp: limits.clampMaxTokens,
  });
  return { request, sampling, rendered, maxTokens, shape: await replyShape(request, tokenizer) };
}

export interface CompletionEvents {
  /** Every delta of choice `index` as it is produced, with the log-probabilities of its ids when asked for. */
  onDelta: (delta: Delta, index: number, logprobs?: Partial<ReplyLogprobs>) => void;
  /** Choice `index` has ended (before the others have, with several). */
  onChoiceEnd?: (choice: CompletionChoice) => void;
  cancelled: () => boolean;
  /** The prompt going in (the choices share it). */
  onPrefill?: (progress: PrefillProgress) => void;
  /** Each generated id as it is chosen (whether or not it makes a delta): the server times the first. */
  onFirstId?: () => void;
}

/** Runs a prepared completion: its `n` choices (request.choices), each sampled with its own seed (choiceSampling). */
export async function runCompletion(
  prepared: PreparedCompletion, source: GenerationSource, tokenizer: Tokenizer, stopIds: ReadonlySet<number>, events: CompletionEvents,
): Promise<Completion> {
  const { request, sampling, rendered, maxTokens, shape } = prepared;
  const unsent = Array.from({ length: request.choices }, (): ReplyLogprobs => ({ content: [], reasoning: [] }));
  const replies = generateReplies(source, rendered, tokenizer, Array.from({ length: request.choices }, (_, index) => {
    let calls = 0;
    const pending = unsent[index] as ReplyLogprobs;
    const withLogprobs = request.logprobs !== undefined;
    const onDelta = (delta: Delta, channel?: keyof ReplyLogprobs) =>
      events.onDelta(delta, index, withLogprobs && channel ? { [channel]: pending[channel].splice(0) } : undefined);
    return {
      thinking: request.thinking, sampling: choiceSampling(sampling, index), maxNewTokens: maxTokens, stopIds, stop: request.stop,
      cancelled: events.cancelled, onPrefill: index === 0 ? events.onPrefill : undefined,
      constraint: shape && new ReplyConstraint(shape, tokenizer, tokenizer.vocabSize),
      onId: events.onFirstId,
      logprobs: request.logprobs,
      onLogprob: (entry: TokenLogprob, channel: "reasoning" | "content" | "structure") => {
        if (channel !== "structure") pending[channel].push(entry);
      },
      onEvent: (event: ReplyEvent) => {
        if (event.kind === "reasoning") onDelta({ reasoning_content: event.text }, "reasoning");
        else if (event.kind === "content") onDelta({ content: event.text }, "content");
        else if (event.kind === "tool_call") onDelta({ tool_calls: [{ index: calls++, ...openAIToolCall(event.call) }] });
      },
    };
  }));
  const done = await Promise.all(replies.map(async (reply, index) => {
    const { message, finishReason, turn, logprobs, stopString, reasoningIds } = await reply;
    const choice = { index, message, finishReason, reasoningIds, ...(logprobs && { logprobs, unsentLogprobs: unsent[index] }), ...(stopString !== undefined && { stopString }) };
    events.onChoiceEnd?.(choice);
    return { choice, turn };
  }));
  const turns = done.map((d) => d.turn);
  const stats = statsOf(turns, sampling.seed);
  if (stats.constraint && shape && shape.unenforced.length > 0) stats.constraint.unenforced = [...shape.unenforced];
  return { choices: done.map((d) => d.choice), usage: usageOf(rendered.promptTokens, turns), stats };
}
