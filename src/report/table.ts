/** The per-step table and summary line (runtime.md 7.2, 7.3), for people, on stderr. */
import type { StepRecord } from "../decode/greedy.ts";

export const rule = "-".repeat(68);

/** Per-step expert figures: the TRUE resident hit rate (not the flattering raw one) and bytes read. */
export interface StepExperts {
  requests: number;
  residentHits: number;
  bytesRead: number;
}

export function stepHeader(): string {
  return `${"STEP".padEnd(6)}${"TOKEN".padEnd(10)}${"SECONDS".padEnd(12)}${"CACHE HIT".padEnd(10)}${"READ GB".padEnd(10)}TOK/S\n${rule}`;
}

export function stepRow(r: StepRecord, experts: StepExperts): string {
  const rate = r.seconds > 0 ? (1 / r.seconds).toFixed(3) : "inf";
  const hit = experts.requests > 0 ? ((100 * experts.residentHits) / experts.requests).toFixed(1) : "-";
  const read = (experts.bytesRead / 1e9).toFixed(2);
  return `${String(r.step).padEnd(6)}${String(r.token).padEnd(10)}${r.seconds.toFixed(2).padEnd(12)}${hit.padEnd(10)}${read.padEnd(10)}${rate}`;
}

/** Seconds over the step wall times only; loading and setup are excluded. */
export function decodeSeconds(steps: readonly StepRecord[]): number {
  return steps.reduce((sum, s) => sum + s.seconds, 0);
}

export function summaryLine(steps: readonly StepRecord[]): string {
  const total = decodeSeconds(steps);
  const average = steps.length > 0 ? (total / steps.length).toFixed(3) : "n/a";
  return `${rule}\n${steps.length} tokens in ${total.toFixed(2)} s, ${average} s/token average`;
}
