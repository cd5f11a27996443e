/**
 * The demo model (assets/demo, trained by tools/train-demo) against a third implementation: the
 * torch model of tools/train-demo, which produced test/fixtures/demo with make_fixtures.py on the
 * exported files. For every held-out prompt (24 text prompts, 24 rendered chat requests): the
 * greedy ids resident, streamed from a packed trunk with one ring slot and a minimal expert cache,
 * and with `--spec 4`'s speculative decode, and the logits of the first and the last step within
 * the model.md 8.5 budget. Ids are compared up to the first step whose top-2 gap is too close to
 * call between two implementations (`compare_steps`; make_fixtures.py reports how many are cut).
 *
 * In-process: one engine per path serves every prompt.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../src/checkpoint/config.ts";
import { indexCheckpoint } from "../../src/checkpoint/safetensors.ts";
import { feed } from "../../src/decode/loop.ts";
import { generate } from "../../src/engine/generate.ts";
import { openEngine, type Engine } from "../../src/engine/open.ts";
import type { BudgetAction } from "../../src/plan/budget.ts";
import { gbToBytes } from "../../src/units.ts";
import { TensorReader } from "../../src/weights/tensor-reader.ts";
import { packTrunk } from "../../src/weights/trunk-pack.ts";
import { fixturesDir, readF32 } from "../support/fixtures.ts";
import { tempDir } from "../support/tmp.ts";

import { demoDir } from "../support/demo.ts";

interface DemoCase {
  kind: "text" | "chat";
  index: number;
  prompt_ids: number[];
  generated_ids: number[];
  top2_gaps: number[];
  compare_steps: number;
  max_abs_logit: number;
}
interface DemoExpectation {
  gen: number;
  vocab: number;
  tolerance: { rel: number };
  logits_files: { first: string; last: string; shape: [number, number] };
  cases: DemoCase[];
}

const want = JSON.parse(readFileSync(join(fixturesDir, "demo", "expected.json"), "utf8")) as DemoExpectation;
const firstLogits = readF32(join(fixturesDir, "demo", want.logits_files.first));
const lastLogits = readF32(join(fixturesDir, "demo", want.logits_files.last));
const positions = Math.max(...want.cases.map((c) => c.prompt_ids.length)) + want.gen + 8;

function open(budgets: BudgetAction[], trunkDir?: string, speculative?: number): Engine {
  const { config } = loadConfig(join(demoDir, "config.json"));
  return openEngine({
    modelDir: demoDir, config, layerCount: config.numLayers, positions, prefillChunk: 64, budgets, trunkDir,
    ...(speculative ? { speculative } : {}),
  });
}

/** max |got - want| against the 8.5 budget for one row of a logits file. */
function within(got: Float32Array, file: Float32Array, row: number): { diff: number; budget: number } {
  const v = want.vocab;
  let diff = 0;
  let top = 0;
  for (let i = 0; i < v; i++) {
    const ref = file[row * v + i] as number;
    diff = Math.max(diff, Math.abs((got[i] as number) - ref));
    top = Math.max(top, Math.abs(ref));
  }
  return { diff, budget: want.tolerance.rel * top };
}

test("the fixture covers at least 20 held-out prompts of each kind, and compares most of their steps", () => {
  for (const kind of ["text", "chat"] as const) expect(want.cases.filter((c) => c.kind === kind).length).toBeGreaterThanOrEqual(20);
  const compared = want.cases.reduce((n, c) => n + c.compare_steps, 0);
  expect(compared / (want.cases.length * want.gen)).toBeGreaterThan(0.9);
});

const paths: { name: string; make: (trunk: string) => Engine; spec?: number }[] = [
  { name: "resident trunk, every expert cached", make: () => open([{ kind: "cache", bytes: gbToBytes(1) }]) },
  { name: "streamed: one ring slot, an expert cache of top-k + 1", make: (trunk) => open([{ kind: "trunk", bytes: 0 }, { kind: "cache", bytes: 0 }], trunk) },
  { name: "speculative decode, up to 4 drafted ids per sweep", make: () => open([{ kind: "cache", bytes: gbToBytes(1) }], undefined, 4), spec: 4 },
];

describe("demo model: k3 = torch on held-out prompts", () => {
  let trunk = "";
  beforeAll(() => {
    trunk = join(tempDir("demo-trunk"), "packed");
    const { config } = loadConfig(join(demoDir, "config.json"));
    const index = indexCheckpoint(demoDir);
    const reader = new TensorReader(index);
    try {
      packTrunk(index, reader, config, config.numLayers, trunk, { force: false, onProgress: () => {} });
    } finally {
      reader.close();
    }
  });

  for (const path of paths) {
    test(`${path.name}: greedy ids and first-step logits`, () => {
      using engine = path.make(trunk);
      let worst = 0;
      let drafted = 0;
      const mismatches: string[] = [];
      want.cases.forEach((c, row) => {
        let first: Float32Array | undefined;
        const result = generate(engine, c.prompt_ids, { maxNewTokens: want.gen, mode: "incremental", ...(path.spec ? { speculative: { maxDraft: path.spec } } : {}) },
          { onFirstLogits: (l) => { first = l.slice(); } });
        drafted += result.speculation?.drafted ?? 0;
        const got = result.generatedIds.slice(0, c.compare_steps);
        if (JSON.stringify(got) !== JSON.stringify(c.generated_ids.slice(0, c.compare_steps))) mismatches.push(`${c.kind} ${c.index}: ${got} vs ${c.generated_ids}`);
        const { diff, budget } = within(first!, firstLogits, row);
        worst = Math.max(worst, diff / budget);
      });
      console.log(`demo, ${path.name}: worst first-step logits at ${(worst * 100).toFixed(1)}% of the 8.5 budget${path.spec ? `, ${drafted} ids drafted` : ""}`);
      expect(mismatches).toEqual([]);
      expect(worst).toBeLessThanOrEqual(1);
      if (path.spec) expect(drafted).toBeGreaterThan(0);
    }, 120_000);
  }

  test("the logits of the last step (prompt and 23 generated ids fed) are within the budget", () => {
    using engine = open([{ kind: "cache", bytes: gbToBytes(1) }]);
    let worst = 0;
    want.cases.forEach((c, row) => {
      const state = engine.model.newState();
      try {
        const logits = feed(engine.model, state, [...c.prompt_ids, ...c.generated_ids.slice(0, want.gen - 1)], 64);
        const { diff, budget } = within(logits, lastLogits, row);
        worst = Math.max(worst, diff / budget);
      } finally {
        engine.model.release(state);
      }
    });
    console.log(`demo: worst last-step logits at ${(worst * 100).toFixed(1)}% of the 8.5 budget`);
    expect(worst).toBeLessThanOrEqual(1);
  }, 60_000);
});
