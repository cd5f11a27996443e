/**
 * A draft model as a Drafter (hybrid decode, runtime.md 9.3): a second model with its own state
 * proposes by running one-token steps from the pending id, chaining its own arg-max. Before
 * proposing it snapshots its state, so when the exact model accepts only part of a draft the
 * draft goes back and replays what was kept, mirroring the exact side; when the exact model fed
 * ids the draft has not seen (the prompt, a step with no draft, the last accepted id) it feeds
 * them. Its state therefore always ends a sync holding exactly the ids the exact model holds.
 * The drafter only proposes: the exact model verifies every id, so nothing it does can change
 * the output, only how many ids a sweep emits.
 */
import type { Forward, Rewindable } from "../model/sequence.ts";
import type { Drafter } from "./drafter.ts";
import { argmax } from "./sampler.ts";

export interface ModelDrafterStats {
  /** propose() calls that drafted at least one id. */
  proposals: number;
  /** Ids proposed in all. */
  proposed: number;
  /** Ids the draft model fed: the prompt, each draft step, what sync added or replayed. */
  fedIds: number;
  /** Times the draft went back to its snapshot (the exact model kept less than it drafted). */
  restores: number;
  /** Times no snapshot reached back far enough and the draft refed from its start. */
  rebuilds: number;
  /** Wall seconds inside propose() and sync(). */
  seconds: number;
}

export interface ModelDrafterOptions {
  /** Ids per forward call when the draft catches up on many ids at once (the prompt). */
  chunk: number;
}

interface Snapshot {
  free(): void;
}

export class ModelDrafter<State extends Rewindable<Snap>, Snap extends Snapshot> implements Drafter {
  readonly stats: ModelDrafterStats = { proposals: 0, proposed: 0, fedIds: 0, restores: 0, rebuilds: 0, seconds: 0 };
  readonly #model: Forward<State>;
  readonly #chunk: number;
  #state: State;
  /** Every id the draft state has consumed, in order: the exact model's feeds, then its own guesses. */
  readonly #fed: number[] = [];
  #snapshot: Snap | undefined;
  /** How many ids `#fed` held when the snapshot was taken; -1 without one. */
  #snapshotAt = -1;

  constructor(model: Forward<State>, options: ModelDrafterOptions) {
    if (!Number.isInteger(options.chunk) || options.chunk < 1) throw new Error(`ModelDrafter: chunk ${options.chunk} is not a positive integer`);
    this.#model = model;
    this.#chunk = options.chunk;
    this.#state = model.newState();
  }

  /** The ids the draft state holds now (a copy). */
  get fed(): number[] {
    return [...this.#fed];
  }

  sync(fed: readonly number[]): void {
    const started = performance.now();
    try {
      this.#catchUp(fed);
    } finally {
      this.stats.seconds += (performance.now() - started) / 1000;
    }
  }

  propose(sequence: readonly number[], max: number): number[] {
    const started = performance.now();
    try {
      const pending = sequence.at(-1);
      if (pending === undefined) return [];
      this.#catchUp(sequence.slice(0, -1));
      // n steps feed the pending id and n - 1 drafts: all of them must fit the state.
      const n = Math.min(Math.floor(max), this.#state.capacity - this.#state.position);
      if (n < 1) return [];
      this.#snapshot = this.#state.snapshot(this.#snapshot);
      this.#snapshotAt = this.#fed.length;
      const drafts: number[] = [];
      let next = pending;
      for (let i = 0; i < n; i++) {
        const logits = this.#model.run(this.#state, [next]);
        this.#fed.push(next);
        this.stats.fedIds++;
        next = argmax(logits);
        drafts.push(next);
      }
      this.stats.proposals++;
      this.stats.proposed += drafts.length;
      return drafts;
    } finally {
      this.stats.seconds += (performance.now() - started) / 1000;
    }
  }

  /** Brings the draft state to exactly `target`: back to the snapshot (or the start) if it went astray, then feeds what it lacks. */
  #catchUp(target: readonly number[]): void {
    let common = 0;
    const limit = Math.min(this.#fed.length, target.length);
    while (common < limit && this.#fed[common] === target[common]) common++;
    if (common < this.#fed.length) {
      if (this.#snapshot && this.#snapshotAt >= 0 && this.#snapshotAt <= common) {
        this.#state.restore(this.#snapshot);
        this.#fed.length = this.#snapshotAt;
        this.stats.restores++;
      } else {
        this.#model.release(this.#state);
        this.#state = this.#model.newState();
        this.#fed.length = 0;
        this.#dropSnapshot();
        this.stats.rebuilds++;
      }
    }
    // The snapshot's rows stay valid only while the state still starts with its ids.
    if (this.#snapshotAt > this.#fed.length) this.#dropSnapshot();
    const missing = target.slice(this.#fed.length);
    for (let at = 0; at < missing.length; at += this.#chunk) {
      const ids = missing.slice(at, at + this.#chunk);
      this.#model.run(this.#state, ids);
      this.#fed.push(...ids);
      this.stats.fedIds += ids.length;
    }
  }

  #dropSnapshot(): void {
    this.#snapshot?.free();
    this.#snapshot = undefined;
    this.#snapshotAt = -1;
  }

  close(): void {
    this.#dropSnapshot();
    this.#model.release(this.#state);
  }
}
