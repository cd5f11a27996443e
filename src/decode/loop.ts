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
  /**
   * Ids per forward call when feeding a prompt (or, in recompute, a prefix): each chunk goes
   * through every layer together, so weights and experts are read once per chunk. Any size
   * gives the same bits; the whole prompt in one call when omitted.
   */
  prefillChunk?: number;
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

/** Feeds `ids` in chunks of `chunk` (all at once without one); returns the last position's logits. */
export function feed<State>(model: Forward<State>, state: State, ids: readonly number[], chunk?: number): Float32Array {
  const size = chunk ?? ids.length;
  if (!Number.isInteger(size) || size < 1) throw new Error(`feed: chunk size ${size} is not a positive integer`);
  let logits: Float32Array | undefined;
  for (let at = 0; at < ids.length; at += size) logits = model.run(state, ids.slice(at, at + size));
  if (!logits) throw new Error("feed: no ids to feed");
  return logits;
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
        logits = step === 0 ? feed(model, carried, prompt, options.prefillChunk) : model.run(carried, [generated[step - 1] as number]);
      } else {
        const fresh = model.newState();
        try {
          logits = feed(model, fresh, [...prompt, ...generated], options.prefillChunk);
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
