/**
 * Continuous batching (issue 24): the sequences decoding at once each run their own decode loop
 * (decode/loop.ts, the one loop), and their forward calls meet here. A step goes to the model
 * as one batched call once every sequence that has joined is waiting on one, or at the next turn
 * of the event loop if one is not (a slow consumer must not hold the others up). The model gives
 * each row the bits it gets alone, so when a step goes, and with whom, never changes an answer.
 */
import type { BatchedCall, BatchForward, Outputs, RunOptions } from "../model/sequence.ts";

/** What one sequence's decode loop sees: a forward call that may share its step with others'. */
export interface StepBatch<State> {
  /** A sequence starts decoding here; call the returned function when it ends. */
  join(): () => void;
  run(state: State, ids: readonly number[], outputs?: Outputs, options?: RunOptions): Promise<Float32Array>;
}

/** What the batcher did: steps run, and the rows and sequences of each on average and at most. */
export interface BatchStats {
  steps: number;
  rows: number;
  sequences: number;
  maxRows: number;
  maxSequences: number;
}

interface Pending<State> {
  call: BatchedCall<State>;
  resolve: (logits: Float32Array) => void;
  reject: (error: unknown) => void;
}

export class StepBatcher<State> implements StepBatch<State> {
  readonly #model: BatchForward<State>;
  readonly #pending: Pending<State>[] = [];
  #members = 0;
  #flushQueued = false;
  readonly stats: BatchStats = { steps: 0, rows: 0, sequences: 0, maxRows: 0, maxSequences: 0 };
  /** Around each step, with its calls and their rows in all (per-step counters, statistics per request). */
  hooks: { before?: (calls: readonly BatchedCall<State>[], rows: number) => void; after?: (calls: readonly BatchedCall<State>[], rows: number) => void } = {};

  constructor(model: BatchForward<State>) {
    this.#model = model;
  }

  get members(): number {
    return this.#members;
  }

  join(): () => void {
    this.#members++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.#members--;
      if (this.#pending.length > 0 && this.#pending.length >= this.#members) this.#flush();
    };
  }

  run(state: State, ids: readonly number[], outputs?: Outputs, options: RunOptions = {}): Promise<Float32Array> {
    const { promise, resolve, reject } = Promise.withResolvers<Float32Array>();
    this.#pending.push({ call: { state, ids, outputs, replayable: options.replayable }, resolve, reject });
    if (this.#pending.length >= this.#members) {
      this.#flush();
    } else if (!this.#flushQueued) {
      this.#flushQueued = true;
      setImmediate(() => {
        this.#flushQueued = false;
        if (this.#pending.length > 0) this.#flush();
      });
    }
    return promise;
  }

  #flush(): void {
    const batch = this.#pending.splice(0);
    const calls = batch.map((p) => p.call);
    const rows = calls.reduce((n, c) => n + c.ids.length, 0);
    let logits: Float32Array[];
    try {
      this.hooks.before?.(calls, rows);
      logits = this.#model.runBatch(calls);
      this.hooks.after?.(calls, rows);
    } catch (error) {
      for (const p of batch) p.reject(error);
      return;
    }
    const s = this.stats;
    s.steps++;
    s.rows += rows;
    s.sequences += calls.length;
    s.maxRows = Math.max(s.maxRows, rows);
    s.maxSequences = Math.max(s.maxSequences, calls.length);
    batch.forEach((p, i) => p.resolve(logits[i] as Float32Array));
  }
}
