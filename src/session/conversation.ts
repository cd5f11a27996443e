/**
 * A conversation on one engine: the live sequence state carried from turn to turn, and a
 * snapshot at the end of the last conversation message (chat.md 5.4, 5.5). Each turn's prompt
 * is rendered afresh from the transcript (a pure function of the messages); only an exact id
 * prefix of it is reused, from the live state or the snapshot, and only the new ids are fed.
 * Nothing sampled is spliced into history, and the stop id is never fed.
 */
import { feed, type FinishReason } from "../decode/loop.ts";
import type { Sampler } from "../decode/sampler.ts";
import { usageError } from "../errors.ts";
import type { Model } from "../model/forward.ts";
import type { SequenceState, StateSnapshot } from "../model/state.ts";

/** A rendered prompt: its ids, and where the conversation messages end (notes and the generation prompt follow). */
export interface RenderedPrompt {
  ids: readonly number[];
  historyEnd: number;
}

export interface TurnOptions {
  sampler: Sampler;
  maxNewTokens: number;
  /** Ids that end the reply; the one met is kept in `generated` but never fed to the state. */
  stopIds: ReadonlySet<number>;
  /** Each id as it is chosen (for streaming the reply); "stop" ends the reply after it, unfed. */
  onToken?: (token: number) => "stop" | undefined | void;
  /** Asked between tokens, after the event loop has run: true ends the reply as cancelled. */
  cancelled?: () => boolean;
}

export interface TurnResult {
  generated: number[];
  finish: FinishReason;
  /** Prompt ids this turn actually fed (the rest were reused). */
  fedPromptIds: number;
  /** Prompt ids served from the live state or the snapshot. */
  reusedPromptIds: number;
  /** Where the reuse came from. */
  reusedFrom: "live" | "snapshot" | "none";
  prefillSeconds: number;
  decodeSeconds: number;
}

const isPrefix = (prefix: readonly number[], of: readonly number[]) =>
  prefix.length <= of.length && prefix.every((id, i) => id === of[i]);

/** Lets timers, input and signals (Ctrl-C) run between tokens: the forward pass is synchronous. */
const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

export class Conversation {
  readonly #model: Model;
  readonly #state: SequenceState;
  readonly #chunk: number;
  /** The ids the live state has consumed, in order. */
  #fed: number[] = [];
  #boundary: { ids: number[]; snapshot: StateSnapshot } | undefined;

  /** `chunk`: ids per forward call when a prompt is fed (the engine's plan sized its activations for it). */
  constructor(model: Model, chunk: number) {
    this.#model = model;
    this.#chunk = chunk;
    this.#state = model.newState();
  }

  /** Positions one conversation can hold (prompt and reply together). */
  get capacity(): number {
    return this.#state.capacity;
  }

  /** Forgets everything: the next turn starts from a zero state. */
  reset(): void {
    this.#state.reset();
    this.#fed = [];
    this.#dropBoundary();
  }

  #dropBoundary(): void {
    this.#boundary?.snapshot.free();
    this.#boundary = undefined;
  }

  /** Puts the state at the longest reusable exact prefix of `ids` and returns its length. */
  #reuse(ids: readonly number[]): { start: number; from: TurnResult["reusedFrom"] } {
    if (this.#fed.length < ids.length && isPrefix(this.#fed, ids)) return { start: this.#fed.length, from: this.#fed.length > 0 ? "live" : "none" };
    const boundary = this.#boundary;
    if (boundary && boundary.ids.length < ids.length && isPrefix(boundary.ids, ids)) {
      this.#state.restore(boundary.snapshot);
      return { start: boundary.ids.length, from: "snapshot" };
    }
    this.#state.reset();
    return { start: 0, from: "none" };
  }

  async turn(prompt: RenderedPrompt, options: TurnOptions): Promise<TurnResult> {
    const { ids, historyEnd } = prompt;
    if (ids.length === 0) throw usageError("the rendered prompt is empty");
    if (ids.length + options.maxNewTokens > this.capacity) {
      throw usageError(`the conversation needs ${ids.length} prompt + ${options.maxNewTokens} reply positions; the context holds ${this.capacity} (raise --ctx, lower --max-tokens, or /reset)`);
    }
    const prefillStarted = performance.now();
    const { start, from } = this.#reuse(ids);
    let logits: Float32Array | undefined;
    if (historyEnd > start) {
      logits = feed(this.#model, this.#state, ids.slice(start, historyEnd), this.#chunk);
      this.#dropBoundary();
      this.#boundary = { ids: ids.slice(0, historyEnd), snapshot: this.#state.snapshot() };
    }
    const rest = Math.max(start, historyEnd);
    if (ids.length > rest) logits = feed(this.#model, this.#state, ids.slice(rest), this.#chunk);
    this.#fed = [...ids];
    const prefillSeconds = (performance.now() - prefillStarted) / 1000;

    const decodeStarted = performance.now();
    const generated: number[] = [];
    let finish: FinishReason = "length";
    for (let step = 0; step < options.maxNewTokens && logits; step++) {
      const token = options.sampler.choose(logits);
      options.sampler.accept?.(token);
      generated.push(token);
      if (options.onToken?.(token) === "stop" || options.stopIds.has(token)) {
        finish = "stop";
        break;
      }
      if (step + 1 === options.maxNewTokens) break; // the budget is spent: nothing more to compute
      await yieldToEventLoop();
      if (options.cancelled?.()) {
        finish = "cancelled";
        break;
      }
      logits = this.#model.run(this.#state, [token]);
      this.#fed.push(token);
    }
    return {
      generated, finish, fedPromptIds: ids.length - start, reusedPromptIds: start, reusedFrom: from, prefillSeconds,
      decodeSeconds: (performance.now() - decodeStarted) / 1000,
    };
  }

  close(): void {
    this.#dropBoundary();
    this.#model.release(this.#state);
  }
}
