/**
 * `k3 serve --parallel N`: N conversations on one engine, each a live state with its own
 * snapshots (conversation.ts), generating at once with their steps batched (decode/step-batch.ts):
 * one read of the weights a step serves all of them. A turn goes to the free conversation that
 * can reuse most of its prompt (the one a multi-turn client's last turn ran on, usually), else
 * to the one used least recently. Every answer is the one a single conversation gives: batching
 * never changes bits, and reuse is exact or none.
 */
import { StepBatcher, type BatchStats } from "../decode/step-batch.ts";
import { runtimeError } from "../errors.ts";
import type { Model } from "../model/forward.ts";
import type { SequenceState } from "../model/state.ts";
import { Conversation, type ConversationOptions, type RenderedPrompt, type TurnOptions, type TurnResult } from "./conversation.ts";

interface Slot {
  conversation: Conversation;
  busy: boolean;
  used: number;
}

export class ConversationPool {
  readonly #slots: Slot[];
  readonly #batcher: StepBatcher<SequenceState>;
  #clock = 0;

  /** `options.snapshots` is the whole pool's: each conversation gets an equal share. */
  constructor(model: Model, size: number, options: Omit<ConversationOptions, "batch">) {
    if (!Number.isInteger(size) || size < 1) throw new Error(`a pool of ${size} conversations`);
    this.#batcher = new StepBatcher(model);
    const snapshots = { ...options.snapshots, ramBytes: options.snapshots.ramBytes / size, diskBytes: options.snapshots.diskBytes / size };
    this.#slots = Array.from({ length: size }, () => ({
      conversation: new Conversation(model, { ...options, snapshots, batch: this.#batcher }), busy: false, used: 0,
    }));
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
    const free = this.#slots.filter((s) => !s.busy);
    if (free.length === 0) throw runtimeError(`all ${this.#slots.length} conversations are generating (the server admits no more than that)`);
    const reuse = new Map(free.map((s) => [s, s.conversation.reusable(prompt.ids)]));
    const slot = free.reduce((best, s) => {
      const gain = (reuse.get(s) as number) - (reuse.get(best) as number);
      return gain > 0 || (gain === 0 && s.used < best.used) ? s : best;
    });
    slot.busy = true;
    slot.used = ++this.#clock;
    try {
      return await slot.conversation.turn(prompt, options);
    } finally {
      slot.busy = false;
    }
  }

  close(): void {
    for (const slot of this.#slots) slot.conversation.close();
  }
}
