/**
 * The demo model's runs behind test/gates/demo.test.ts, done in child processes of the test so
 * that they use the ReleaseFast kernels dist/k3 embeds (the test process loads libk3-safe, whose
 * checks make these thousands of steps several times slower; the kernels' bits are the same).
 * One process per path, the resident cases split over two, so the test runs the four side by side:
 *
 *   bun test/support/demo-runs.ts OUT_DIR resident|streamed|speculative [PART/PARTS]
 *
 * Reads test/fixtures/demo/expected.json and runs the engine in-process:
 * - resident, every case: the prompt fed in chunks of 64, then greedy steps one id at a time,
 *   as many as the torch model took (a chat reply stops at its stop id); the first and the last
 *   step's logits;
 * - streamed from a packed trunk (one ring slot, an expert cache of top-k + 1), every other case,
 *   its first STREAMED_IDS ids through the decode loop, with the first step's logits;
 * - speculative decode (--spec 4's loop), the other cases, their whole length.
 * PART/PARTS (e.g. 1/2) runs the path's cases whose index is PART modulo PARTS. Writes
 * OUT_DIR/JOB.json (its PathRuns; JOB is the path, with -PART when split) and the logits as raw
 * float32 (JOB-first.f32, and JOB-last.f32 for resident), one row per case run, in case order.
 */
import { readFileSync, writeFileSync } from "node:fs";
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
import { inTurn, once, wanted } from "./early.ts";
import { packTrunkOf } from "./fixtures.ts";
import { tempDir } from "./tmp.ts";

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
export interface DemoJob {
  path: keyof DemoRuns;
  part?: { index: number; of: number };
}
/** The child processes the gate runs at once: resident is the longest, so it is split in two. */
export const demoJobs: readonly DemoJob[] = [
  { path: "resident", part: { index: 0, of: 2 } }, { path: "resident", part: { index: 1, of: 2 } }, { path: "streamed" }, { path: "speculative" },
];
export const jobName = (job: DemoJob): string => (job.part ? `${job.path}-${job.part.index}` : job.path);
export const jobArgs = (job: DemoJob): string[] => [job.path, ...(job.part ? [`${job.part.index}/${job.part.of}`] : [])];

/**
 * The demo gate's runs: the four jobs, in turn with the other early work (early.ts inTurn), with
 * the ReleaseFast kernels (the child processes do not load libk3-safe); each path's parts then
 * joined, cases and logits rows in the same order (OUT/PATH-first.f32, OUT/resident-last.f32); a path's time is the sum of its parts'.
 * Once per test process: the preload starts it early when the gate is in the run (early.ts);
 * the gate awaits demoRuns().
 */
export function demoRuns(): Promise<{ runs: DemoRuns; out: string }> {
  wanted();
  return startDemoRuns();
}

