/**
 * A conversation on one engine: the live sequence state carried from request to request, and
 * snapshots (chat.md 5.5) taken (a) after the last conversation message, before notes and the
 * generation prompt, (b) at the end of the prompt, (c) after the reply, at the last id fed.
 * Each prompt is rendered afresh (a pure function of the messages); only an exact id prefix of
 * it is reused, from the live state or the longest matching snapshot, and only the new ids are
 * fed. Nothing sampled is spliced into history, and the stop id is never fed.
 */
import type { Drafter } from "../decode/drafter.ts";
import { decode, type FinishReason, type SpeculationStats } from "../decode/loop.ts";
import type { Constraint } from "../decode/constraint.ts";
import type { PromptCache } from "./prompt-cache.ts";
import { greedy, type Sampler } from "../decode/sampler.ts";
import type { StepBatch } from "../decode/step-batch.ts";
import { fitReply } from "../decode/reply-room.ts";
import { usageError } from "../errors.ts";
import type { Model } from "../model/forward.ts";
import { readStateFile, writeStateFile } from "../model/state-file.ts";
import type { SequenceState } from "../model/state.ts";
import { isPrefix, SnapshotStore, type SnapshotBudget, type SnapshotCounts, type SnapshotKind } from "./snapshots.ts";

/** A rendered prompt: its ids, and where the conversation messages end (notes and the generation prompt follow). */
export interface RenderedPrompt {
  ids: readonly number[];
  historyEnd: number;
  /** After the leading system part: where the prompt cache also keeps a state. */
  systemEnd?: number;
  /** After the messages a client marked for caching: the prompt cache keeps states there too. */
  cacheBreaks?: readonly number[];
}

export interface TurnOptions {
  sampler: Sampler;
  /** Masks what the sampler may choose (a JSON schema, the tools section); nothing is masked without it. */
  constraint?: Constraint;
  /** Each id with the (masked) row it was chosen from; undefined for an id the constraint forced. */
  onChosen?: (token: number, row: Float32Array | undefined) => void;
  maxNewTokens: number;
  /** Ids that end the reply; the one met is kept in `generated` but never fed to the state. */
  stopIds: ReadonlySet<number>;
  /** Each id as it is chosen (for streaming the reply); "stop" ends the reply after it, unfed. */
  onToken?: (token: number) => "stop" | undefined | void;
  /**
   * Asked before each prefill chunk and between tokens, after the event loop has run: true ends
   * the turn there as cancelled (during the prefill: with nothing generated).
   */
  cancelled?: () => boolean;
  /** Told before the first prefill chunk and after every one (a server streams it to the client). */
  onPrefill?: (progress: PrefillProgress) => void;
}

/** How far the prefill of a turn has come. */
export interface PrefillProgress {
  /** Prompt ids fed so far. */
  fed: number;
  /** Prompt ids this turn feeds in all (the rest are reused). */
  total: number;
  /** Prompt ids reused, and from where. */
  reused: number;
  reusedFrom: TurnResult["reusedFrom"];
  /** Since the turn began (finding and restoring the reused state included). */
  seconds: number;
}

export interface TurnResult {
  generated: number[];
  finish: FinishReason;
  /** Prompt ids this turn actually fed (the rest were reused). */
  fedPromptIds: number;
  /** Prompt ids served from the live state or the snapshot. */
  reusedPromptIds: number;
  /** Where the reuse came from: the live state, a snapshot in RAM, a parked snapshot file, the prompt cache on disk, or nothing. */
  reusedFrom: "live" | "snapshot" | "parked" | "disk" | "none";
  /** The snapshots held after the turn (a source without snapshots leaves it out). */
  snapshots?: SnapshotCounts;
  prefillSeconds: number;
  decodeSeconds: number;
  /** What speculative decode did this turn (drafted and accepted ids), when it was on. */
  speculation?: SpeculationStats;
  /** Ids a constraint forced (fed without sampling), when one was given. */
  forcedIds?: number;
  /** With other sequences in batched steps (conversation-pool.ts): what this request shared. */
  batch?: SharedSteps;
}

/** The batched steps a request's sequences took part in, the rows of those steps (its own included), and its share of the bytes they read from disk, by its rows in each. */
export interface SharedSteps {
  steps: number;
  rows: number;
  bytesReadShare: number;
}

export interface ConversationOptions {
  /** Ids per forward call when a prompt is fed (the engine's plan sized its activations for it). */
  chunk: number;
  snapshots: SnapshotBudget;
  /** Told when a snapshot had to be dropped or was refused (the answer is still exact). */
  warn: (message: string) => void;
  /** Speculative decode on every turn: drafts of up to `maxDraft` ids, each verified (the replies do not change). Closed with the conversation. */
  speculative?: { drafter: Drafter; maxDraft: number };
  /** The batched steps this conversation's forward calls join, with other conversations' (decode/step-batch.ts). */
  batch?: StepBatch<SequenceState>;
  /** Snapshots on disk that outlive the server (--prompt-cache), shared by every conversation. */
  promptCache?: PromptCache;
}

