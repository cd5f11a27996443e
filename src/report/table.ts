/** The per-step table and summary line (runtime.md 7.2, 7.3), for people, on stderr. */
import type { StepResult } from "../engine/result.ts";
import { formatGb } from "../units.ts";

export const rule = "-".repeat(68);

export function stepHeader(): string {
  return `${"STEP".padEnd(6)}${"TOKEN".padEnd(10)}${"SECONDS".padEnd(12)}${"CACHE HIT".padEnd(10)}${"READ GB".padEnd(10)}TOK/S\n${rule}`;
}

/** One step: the TRUE resident hit rate (not the flattering raw one) and the bytes it read. */
export function stepRow(r: StepResult): string {
  const rate = r.seconds > 0 ? (1 / r.seconds).toFixed(3) : "inf";
  const hit = r.experts.requests > 0 ? ((100 * r.experts.residentHits) / r.experts.requests).toFixed(1) : "-";
  const read = formatGb(r.experts.bytesRead);
  return `${String(r.step).padEnd(6)}${String(r.token).padEnd(10)}${r.seconds.toFixed(2).padEnd(12)}${hit.padEnd(10)}${read.padEnd(10)}${rate}`;
}

export function summaryLine(steps: number, decodeSeconds: number): string {
  const average = steps > 0 ? (decodeSeconds / steps).toFixed(3) : "n/a";
  return `${rule}\n${steps} tokens in ${decodeSeconds.toFixed(2)} s, ${average} s/token average`;
}