export function startDemoRuns(): Promise<{ runs: DemoRuns; out: string }> {
  return once("demo-runs", async () => {
    const out = tempDir("demo-runs");
    const env: Record<string, string | undefined> = { ...process.env, K3_SAFE_NATIVE: undefined };
    await Promise.all(demoJobs.map((job) => inTurn(async () => {
      const child = Bun.spawn([process.execPath, import.meta.path, out, ...jobArgs(job)], { env, stdout: "ignore", stderr: "pipe" });
      const [stderr, code] = await Promise.all([new Response(child.stderr).text(), child.exited]);
      if (code !== 0) throw new Error(`demo-runs ${jobArgs(job).join(" ")} exited ${code}: ${stderr.slice(-2000)}`);
    })));
    const joined = (path: keyof DemoRuns): PathRuns => {
      const jobs = demoJobs.filter((job) => job.path === path);
      const parts = jobs.map((job) => JSON.parse(readFileSync(join(out, `${jobName(job)}.json`), "utf8")) as PathRuns);
      for (const suffix of ["first", ...(path === "resident" ? ["last"] : [])]) {
        writeFileSync(join(out, `${path}-${suffix}.f32`), Buffer.concat(jobs.map((job) => readFileSync(join(out, `${jobName(job)}-${suffix}.f32`)))));
      }
      const sum = (key: "drafted" | "accepted") => (parts.some((p) => p[key] !== undefined) ? parts.reduce((n, p) => n + (p[key] ?? 0), 0) : undefined);
      return {
        cases: parts.flatMap((p) => p.cases), ids: parts.flatMap((p) => p.ids), seconds: parts.reduce((n, p) => n + p.seconds, 0),
        ...(sum("drafted") === undefined ? {} : { drafted: sum("drafted"), accepted: sum("accepted") }),
      };
    };
    return { runs: { resident: joined("resident"), streamed: joined("streamed"), speculative: joined("speculative") }, out };
  });
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

async function main(outDir: string, job: DemoJob): Promise<void> {
  const { path, part } = job;
  const name = jobName(job);
  const mine = (i: number) => part === undefined || i % part.of === part.index;
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
  if (path === "resident") {
    const firsts: Float32Array[] = [];
    const lasts: Float32Array[] = [];
    const started = performance.now();
    const resident: PathRuns = { cases: all.filter(mine), ids: [], seconds: 0 };
    using engine = open([{ kind: "cache", bytes: gbToBytes(1) }]);
    for (const c of resident.cases.map((i) => want.cases[i]!)) {
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
    resident.seconds = (performance.now() - started) / 1000;
    writeFileSync(join(outDir, `${name}-first.f32`), rows(firsts));
    writeFileSync(join(outDir, `${name}-last.f32`), rows(lasts));
    writeFileSync(join(outDir, `${name}.json`), JSON.stringify(resident));
  }

  // Streamed: pack the trunk, then one ring slot and the smallest expert cache.
  if (path === "streamed") {
    const trunk = join(outDir, `${name}-packed`);
    packTrunkOf(demoDir, trunk);
    const streamedFirst: Float32Array[] = [];
    const started = performance.now();
    const streamed: PathRuns = { cases: all.filter((i) => i % 2 === 0 && mine(i)), ids: [], seconds: 0 };
    using engine = open([{ kind: "trunk", bytes: 0 }, { kind: "cache", bytes: 0 }], trunk);
    for (const i of streamed.cases) {
      const c = want.cases[i]!;
      const r = await generate(engine, c.prompt_ids, { maxNewTokens: Math.min(STREAMED_IDS, c.generated_ids.length), mode: "incremental", stopIds: stopsFor(c) },
        { onFirstLogits: (l) => streamedFirst.push(l.slice()) });
      streamed.ids.push(r.generatedIds);
    }
    streamed.seconds = (performance.now() - started) / 1000;
    writeFileSync(join(outDir, `${name}-first.f32`), rows(streamedFirst));
    writeFileSync(join(outDir, `${name}.json`), JSON.stringify(streamed));
  }

  if (path === "speculative") {
    const specFirst: Float32Array[] = [];
    const started = performance.now();
    const speculative: PathRuns = { cases: all.filter((i) => i % 2 === 1 && mine(i)), ids: [], seconds: 0, drafted: 0, accepted: 0 };
    using engine = open([{ kind: "cache", bytes: gbToBytes(1) }], undefined, 4);
    for (const i of speculative.cases) {
      const c = want.cases[i]!;
      const r = await generate(engine, c.prompt_ids, { maxNewTokens: c.generated_ids.length, mode: "incremental", stopIds: stopsFor(c), speculative: { maxDraft: 4 } },
        { onFirstLogits: (l) => specFirst.push(l.slice()) });
      speculative.ids.push(r.generatedIds);
      speculative.drafted! += r.speculation?.drafted ?? 0;
      speculative.accepted! += r.speculation?.accepted ?? 0;
    }
    speculative.seconds = (performance.now() - started) / 1000;
    writeFileSync(join(outDir, `${name}-first.f32`), rows(specFirst));
    writeFileSync(join(outDir, `${name}.json`), JSON.stringify(speculative));
  }
}

if (import.meta.main) {
  const [outDir, path, share] = process.argv.slice(2);
  if (!outDir || !["resident", "streamed", "speculative"].includes(path ?? "")) throw new Error("usage: demo-runs.ts OUT_DIR resident|streamed|speculative [PART/PARTS]");
  const [index, of] = (share ?? "").split("/").map(Number);
  await main(outDir, { path: path as keyof DemoRuns, ...(share ? { part: { index: index!, of: of! } } : {}) });
}
