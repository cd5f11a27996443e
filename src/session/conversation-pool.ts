/**
 * `k3 serve --parallel N`: N conversations on one engine, each a live state with its own
 * snapshots (conversation.ts), generating at once with their steps batched (decode/step-batch.ts):
 * one read of the weights a step serves all of them. A turn goes to the free conversation that
 * can reuse most of its prompt (the one a multi-turn client's last turn ran on, usually), else
 * to the one used least recently. A request with several choices (`n`) takes that many
 * conversations: the best one feeds the prompt but its last id, the others copy its state, and
 * each choice feeds the last id and decodes as a row of the same steps. Every answer is the one
 * a single conversation gives: batching never changes bits, and reuse is exact or none.
 */
import { StepBatcher, type BatchStats, type StepBatch } from "../decode/step-batch.ts";
import { runtimeError } from "../errors.ts";
import type { Model } from "../model/forward.ts";
import type { SequenceState } from "../model/state.ts";
import {
  Conversation, type ConversationOptions, type PrefillProgress, type RenderedPrompt, type SharedSteps, type TurnOptions, type TurnResult,
} from "./conversation.ts";

interface Slot {
  conversation: Conversation;
  busy: boolean;
  used: number;
  /** The request generating on this conversation now: what its steps shared. */
  tally: SharedSteps | undefined;
}

export interface PoolOptions extends Omit<ConversationOptions, "batch"> {
  /** Bytes read from disk so far (trunk and experts): each request is told its share of every step's. */
  bytesRead?: () => number;
}

export class ConversationPool {
  readonly #slots: Slot[];
  readonly #batcher: StepBatcher<SequenceState>;
  /** Which conversation each state in a step belongs to, learnt from its forward calls. */
  readonly #owners = new Map<SequenceState, Slot>();
  #clock = 0;

