/** The demo model shipped in assets/demo and its torch-made fixture (test/fixtures/demo). */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fixturesDir } from "./fixtures.ts";

export const demoDir = resolve(import.meta.dir, "../../assets/demo");
export const demoFixtureDir = join(fixturesDir, "demo");

export interface DemoCase {
  kind: "text" | "chat";
  index: number;
  /** The text prompt (text cases) or the chat-completions request body (chat cases). */
  text?: string;
  request?: unknown;
  prompt_ids: number[];
  generated_ids: number[];
  top2_gaps: number[];
  /** Ids to compare: up to the first near-tie (see tools/train-demo/make_fixtures.py). */
  compare_steps: number;
  max_abs_logit: number;
}

export interface DemoExpectation {
  text_gen: number;
  reply_gen: number;
  vocab: number;
  tolerance: { rel: number };
  logits_files: { first: string; last: string; shape: [number, number] };
  cases: DemoCase[];
}

export function readDemoExpectation(): DemoExpectation {
  return JSON.parse(readFileSync(join(demoFixtureDir, "expected.json"), "utf8")) as DemoExpectation;
}
