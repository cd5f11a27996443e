/**
 * What a decode loop needs from a model, declared where the model lives so that decode depends
 * on model and never the reverse: run new ids on a carried state and get logits back.
 */

/** Which positions of a call get logits: the last one (decoding), or every one (verifying a draft). */
export type Outputs = "last" | "all";

/** How a call runs: `replayable` keeps what a later `replay` needs to return to a prefix of it. */
export interface RunOptions {
  replayable?: boolean;
}

/** One sequence's part of a batched step: its ids after what its state has consumed. */
export interface BatchedCall<State> {
  state: State;
  ids: readonly number[];
  /** Default "last". */
  outputs?: Outputs;
  replayable?: boolean;
}

/**
 * A model that runs several sequences' calls as one step, each call's logits the bits `run`
 * gives it alone (model/forward.ts Model; decode/step-batch.ts gathers the calls).
 */
export interface BatchForward<State> {
  runBatch(calls: readonly BatchedCall<State>[]): Float32Array[];
}

export interface Forward<State> {
  /** The vocabulary size: the width of one row of logits. */
  readonly vocabSize: number;
  newState(): State;
  /**
   * Feeds `ids` after whatever `state` has consumed. Returns [rows][vocab] logits, one row for
   * "last" (the default) or one per id for "all"; each row is bit-identical either way.
   */
  run(state: State, ids: readonly number[], outputs?: Outputs, options?: RunOptions): Float32Array;
  /**
   * Optional: after a replayable call, takes `state` back to `snapshot` (taken just before that
   * call) and forward over the call's first `tokens` ids without running the model again, with
   * exactly the state feeding them would leave. Without it, a caller restores and feeds them.
   */
  replay?(state: State, snapshot: unknown, tokens: number): void;
  release(state: State): void;
}

/**
 * A state that can go back (speculative verification): a snapshot of the recurrent part, and a
 * restore to it. Rows after the snapshot's position are rewritten before they are read again.
 */
export interface Rewindable<Snapshot> {
  readonly position: number;
  readonly capacity: number;
  /** A copy of the recurrent part; `into` reuses an earlier snapshot's buffers. */
  snapshot(into?: Snapshot): Snapshot;
  restore(snapshot: Snapshot): void;
}
