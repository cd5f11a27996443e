/** The per-step table and summary line (runtime.md 7.2, 7.3), for people, on stderr. */
import type { StepRecord } from "../decode/greedy.ts";

export const rule = "-".repeat(68);

export function stepHeader(): string {
  return `${"STEP".padEnd(6)}${"TOKEN".padEnd(10)}${"SECONDS".padEnd(12)}TOK/S\n${rule}`;
}

export function stepRow(r: StepRecord): string {
  const rate = r.seconds > 0 ? (1 / r.seconds).toFixed(3) : "inf";
  return `${String(r.step).padEnd(6)}${String(r.token).padEnd(10)}${r.seconds.toFixed(2).padEnd(12)}${rate}`;
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
