/**
 * The evidence-gated n-gram drafter (runtime.md 9.1). It drafts only what the sequence's own
 * history agrees on: the continuation after the most recent earlier occurrence of the last n
 * ids, cut where the second most recent occurrence disagrees. An eager "most recent match"
 * drafter was measured slower than none on code, because a partial acceptance pays a replay.
 */
import type { Drafter } from "./drafter.ts";

/** Suffix lengths tried, longest first. */
const suffixLengths = [4, 3] as const;

/** Start indices of earlier occurrences of the last `n` ids, most recent first (at most two). */
function occurrences(sequence: readonly number[], n: number): number[] {
  const end = sequence.length;
  const found: number[] = [];
  // An occurrence must start before the suffix itself.
  for (let start = end - n - 1; start >= 0 && found.length < 2; start--) {
    let match = true;
    for (let i = 0; i < n && match; i++) match = sequence[start + i] === sequence[end - n + i];
    if (match) found.push(start);
  }
  return found;
}

/** The draft for suffix length `n`, or none. */
function draftFor(sequence: readonly number[], n: number, max: number): number[] {
  const end = sequence.length;
  if (end < n + 1) return [];
  const [m1, m2] = occurrences(sequence, n);
  if (m1 === undefined) return [];
  const draft: number[] = [];
  for (let i = 0; i < max; i++) {
    const at = m1 + n + i;
    if (at >= end) break; // never past the current end of the sequence
    if (m2 !== undefined) {
      const other = m2 + n + i;
      if (other >= m1 || sequence[other] !== sequence[at]) break; // history must agree, and not run into m1
    }
    draft.push(sequence[at] as number);
  }
  return draft;
}

export const ngramDrafter: Drafter = {
  propose(sequence, max) {
    for (const n of suffixLengths) {
      const draft = draftFor(sequence, n, max);
      if (draft.length > 0) return draft;
    }
    return [];
  },
};
