/**
 * The demo model's runs behind test/gates/demo.test.ts, done in a child process of the test so
 * that they use the ReleaseFast kernels dist/k3 embeds (the test process loads libk3-safe, whose
 * checks make these thousands of steps several times slower; the kernels' bits are the same).
 *
 *   bun test/support/demo-runs.ts OUT_DIR
 *
 * Reads test/fixtures/demo/expected.json and runs the engine in-process:
 * - resident, every case: the prompt fed in chunks of 64, then greedy steps one id at a time,
 *   as many as the torch model took (a chat reply stops at its stop id); the first and the last
 *   step's logits;
 * - streamed from a packed trunk (one ring slot, an expert cache of top-k + 1), every other case,
 *   its first STREAMED_IDS ids through the decode loop, with the first step's logits;
 * - speculative decode (--spec 4's loop), the other cases, their whole length.
 * Writes OUT_DIR/runs.json and the logits as raw float32 (resident-first.f32, resident-last.f32,
 * streamed-first.f32, speculative-first.f32), one row per case run, in case order.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { controlIds, stopIds } from "../../src/chat/specials.ts";
import { loadConfig } from "../../src/checkpoint/config.ts";
import { feed } from "../../src/decode/loop.ts";
import { argmax } from "../../src/decode/sampler.ts";
import { generate } from "../../src/engine/generate.ts";
import { openEngine, type Engine } from "../../src/engine/open.ts";
import { budgetRequest, type BudgetAction } from "../../src/plan/budget.ts";
import { loadTokenizer } from "../../src/tokenizer/index.ts";
import { gbToBytes } from "../../src/units.ts";
import { demoDir, readDemoExpectation, type DemoCase } from "./demo.ts";
import { packTrunkOf } from "./fixtures.ts";

export const STREAMED_IDS = 16;

export interface PathRuns {
  /** Indices into the fixture's cases. */
  cases: number[];
  ids: number[][];
  seconds: number;
  drafted?: number;
  accepted?: number;
}
export interface DemoRuns {
  resident: PathRuns;
  streamed: PathRuns;
  speculative: PathRuns;
}

function rows(list: Float32Array[]): Buffer {
  const out = new Float32Array(list.reduce((n, r) => n + r.length, 0));
  let at = 0;
  for (const r of list) {
    out.set(r, at);
    at += r.length;
  }
  return Buffer.from(out.buffer);
}

async function main(outDir: string): Promise<void> {
  const want = readDemoExpectation();
  const { config } = loadConfig(join(demoDir, "config.json"));
  const stops = stopIds(controlIds(loadTokenizer(demoDir)));
  const positions = Math.max(...want.cases.map((c) => c.prompt_ids.length + c.generated_ids.length)) + 8;
  const open = (budgets: BudgetAction[], trunkDir?: string, speculative?: number): Engine => openEngine({
    modelDir: demoDir, config, layerCount: config.numLayers, positions, prefillChunk: 64, budgets: budgetRequest(budgets), trunkDir,
    ...(speculative ? { speculative } : {}),
  });
  const stopsFor = (c: DemoCase) => (c.kind === "chat" ? stops : undefined);
  const all = want.cases.map((_, i) => i);

  // Resident: the engine's forward step by step, so the last step's logits can be kept too.
  const firsts: Float32Array[] = [];
  const lasts: Float32Array[] = [];
  let started = performance.now();
  const resident: PathRuns = { cases: all, ids: [], seconds: 0 };
  {
    using engine = open([{ kind: "cache", bytes: gbToBytes(1) }]);
    for (const c of want.cases) {
      const state = engine.model.newState();
      try {
        let logits = feed(engine.model, state, c.prompt_ids, 64);
        firsts.push(logits.slice());
        const ids: number[] = [];
        for (;;) {
          const id = argmax(logits);
          ids.push(id);
          if (ids.length === c.generated_ids.length || stopsFor(c)?.has(id)) break;
          logits = engine.model.run(state, [id]);
        }
        lasts.push(logits.slice());
        resident.ids.push(ids);
      } finally {
        engine.model.release(state);
      }
    }
  }
  resident.seconds = (performance.now() - started) / 1000;

  // Streamed: pack the trunk, then one ring slot and the smallest expert cache.
  const trunk = join(outDir, "packed");
  packTrunkOf(demoDir, trunk);
  const streamedFirst: Float32Array[] = [];
  started = performance.now();
  const streamed: PathRuns = { cases: all.filter((i) => i % 2 === 0), ids: [], seconds: 0 };
  {
    using engine = open([{ kind: "trunk", bytes: 0 }, { kind: "cache", bytes: 0 }], trunk);
    for (const i of streamed.cases) {
      const c = want.cases[i]!;
      const r = await generate(engine, c.prompt_ids, { maxNewTokens: Math.min(STREAMED_IDS, c.generated_ids.length), mode: "incremental", stopIds: stopsFor(c) },
        { onFirstLogits: (l) => streamedFirst.push(l.slice()) });
      streamed.ids.push(r.generatedIds);
    }
  }
  streamed.seconds = (performance.now() - started) / 1000;

  const specFirst: Float32Array[] = [];
  started = performance.now();
  const speculative: PathRuns = { cases: all.filter((i) => i % 2 === 1), ids: [], seconds: 0, drafted: 0, accepted: 0 };
  {
    using engine = open([{ kind: "cache", bytes: gbToBytes(1) }], undefined, 4);
    for (const i of speculative.cases) {
      const c = want.cases[i]!;
      const r = await generate(engine, c.prompt_ids, { maxNewTokens: c.generated_ids.length, mode: "incremental", stopIds: stopsFor(c), speculative: { maxDraft: 4 } },
        { onFirstLogits: (l) => specFirst.push(l.slice()) });
      speculative.ids.push(r.generatedIds);
      speculative.drafted! += r.speculation?.drafted ?? 0;
      speculative.accepted! += r.speculation?.accepted ?? 0;
    }
  }
  speculative.seconds = (performance.now() - started) / 1000;

  writeFileSync(join(outDir, "resident-first.f32"), rows(firsts));
  writeFileSync(join(outDir, "resident-last.f32"), rows(lasts));
  writeFileSync(join(outDir, "streamed-first.f32"), rows(streamedFirst));
  writeFileSync(join(outDir, "speculative-first.f32"), rows(specFirst));
  writeFileSync(join(outDir, "runs.json"), JSON.stringify({ resident, streamed, speculative } satisfies DemoRuns));
}

if (import.meta.main) await main(process.argv[2] ?? ".");
