/**
 * The JSON results file (runtime.md 7.5): the whole RunResult on one line, keys in snake_case
 * (the file's convention since the original engine), `seconds_per_token` to 4 dp.
 */
import type { RunResult } from "../engine/result.ts";

const snakeCase = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

/** Deep copy with snake_case keys; an absent value is written as null so every key is there. */
function snakeKeys(value: unknown): unknown {
  if (value === undefined) return null;
  if (Array.isArray(value)) return value.map(snakeKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [snakeCase(k), snakeKeys(v)]));
}

export function resultJson(result: RunResult): string {
  const rounded = { ...result, secondsPerToken: Number(result.secondsPerToken.toFixed(4)) };
  return `${JSON.stringify(snakeKeys(rounded))}\n`;
}
