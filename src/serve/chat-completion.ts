/**
 * One chat completion on the server's conversation: the validated request is rendered, the
 * conversation reuses the longest exact id prefix it holds (chat.md 5.5), the reply streams
 * through the parser, and the events come out as OpenAI deltas. Streaming and non-streaming
 * share this one path, so they cannot disagree.
 */
import { finishReason, type OpenAIFinishReason } from "../chat/finish.ts";
import { MessageBuilder, type AssistantMessage } from "../chat/reply-message.ts";
import { ReplyParser } from "../chat/parse.ts";
import { renderChat } from "../chat/render.ts";
import type { ChatRequest } from "../chat/request-types.ts";
import { openAIToolCall, type OpenAIToolCall } from "../chat/tool-call.ts";
import { createSampler } from "../decode/sampling.ts";
import { resolveSampling, samplingDefaults } from "../decode/sampling-options.ts";
import { usageError } from "../errors.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { RenderedPrompt, TurnOptions, TurnResult } from "../session/conversation.ts";

/**
 * Where replies come from: the model's conversation (src/session/conversation.ts), or in tests
 * a scripted source that emits crafted ids, so the HTTP path can be driven through every shape
 * of reply the parser knows.
 */
export interface GenerationSource {
  /** Positions a prompt and its reply may take together. */
  readonly capacity: number;
  turn(prompt: RenderedPrompt, options: TurnOptions): Promise<TurnResult>;
}

/** What a streaming client is sent as the reply grows (chat.md 4.4 deltas). */
export type Delta =
  | { reasoning_content: string }
  | { content: string }
  | { tool_calls: (OpenAIToolCall & { index: number })[] };

export interface CompletionStats {
  /** Prompt ids served from the carried state or a snapshot. */
  reused_prompt_ids: number;
  /** Prompt ids this request fed. */
  prefilled_ids: number;
  reused_from: "live" | "snapshot" | "none";
  prefill_seconds: number;
  decode_seconds: number;
}

export interface Completion {
  message: AssistantMessage;
  finishReason: OpenAIFinishReason;
  usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number };
  stats: CompletionStats;
}

/**
 * Holds back visible content that could still turn out to start a stop string, and ends the
 * reply at the first one (which is not sent).
 */
export class StopStrings {
  readonly #stops: readonly string[];
  readonly #keep: number;
  #pending = "";
  hit = false;

  constructor(stops: readonly string[]) {
    this.#stops = stops;
    this.#keep = Math.max(0, ...stops.map((s) => s.length - 1));
  }

  /** The content that is safe to send now. */
  push(text: string): string {
    if (this.hit) return "";
    this.#pending += text;
    const at = Math.min(...this.#stops.map((s) => this.#pending.indexOf(s)).filter((i) => i >= 0));
    if (Number.isFinite(at)) {
      this.hit = true;
      const out = this.#pending.slice(0, at);
      this.#pending = "";
      return out;
    }
    const safe = this.#pending.length - this.#keep;
    if (safe <= 0) return "";
    const out = this.#pending.slice(0, safe);
    this.#pending = this.#pending.slice(safe);
    return out;
  }

  /** At the end, what was held back was no stop string after all. */
  flush(): string {
    const out = this.hit ? "" : this.#pending;
    this.#pending = "";
    return out;
  }
}

export interface CompletionLimits {
  /** The reply's length when the request gives none. */
  defaultMaxTokens: number;
}

/** Checks what rendering does not: sampling ranges and the reply budget against the context. */
export function prepareCompletion(request: ChatRequest, tokenizer: Tokenizer, capacity: number, limits: CompletionLimits) {
  const s = request.sampling;
  const sampling = resolveSampling(
    {
      temperature: s.temperature, topP: s.topP, topK: s.topK === -1 ? 0 : s.topK, minP: s.minP, seed: s.seed,
      presencePenalty: s.presencePenalty, frequencyPenalty: s.frequencyPenalty,
    },
    samplingDefaults.chat,
    "field",
  );
  const rendered = renderChat(request, tokenizer);
  const room = capacity - rendered.ids.length;
  if (room < 1) throw usageError(`messages: the rendered prompt has ${rendered.ids.length} ids; the context holds ${capacity}`);
  const maxTokens = request.maxTokens ?? Math.min(limits.defaultMaxTokens, room);
  if (maxTokens > room) {
    throw usageError(`max_tokens: ${maxTokens} does not fit: the prompt takes ${rendered.ids.length} of the ${capacity} positions`);
  }
  return { request, sampling, rendered, maxTokens };
}

export type PreparedCompletion = ReturnType<typeof prepareCompletion>;

/** Runs a prepared completion; `onDelta` sees every delta as it is produced. */
export async function runCompletion(
  prepared: PreparedCompletion,
  source: GenerationSource,
  tokenizer: Tokenizer,
  stopIds: ReadonlySet<number>,
  onDelta: (delta: Delta) => void,
  cancelled: () => boolean,
): Promise<Completion> {
  const { request, sampling, rendered, maxTokens } = prepared;
  const parser = new ReplyParser(tokenizer, { thinking: request.thinking });
  const builder = new MessageBuilder(request.thinking);
  const stops = new StopStrings(request.stop);
  let calls = 0;
  const take = (events: ReturnType<ReplyParser["push"]>) => {
    for (const event of events) {
      if (event.kind === "reasoning") {
        builder.add([event]);
        onDelta({ reasoning_content: event.text });
      } else if (event.kind === "content") {
        const visible = stops.push(event.text);
        if (visible) {
          builder.add([{ kind: "content", text: visible }]);
          onDelta({ content: visible });
        }
      } else if (event.kind === "tool_call") {
        builder.add([event]);
        onDelta({ tool_calls: [{ index: calls++, ...openAIToolCall(event.call) }] });
      } else {
        builder.add([event]);
      }
    }
  };
  const turn = await source.turn(rendered, {
    sampler: createSampler(sampling),
    maxNewTokens: maxTokens,
    stopIds,
    onToken: (id) => {
      take(parser.push(id));
      return parser.end === "new-turn" || stops.hit ? "stop" : undefined;
    },
    cancelled,
  });
  take(parser.finish());
  const rest = stops.flush();
  if (rest) {
    builder.add([{ kind: "content", text: rest }]);
    onDelta({ content: rest });
  }
  const completion = turn.generated.length;
  return {
    message: builder.message(),
    finishReason: finishReason(turn.finish, parser.toolCalls > 0),
    usage: { prompt_tokens: rendered.promptTokens, completion_tokens: completion, total_tokens: rendered.promptTokens + completion },
    stats: {
      reused_prompt_ids: turn.reusedPromptIds, prefilled_ids: turn.fedPromptIds, reused_from: turn.reusedFrom,
      prefill_seconds: turn.prefillSeconds, decode_seconds: turn.decodeSeconds,
    },
  };
}
