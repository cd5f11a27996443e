/**
 * The decode loop (runtime.md 7.1). Incremental decode (the default) prefills the prompt once
 * and then feeds one token per step, carrying the sequence state; full recompute runs the whole
 * prefix from a fresh state every step. Both must emit the same tokens. The loop only composes:
 * the model makes logits, the sampler picks, stop ids and the caller end the run.
 */
import type { Forward } from "../model/sequence.ts";
import { greedy, type Sampler } from "./sampler.ts";

export type DecodeMode = "incremental" | "recompute";

/**
 * Why generation ended, the one table of engine finish reasons: `length` (the token budget
 * was spent), `stop` (a stop id was emitted, or the caller asked to stop there), `cancelled`
 * (the caller gave up, e.g. a client went away).
 */
export const finishReasons = ["length", "stop", "cancelled"] as const;
export type FinishReason = (typeof finishReasons)[number];

export interface StepRecord {
  step: number;
  token: number;
  seconds: number;
}

export interface DecodeOptions {
  maxNewTokens: number;
  mode: DecodeMode;
  /** Picks each token from its logits; greedy (ties to the lowest id) when omitted. */
  sampler?: Sampler;
  /** Emitting one of these ends the run with `stop`; the id itself is kept in `generated`. */
  stopIds?: ReadonlySet<number>;
  /** Told each token as it is chosen; returning a reason ends the run after that token. */
  onToken?: (token: number, step: number) => "stop" | "cancelled" | undefined | void;
  /** Before a step's forward pass (per-step counters reset here). */
  beforeStep?: (step: number) => void;
  /** After a step, with its token and wall time. */
  afterStep?: (record: StepRecord) => void;
}

export interface DecodeResult {
  generated: number[];
  steps: StepRecord[];
  /** Logits of the last prompt position (step 0), for --dump-logits. */
  firstLogits: Float32Array | undefined;
  finish: FinishReason;
}

export function decode<State>(model: Forward<State>, prompt: readonly number[], options: DecodeOptions): DecodeResult {
  const sampler = options.sampler ?? greedy;
  const generated: number[] = [];
  const steps: StepRecord[] = [];
  let firstLogits: Float32Array | undefined;
  let finish: FinishReason = "length";
  const carried = options.mode === "incremental" ? model.newState() : undefined;
  try {
    for (let step = 0; step < options.maxNewTokens; step++) {
      options.beforeStep?.(step);
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
      const token = sampler.choose(logits);
      sampler.accept?.(token);
      generated.push(token);
      const record = { step, token, seconds: (performance.now() - started) / 1000 };
      steps.push(record);
      options.afterStep?.(record);
      const asked = options.onToken?.(token, step);
      if (asked) {
        finish = asked;
        break;
      }
      if (options.stopIds?.has(token)) {
        finish = "stop";
        break;
      }
    }
  } finally {
    if (carried) model.release(carried);
  }
  return { generated, steps, firstLogits, finish };
}
