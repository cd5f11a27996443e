/** The JSON results file (runtime.md 7.5), written whole or not at all. */
import { renameSync, writeFileSync } from "node:fs";
import { K3Error, ExitCode } from "../errors.ts";

export interface RunResults {
  prompt_ids: number[];
  generated_ids: number[];
  full_ids: number[];
  layers: number;
  layers_requested: number;
  seconds_per_token: number;
  wall_seconds: number;
  mode: "incremental" | "recompute";
  peak_rss_bytes: number;
  expert_drops: number;
  expert_bytes_read: number;
  trunk_bytes_read: number;
  /** The generated ids decoded once, for text prompts; null for --ids runs. */
  generated_text: string | null;
}

export function resultsJson(results: RunResults): string {
  return `${JSON.stringify({ ...results, seconds_per_token: Number(results.seconds_per_token.toFixed(4)) })}\n`;
}

/** Writes `text` to `path` through a temporary file and a rename, so no half file is left. */
export function writeAtomically(path: string, data: string | Uint8Array, what: string): void {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, data);
    renameSync(temporary, path);
  } catch (error) {
    throw new K3Error(ExitCode.runtime, `${path}: cannot write ${what} (${(error as NodeJS.ErrnoException).code ?? "error"})`);
  }
}
