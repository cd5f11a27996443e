/**
 * The teacher-forced check (runtime.md 9.4): one pass over a sequence with the argmax at every
 * position, prediction i (after ids 0..i) against id i + 1. It measures what a draft's
 * acceptance would be under batched verification; free-running comparisons cannot, because
 * one early divergence changes every later context.
 */
import type { Forward } from "../model/sequence.ts";
import { argmax } from "./sampler.ts";

export interface TeacherForced {
  /** The argmax after each position but the last, in order. */
  predicted: number[];
  /** How many of them equal the next id. */
  matches: number;
  /** Positions compared: ids - 1. */
  positions: number;
}

/** Feeds `ids` in chunks of `chunk`, keeping the argmax of every position's logits. */
export function teacherForced<State>(model: Forward<State>, ids: readonly number[], chunk: number): TeacherForced {
  const state = model.newState();
  const predicted: number[] = [];
  try {
    const V = model.vocabSize;
    for (let at = 0; at < ids.length - 1; at += chunk) {
      const part = ids.slice(at, Math.min(at + chunk, ids.length - 1));
      const rows = model.run(state, part, "all");
      for (let i = 0; i < part.length; i++) predicted.push(argmax(rows.subarray(i * V, (i + 1) * V)));
    }
  } finally {
    model.release(state);
  }
  const matches = predicted.filter((p, i) => p === ids[i + 1]).length;
  return { predicted, matches, positions: predicted.length };
}