export class Conversation {
  readonly #model: Model;
  readonly #state: SequenceState;
  readonly #chunk: number;
  readonly #snapshots: SnapshotStore;
  readonly #speculative: ConversationOptions["speculative"];
  readonly #batch: ConversationOptions["batch"];
  readonly #cache: PromptCache | undefined;
  /** The ids the live state has consumed, in order: its MLA rows are theirs. */
  #fed: number[] = [];

  constructor(model: Model, options: ConversationOptions) {
    this.#model = model;
    this.#chunk = options.chunk;
    this.#state = model.newState();
    this.#snapshots = new SnapshotStore(options.snapshots, options.warn);
    this.#speculative = options.speculative;
    this.#batch = options.batch;
    this.#cache = options.promptCache;
  }

  /** Positions one conversation can hold (prompt and reply together). */
  get capacity(): number {
    return this.#state.capacity;
  }

  /** The snapshots held, most recently used first (tests, statistics). */
  get snapshotIds(): (readonly number[])[] {
    return this.#snapshots.held.map((s) => s.ids);
  }

  /** How many of `ids` a turn on them would reuse (from the live state or a snapshot), without touching anything. */
  reusable(ids: readonly number[]): number {
    const live = this.#fed.length < ids.length && isPrefix(this.#fed, ids) ? this.#fed.length : 0;
    return Math.max(live, this.#snapshots.find(ids, this.#fed)?.ids.length ?? 0, this.#cache?.find(ids)?.ids.length ?? 0);
  }

  /** Forgets everything: the next turn starts from a zero state. */
  reset(): void {
    this.#state.reset();
    this.#fed = [];
    this.#snapshots.clear();
  }

  /**
   * Writes a state file (runtime.md 8) of the longest state held that the next prompt can reuse:
   * `upcoming` is that prompt as far as it is known (the transcript rendered now). The live
   * state may hold a reply whose re-render differs (chat.md 5.4), so a snapshot before it is
   * often what matches. Returns the bytes written.
   */
  saveState(path: string, upcoming: readonly number[]): number {
    if (!isPrefix(this.#fed, upcoming)) {
      const { start } = this.#reuse(upcoming);
      this.#fed = upcoming.slice(0, start);
    }
    return writeStateFile(path, this.#state, this.#fed);
  }

  /**
   * Makes a state file the live state: the next turn reuses it exactly when the file's ids are a
   * prefix of its prompt, as it would the state it was saved from. A refused file leaves the
   * conversation reset. A pending id (a run's state file) is not fed: only the positions count.
   */
  loadState(path: string): number {
    this.reset();
    const { position, ids } = readStateFile(path, this.#state);
    this.#fed = ids.slice(0, position);
    return position;
  }

  /** Puts the state at the longest reusable exact prefix of `ids` and returns its length. */
  #reuse(ids: readonly number[]): { start: number; from: TurnResult["reusedFrom"] } {
    const live = this.#fed.length < ids.length && isPrefix(this.#fed, ids) ? this.#fed.length : 0;
    const snapshot = this.#snapshots.find(ids, this.#fed);
    // Rows the new ids do not share are about to be rewritten: snapshots relying on them go out whole first.
    this.#snapshots.protect(ids, this.#state);
    const cached = this.#cache?.find(ids);
    if (cached && cached.ids.length > Math.max(live, snapshot?.ids.length ?? 0)) {
      if (this.#cache?.restore(cached, this.#state)) return { start: cached.ids.length, from: "disk" };
      this.#fed = [];
      return this.#reuse(ids); // refused and removed: the next best
    }
    if (snapshot && snapshot.ids.length > live) {
      const kind = snapshot.place.kind;
      if (this.#snapshots.restore(snapshot, this.#state)) return { start: snapshot.ids.length, from: kind === "ram" ? "snapshot" : "parked" };
      this.#fed = [];
      return this.#reuse(ids); // refused: the next best, which is never that one again
    }
    if (live > 0) return { start: live, from: "live" };
    this.#state.reset();
    return { start: 0, from: "none" };
  }

  async turn(prompt: RenderedPrompt, options: TurnOptions): Promise<TurnResult> {
    const { ids } = prompt;
    if (ids.length === 0) throw usageError("the rendered prompt is empty");
    // The servers' endpoints refuse with their field names first; this is k3 chat's refusal.
    fitReply({
      promptIds: ids.length, maxTokens: options.maxNewTokens, defaultMaxTokens: options.maxNewTokens, capacity: this.capacity,
      promptField: "--ctx", maxTokensField: "--max-tokens", hint: "raise --ctx, lower --max-tokens, or /reset",
    });
    try {
      return await this.#turn(prompt, options);
    } catch (error) {
      this.reset(); // what the state holds after a failure is not known: start over, exactly
      throw error;
    }
  }

  /**
   * Feeds the first `length` ids of `prompt` (reusing what it can) and generates nothing: the
   * prefill a request's choices share (conversation-pool.ts). Each choice then starts from a
   * copy of this state (`adopt`) and feeds the prompt's last id itself, as a row of one batched
   * step, so its first logits are those a turn on the whole prompt gives.
   */
  async prefill(prompt: RenderedPrompt, length: number, options: Pick<TurnOptions, "cancelled" | "onPrefill">): Promise<TurnResult> {
    if (length < 1 || length >= prompt.ids.length) throw new Error(`prefill: ${length} of a ${prompt.ids.length}-id prompt`);
    const prefix = { ids: prompt.ids.slice(0, length), historyEnd: Math.min(prompt.historyEnd, length) };
    try {
      return await this.#turn(prefix, { ...options, sampler: greedy, maxNewTokens: 0, stopIds: new Set() }, "prefix");
    } catch (error) {
      this.reset();
      throw error;
    }
  }

  /**
   * Takes `from`'s live state as its own, bit for bit (the shared prefill of a request's
   * choices). Its own snapshots stay exact: those the copy's rows would not match are parked or
   * dropped first, as before any rewrite.
   */
  adopt(from: Conversation): void {
    if (from === this) return;
    this.#snapshots.protect(from.#fed, this.#state);
    this.#state.copyFrom(from.#state);
    this.#fed = [...from.#fed];
  }

  /**
   * Chooses the reused prefix and the snapshot points; the generation itself is decode()'s. A
   * "prefix" feed takes no snapshot at its end (the turns that go on from it do).
   */
  async #turn(prompt: RenderedPrompt, options: TurnOptions, feed: "prompt" | "prefix" = "prompt"): Promise<TurnResult> {
    const { ids, historyEnd } = prompt;
    const turnStarted = performance.now();
    const { start, from } = this.#reuse(ids);
    const reused = ids.slice(0, start);
    this.#fed = reused;
    const since = (at: number) => (performance.now() - at) / 1000;
    const fresh = ids.slice(start);
    // Snapshot (a) after the conversation messages, (b) at the end of the prompt; chunking does not change the bits (test/gates/chunks).
    const messagesEnd = historyEnd - start;
    const systemEnd = (prompt.systemEnd ?? 0) - start;
    // Where the prompt cache keeps a state: the system part's end and the marked prefixes, before the messages' end.
    const cachePoints = new Set([systemEnd, ...(prompt.cacheBreaks ?? []).map((at) => at - start)].filter((at) => at > 0 && at < messagesEnd));
    let prefillSeconds = 0;
    let decodeStarted = turnStarted;
    const decoded = await decode(this.#model, fresh, {
      mode: "incremental", maxNewTokens: options.maxNewTokens, sampler: options.sampler, stopIds: options.stopIds,
      constraint: options.constraint, onChosen: options.onChosen,
      state: this.#state, history: reused, prefillChunk: this.#chunk, prefillBreaks: this.#cache ? [messagesEnd, ...cachePoints] : [messagesEnd], speculative: this.#speculative, batch: this.#batch,
      onToken: options.onToken, cancelled: options.cancelled,
      onPrefill: (fed) => {
        // The ids the state holds now, copied only where a snapshot is taken (not after every chunk).
        const held = () => ids.slice(0, start + fed);
        if (cachePoints.has(fed)) this.#cache?.save(held(), this.#state);
        if (fed > 0 && fed === messagesEnd && fed < fresh.length) {
          this.#snapshots.add(held(), this.#state, "messages end");
          this.#cache?.save(held(), this.#state);
        }
        if (fed === fresh.length) {
          if (feed === "prompt" || messagesEnd === fresh.length) {
            this.#snapshots.add(held(), this.#state, messagesEnd >= fresh.length ? "messages end" : "prompt end");
            this.#cache?.save(held(), this.#state);
          }
          prefillSeconds = since(turnStarted);
          decodeStarted = performance.now();
        }
        options.onPrefill?.({ fed, total: fresh.length, reused: start, reusedFrom: from, seconds: since(turnStarted) });
      },
    });
    // Exactly the ids the state has consumed: the prompt as far as it was fed, every emitted id but the last (pending, or a stop id).
    this.#fed = [...reused, ...fresh.slice(0, decoded.promptFed), ...decoded.generated.slice(0, -1)];
    if (decoded.generated.length > 1) this.#snapshots.add(this.#fed, this.#state, "reply end");
    const prefilled = decoded.promptFed === fresh.length;
    return {
      generated: decoded.generated, finish: decoded.finish, fedPromptIds: decoded.promptFed, reusedPromptIds: start, reusedFrom: from,
      prefillSeconds: prefilled ? prefillSeconds : since(turnStarted), decodeSeconds: prefilled ? since(decodeStarted) : 0,
      snapshots: this.#snapshots.counts, ...(decoded.speculation && { speculation: decoded.speculation }),
      ...(options.constraint && { forcedIds: decoded.forcedIds }),
    };
  }

  close(): void {
    this.#speculative?.drafter.close?.();
    this.#snapshots.close();
    this.#model.release(this.#state);
  }
}