  /** `options.snapshots` is the whole pool's: each conversation gets an equal share. */
  constructor(model: Model, size: number, options: PoolOptions) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`a pool of ${size} conversations`);
    const { bytesRead, ...conversationOptions } = options;
    this.#batcher = new StepBatcher(model);
    this.#countSharing(bytesRead ?? (() => 0));
    const snapshots = { ...options.snapshots, ramBytes: options.snapshots.ramBytes / size, diskBytes: options.snapshots.diskBytes / size };
    this.#slots = Array.from({ length: size }, () => {
      const slot: Slot = { conversation: undefined as unknown as Conversation, busy: false, used: 0, tally: undefined };
      slot.conversation = new Conversation(model, { ...conversationOptions, snapshots, batch: this.#ownedBatch(slot) });
      return slot;
    });
  }

  /** The batcher as one conversation sees it: its calls are marked as its own. */
  #ownedBatch(slot: Slot): StepBatch<SequenceState> {
    return {
      join: () => this.#batcher.join(),
      run: (state, ids, outputs, options) => {
        this.#owners.set(state, slot);
        return this.#batcher.run(state, ids, outputs, options);
      },
    };
  }

  /** Per request: the steps its sequences were in (once a step however many of its rows), their rows, and its rows' share of what each read. */
  #countSharing(bytesRead: () => number): void {
    let readBefore = 0;
    const tallies = (calls: readonly { state: SequenceState }[]) => new Set(calls.map((c) => this.#owners.get(c.state)?.tally).filter((t) => t !== undefined));
    this.#batcher.hooks = {
      before: (calls, rows) => {
        readBefore = bytesRead();
        for (const tally of tallies(calls)) {
          tally.steps++;
          tally.rows += rows;
        }
      },
      after: (calls, rows) => {
        const read = bytesRead() - readBefore;
        for (const call of calls) {
          const tally = this.#owners.get(call.state)?.tally;
          if (tally) tally.bytesReadShare += (read * call.ids.length) / rows;
        }
      },
    };
  }

  get capacity(): number {
    return (this.#slots[0] as Slot).conversation.capacity;
  }

  get size(): number {
    return this.#slots.length;
  }

  /** The batched steps so far: how many, and how many sequences and rows they held. */
  get batchStats(): BatchStats {
    return { ...this.#batcher.stats };
  }

  async turn(prompt: RenderedPrompt, options: TurnOptions): Promise<TurnResult> {
    return (await Promise.all(this.turns(prompt, [options])))[0] as TurnResult;
  }

  /**
   * The choices of one request, one per element of `options` (each its own sampler), as their
   * conversations finish. The cancellation and the prefill progress of the first are the
   * request's.
   */
  turns(prompt: RenderedPrompt, options: readonly TurnOptions[]): Promise<TurnResult>[] {
    const n = options.length;
    const free = this.#slots.filter((s) => !s.busy);
    if (n < 1 || free.length < n) throw runtimeError(`${n} choices, and ${free.length} of ${this.#slots.length} conversations are free (the server admits no more than that)`);
    const reuse = new Map(free.map((s) => [s, s.conversation.reusable(prompt.ids)]));
    const primary = free.reduce((best, s) => {
      const gain = (reuse.get(s) as number) - (reuse.get(best) as number);
      return gain > 0 || (gain === 0 && s.used < best.used) ? s : best;
    });
    const others = free.filter((s) => s !== primary).sort((a, b) => a.used - b.used).slice(0, n - 1);
    const group = [primary, ...others];
    const tally: SharedSteps = { steps: 0, rows: 0, bytesReadShare: 0 };
    for (const slot of group) {
      slot.busy = true;
      slot.used = ++this.#clock;
      slot.tally = tally;
    }
    const first = options[0] as TurnOptions;
    const shared = n > 1 && prompt.ids.length > 1 ? this.#sharedPrefill(primary, others, prompt, first) : Promise.resolve(undefined);
    return group.map(async (slot, i) => {
      try {
        const prefilled = await shared;
        const choice = options[i] as TurnOptions;
        if (prefilled && prefilled.finish === "cancelled") return { ...prefilled, batch: { ...tally } };
        const onPrefill = i === 0 ? joinProgress(prefilled, first.onPrefill) : undefined;
        const turn = await slot.conversation.turn(prompt, { ...choice, onPrefill });
        return { ...merged(prefilled, turn), batch: { ...tally } };
      } finally {
        slot.busy = false;
        slot.tally = undefined;
      }
    });
  }

  /** The prompt but its last id into `primary`, then into every other choice's conversation by copy. */
  async #sharedPrefill(primary: Slot, others: readonly Slot[], prompt: RenderedPrompt, first: TurnOptions): Promise<TurnResult> {
    const length = prompt.ids.length - 1;
    const total = (p: PrefillProgress) => ({ ...p, total: p.total + 1 }); // the last id is still to come, fed by each choice
    const result = await primary.conversation.prefill(prompt, length, { cancelled: first.cancelled, onPrefill: first.onPrefill && ((p) => first.onPrefill?.(total(p))) });
    if (result.finish !== "cancelled") for (const slot of others) slot.conversation.adopt(primary.conversation);
    return result;
  }

  close(): void {
    for (const slot of this.#slots) slot.conversation.close();
  }
}

/** A choice's progress as the request's: after the shared prefill, its one id completes the prompt. */
function joinProgress(prefilled: TurnResult | undefined, onPrefill: TurnOptions["onPrefill"]): TurnOptions["onPrefill"] {
  if (!prefilled || !onPrefill) return onPrefill;
  const fed = prefilled.fedPromptIds;
  return (p) => onPrefill({ fed: fed + p.fed, total: fed + p.total, reused: prefilled.reusedPromptIds, reusedFrom: prefilled.reusedFrom, seconds: prefilled.prefillSeconds + p.seconds });
}

/** A choice's turn as the request's: the prompt ids the shared prefill reused and fed count as its own. */
function merged(prefilled: TurnResult | undefined, turn: TurnResult): TurnResult {
  if (!prefilled) return turn;
  return {
    ...turn, fedPromptIds: prefilled.fedPromptIds + turn.fedPromptIds, reusedPromptIds: prefilled.reusedPromptIds, reusedFrom: prefilled.reusedFrom,
    prefillSeconds: prefilled.prefillSeconds + turn.prefillSeconds,
  };
}
