/**
 * A chat on one engine: the transcript (OpenAI messages) and the Conversation that carries the
 * model's state across turns. Each turn renders the whole transcript afresh (the prompt is a
 * pure function of the messages, chat.md 5.4), streams the reply through the parser, and adds
 * the parsed assistant message to the transcript: what the model sampled is never spliced in.
 */
import type { OpenAIFinishReason } from "../chat/finish.ts";
import type { ReplyEvent } from "../chat/parse.ts";
import { renderChat } from "../chat/render.ts";
import type { AssistantMessage } from "../chat/reply-message.ts";
import { parseChatRequest } from "../chat/request.ts";
import type { Effort } from "../chat/request-types.ts";
import { controlIds, stopIds } from "../chat/specials.ts";
import { freshSeed, type SamplingOptions } from "../decode/sampling-options.ts";
import type { Engine } from "../engine/open.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import { Conversation, type ConversationOptions, type TurnResult } from "./conversation.ts";
import { generateReply, type ReplyLogprobs } from "./reply.ts";
import { ReplyConstraint } from "../chat/reply-constraint.ts";
import { replyShape } from "../chat/reply-shape.ts";

/** One message of the transcript, as an OpenAI chat-completions request carries it. */
export interface ChatMessage {
  readonly role: string;
  readonly [field: string]: unknown;
}

export interface ChatSettings {
  system: string | undefined;
  thinking: boolean;
  effort: Effort;
  sampling: SamplingOptions;
  maxNewTokens: number;
  /** No seed was given: each turn draws a fresh one (chat.md 3.4 rule 3), reported in ChatTurn.seed. */
  freshSeedEachTurn?: boolean;
  /** Request fields every turn carries (`response_format`, `tools`, `tool_choice`), as OpenAI's request has them. */
  requestFields?: Record<string, unknown>;
  /** Record log-probabilities with this many alternatives per id (0-20). */
  logprobs?: number;
}

export interface ChatTurn {
  message: AssistantMessage;
  finishReason: OpenAIFinishReason;
  /** The engine's own reason, before the OpenAI mapping (`cancelled` when interrupted). */
  engineFinish: TurnResult["finish"];
  generatedIds: number[];
  promptIds: number;
  /** `usage.prompt_tokens` (chat.md 4.6). */
  promptTokens: number;
  /** The seed this turn was sampled with (pass it as --seed to get this reply again). */
  seed: number;
  turn: TurnResult;
  warnings: readonly string[];
  /** With ChatSettings.logprobs: the reasoning's and the response's ids. */
  logprobs?: ReplyLogprobs;
}

export interface TurnEvents {
  /** Reasoning and content deltas, tool calls and warnings, as the parser yields them. */
  onEvent?: (event: ReplyEvent) => void;
  /** Asked between tokens: true stops the reply here (Ctrl-C). */
  cancelled?: () => boolean;
}

export class ChatSession {
  readonly #tokenizer: Tokenizer;
  readonly #conversation: Conversation;
  readonly #stopIds: ReadonlySet<number>;
  readonly settings: ChatSettings;
  transcript: ChatMessage[] = [];

  constructor(engine: Engine, tokenizer: Tokenizer, settings: ChatSettings, conversation: ConversationOptions) {
    this.#tokenizer = tokenizer;
    this.#stopIds = stopIds(controlIds(tokenizer)); // refuses a tokenizer without the K3 names
    this.#conversation = new Conversation(engine.model, conversation);
    this.settings = settings;
  }

  get tokenizer(): Tokenizer {
    return this.#tokenizer;
  }

  /** The request the transcript makes now (system message first, when set). */
  request(): Record<string, unknown> {
    const { system, thinking, effort } = this.settings;
    const messages = system === undefined ? this.transcript : [{ role: "system", content: system }, ...this.transcript];
    return { ...this.settings.requestFields, messages, thinking: { type: thinking ? "enabled" : "disabled", effort } };
  }

  /** Adds the user's message, generates the reply and adds it to the transcript. */
  async send(text: string, events: TurnEvents = {}): Promise<ChatTurn> {
    this.transcript.push({ role: "user", content: text });
    try {
      return await this.reply(events);
    } catch (error) {
      this.transcript.pop(); // a refused turn leaves the transcript as it was
      throw error;
    }
  }

  /** Generates the assistant's reply to the transcript as it stands. */
  async reply(events: TurnEvents = {}): Promise<ChatTurn> {
    const request = parseChatRequest(this.request(), { source: "transcript" });
    const rendered = renderChat(request, this.#tokenizer);
    const shape = await replyShape(request, this.#tokenizer);
    const { thinking, maxNewTokens, freshSeedEachTurn, logprobs } = this.settings;
    const sampling = freshSeedEachTurn ? { ...this.settings.sampling, seed: freshSeed() } : this.settings.sampling;
    const reply = await generateReply(this.#conversation, rendered, this.#tokenizer, {
      thinking, sampling, maxNewTokens, stopIds: this.#stopIds, onEvent: events.onEvent, cancelled: events.cancelled,
      constraint: shape && new ReplyConstraint(shape, this.#tokenizer, this.#tokenizer.vocabSize), logprobs,
    });
    this.transcript.push({ ...reply.message });
    const { message, finishReason, turn, warnings } = reply;
    return {
      message, finishReason, engineFinish: turn.finish, generatedIds: turn.generated, promptIds: rendered.ids.length,
      promptTokens: rendered.promptTokens, seed: sampling.seed, turn, warnings, logprobs: reply.logprobs,
    };
  }

  /** Forgets the transcript and the model state. */
  reset(): void {
    this.transcript = [];
    this.#conversation.reset();
  }

  /** Replaces the transcript (a saved one); it is checked by rendering it, and fed on the next turn. */
  load(messages: readonly ChatMessage[]): void {
    const previous = this.transcript;
    this.transcript = [...messages];
    try {
      renderChat(parseChatRequest(this.request(), { source: "transcript" }), this.#tokenizer);
    } catch (error) {
      this.transcript = previous;
      throw error;
    }
  }

  /**
   * Writes the model state beside a saved transcript, so /load continues without re-reading it;
   * returns its bytes, or undefined when there is no conversation yet to hold a state for.
   */
  saveState(path: string): number | undefined {
    if (this.transcript.length === 0) return undefined;
    const upcoming = renderChat(parseChatRequest(this.request(), { source: "transcript" }), this.#tokenizer).ids;
    return this.#conversation.saveState(path, upcoming);
  }

  /** Restores a state written by saveState; the next turn reuses it where it matches the transcript. */
  loadState(path: string): number {
    return this.#conversation.loadState(path);
  }

  close(): void {
    this.#conversation.close();
  }
}
