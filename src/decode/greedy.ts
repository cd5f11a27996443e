/**
 * The greedy decode loop (runtime.md 7.1). Incremental decode (the default) prefills the
 * prompt once and then feeds one token per step, carrying the sequence state; full recompute
 * runs the whole prefix from a fresh state every step. Both must emit the same tokens.
 */
export type DecodeMode = "incremental" | "recompute";

/** What the loop needs from a model: run tokens on a state, get the last position's logits. */
export interface Forward<State> {
  newState(): State;
  /** Feeds `ids` after whatever `state` has consumed; returns the last position's logits. */
  run(state: State, ids: readonly number[]): Float32Array;
  release(state: State): void;
}

export interface StepRecord {
  step: number;
  token: number;
  seconds: number;
}

export interface DecodeResult {
  generated: number[];
  steps: StepRecord[];
  /** Logits of the last prompt position (step 0), for --dump-logits. */
  firstLogits: Float32Array | undefined;
}

/** Arg-max with ties to the lowest id (model.md 6.13). NaN never wins. */
export function argmax(logits: Float32Array): number {
  let best = 0;
  let bestValue = -Infinity;
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i] as number;
    if (v > bestValue) {
      bestValue = v;
      best = i;
    }
  }
  return best;
}

export interface StepHooks {
  /** Before a step's forward pass (per-step counters reset here). */
  beforeStep?: (step: number) => void;
  /** After a step, with its token and wall time. */
  afterStep?: (record: StepRecord) => void;
}

export function decode<State>(
  model: Forward<State>, prompt: readonly number[], gen: number, mode: DecodeMode, hooks: StepHooks = {},
): DecodeResult {
  const generated: number[] = [];
  const steps: StepRecord[] = [];
  let firstLogits: Float32Array | undefined;
  const carried = mode === "incremental" ? model.newState() : undefined;
  try {
    for (let step = 0; step < gen; step++) {
      hooks.beforeStep?.(step);
      const started = performance.now();
      let logits: Float32Array;
      if (carried) {
        logits = model.run(carried, step === 0 ? prompt : [generated[step - 1] as number]);
      } else {
        const fresh = model.newState();
        try {
          logits = model.run(fresh, [...prompt, ...generated]);
        } finally {
          model.release(fresh);
        }
      }
      if (step === 0) firstLogits = logits.slice();
      const token = argmax(logits);
      generated.push(token);
      const record = { step, token, seconds: (performance.now() - started) / 1000 };
      steps.push(record);
      hooks.afterStep?.(record);
    }
  } finally {
    if (carried) model.release(carried);
  }
  return { generated, steps, firstLogits };
}
