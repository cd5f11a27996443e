/**
 * One assistant reply, the part `k3 chat` and `k3 serve` share: feed the rendered prompt to a
 * generation source (the model's conversation, or a scripted one in tests), stream every id
 * through the reply parser, end at a stop id, at the model starting a new turn, or at a stop
 * string in the visible content, and fold the events into the OpenAI assistant message.
 */
import { finishReason, type OpenAIFinishReason } from "../chat/finish.ts";
import { ReplyParser, type ReplyEvent } from "../chat/parse.ts";
import { MessageBuilder, type AssistantMessage } from "../chat/reply-message.ts";
import type { Constraint } from "../decode/constraint.ts";
import { LogprobRecorder, type TokenLogprob } from "../decode/logprobs.ts";
import { createSampler } from "../decode/sampling.ts";
import type { SamplingOptions } from "../decode/sampling-options.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import { runtimeError } from "../errors.ts";
import type { BatchStats } from "../decode/step-batch.ts";
import type { PrefillProgress, RenderedPrompt, TurnOptions, TurnResult } from "./conversation.ts";

/**
 * Where replies come from: the model's conversation (./conversation.ts), or in tests a scripted
 * source that emits crafted ids, so every path above it can be driven through every shape of
 * reply the parser knows.
 */
export interface GenerationSource {
  /** Positions a prompt and its reply may take together. */
  readonly capacity: number;
  turn(prompt: RenderedPrompt, options: TurnOptions): Promise<TurnResult>;
  /**
   * Several choices of one prompt (a request's `n`), each with its own options, decoding
   * together after one shared prefill; each promise settles as its choice ends. Only a source
   * with several conversations has it (--parallel).
   */
  turns?(prompt: RenderedPrompt, options: readonly TurnOptions[]): Promise<TurnResult>[];
  /** With several conversations generating at once (--parallel): the batched steps so far. */
  readonly batchStats?: BatchStats;
}

/**
 * Holds back visible text that could still turn out to start a stop string, and ends the reply
 * at the first one (which is not shown).
 */
export class StopStrings {
  readonly #stops: readonly string[];
  readonly #keep: number;
  #pending = "";
  hit = false;
  /** The stop string that ended the reply, once one did. */
  matched: string | undefined;

  constructor(stops: readonly string[]) {
    this.#stops = stops;
    this.#keep = Math.max(0, ...stops.map((s) => s.length - 1));
  }

  /** The text that is safe to show now. */
  push(text: string): string {
    if (this.hit) return "";
    this.#pending += text;
    const at = Math.min(...this.#stops.map((s) => this.#pending.indexOf(s)).filter((i) => i >= 0));
    if (Number.isFinite(at)) {
      this.hit = true;
      this.matched = this.#stops.find((s) => this.#pending.indexOf(s) === at);
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

export interface ReplyOptions {
  thinking: boolean;
  sampling: SamplingOptions;
  maxNewTokens: number;
  stopIds: ReadonlySet<number>;
  /** Stop strings on the visible content (none for `k3 chat`). */
  stop?: readonly string[];
  /** This choice's constraint (its own state); disposed when the reply ends. */
  constraint?: Constraint & { dispose(): void };
  /** Record log-probabilities with this many alternatives each (0-20); none when undefined. */
  logprobs?: number;
  /** Told each id as it is chosen, before the parser reads it. */
  onId?: () => void;
  /** Each id's log-probability as the reply grows, with where the id went. */
  onLogprob?: (entry: TokenLogprob, channel: "reasoning" | "content" | "structure") => void;
  /** Every event as the reply grows; content already cut at a stop string. */
  onEvent?: (event: ReplyEvent) => void;
  /** Asked before each prefill chunk and between tokens: true stops the reply there. */
  cancelled?: () => boolean;
  /** How far the prompt's prefill has come (before its first chunk and after each). */
  onPrefill?: (progress: PrefillProgress) => void;
}

/** Log-probabilities of the ids of the reasoning and of the response's text (chat.md 4.8). */
export interface ReplyLogprobs {
  content: TokenLogprob[];
  reasoning: TokenLogprob[];
}

export interface Reply {
  message: AssistantMessage;
  logprobs?: ReplyLogprobs;
  /** The stop string that ended the reply, if one did. */
  stopString?: string;
  /** Ids of the reasoning section's text (the Responses API's reasoning_tokens). */
  reasoningIds: number;
  finishReason: OpenAIFinishReason;
  turn: TurnResult;
  warnings: readonly string[];
}

/**
 * The turns of a prompt's choices, one per element of `options`, each settling as it ends: one
 * choice is a plain turn; several need a source with several conversations (`source.turns`).
 */
export function choiceTurns(source: GenerationSource, prompt: RenderedPrompt, options: readonly TurnOptions[]): Promise<TurnResult>[] {
  if (options.length === 1) return [source.turn(prompt, options[0] as TurnOptions)];
  if (!source.turns) throw runtimeError("several choices (n > 1) need several conversations: k3 serve --parallel N, with N at least n");
  return source.turns(prompt, options);
}

/**
 * The replies of one prompt, one per element of `choices` (each its own sampler, parser and stop
 * strings), each settling as it ends.
 */
export function generateReplies(source: GenerationSource, rendered: RenderedPrompt, tokenizer: Tokenizer, choices: readonly ReplyOptions[]): Promise<Reply>[] {
  const replies = choices.map((o) => replyFolder(tokenizer, o));
  return choiceTurns(source, rendered, replies.map((r) => r.options)).map(async (turn, i) => (replies[i] as ReplyFolder).finish(await turn));
}

export async function generateReply(source: GenerationSource, rendered: RenderedPrompt, tokenizer: Tokenizer, o: ReplyOptions): Promise<Reply> {
  return await (generateReplies(source, rendered, tokenizer, [o])[0] as Promise<Reply>);
}

interface ReplyFolder {
  options: TurnOptions;
  finish(turn: TurnResult): Reply;
}

/** One reply's parser, stop strings and message: the options its turn runs with, and what folds the end in. */
function replyFolder(tokenizer: Tokenizer, o: ReplyOptions): ReplyFolder {
  const parser = new ReplyParser(tokenizer, { thinking: o.thinking });
  const builder = new MessageBuilder(o.thinking);
  const stops = new StopStrings(o.stop ?? []);
  const take = (event: ReplyEvent) => {
    builder.add([event]);
    o.onEvent?.(event);
  };
  const takeAll = (events: readonly ReplyEvent[]) => {
    for (const event of events) {
      if (event.kind !== "content") take(event);
      else {
        const visible = stops.push(event.text);
        if (visible) take({ kind: "content", text: visible });
      }
    }
  };
  const recorder = o.logprobs === undefined ? undefined : new LogprobRecorder(o.sampling, o.logprobs);
  const logprobs: ReplyLogprobs | undefined = recorder && { content: [], reasoning: [] };
  let chosen: TokenLogprob | undefined;
  let reasoningIds = 0;
  const options: TurnOptions = {
    sampler: createSampler(o.sampling), // per reply: its ids depend on its prompt and seed alone
    constraint: o.constraint,
    onChosen: recorder && ((id, row) => {
      chosen = recorder.record(id, row);
    }),
    maxNewTokens: o.maxNewTokens,
    stopIds: o.stopIds,
    onToken: (id) => {
      o.onId?.();
      const events = parser.push(id);
      if (parser.lastChannel === "reasoning") reasoningIds++;
      if (chosen && logprobs) {
        const channel = parser.lastChannel;
        // Stop strings cut visible text: an id past one is not part of the reply's text.
        if (channel !== "structure" && !stops.hit) logprobs[channel].push(chosen);
        o.onLogprob?.(chosen, channel);
        chosen = undefined;
      }
      takeAll(events);
      return parser.end === "new-turn" || stops.hit ? "stop" : undefined;
    },
    cancelled: o.cancelled,
    onPrefill: o.onPrefill,
  };
  const finish = (turn: TurnResult): Reply => {
    o.constraint?.dispose();
    takeAll(parser.finish());
    const rest = stops.flush();
    if (rest) take({ kind: "content", text: rest });
    return {
      message: builder.message(), finishReason: finishReason(turn.finish, parser.toolCalls > 0), turn, warnings: builder.warnings,
      ...(logprobs && { logprobs }), ...(stops.matched !== undefined && { stopString: stops.matched }), reasoningIds,
    };
  };
  return { options, finish };
}
