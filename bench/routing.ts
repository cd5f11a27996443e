/**
 * Traffic with learned routing: the demo model (assets/demo, trained) next to the two random
 * fixtures (tiny13, nested14), each run through dist/k3 over held-out prompts with greedy decode:
 *
 * - the routing entropy of every MoE layer (bits; log2 of the expert count is a uniform choice),
 *   from `--dump-cache-trace`, prefill and decode together;
 * - the expert cache hit rate of LRU and of Belady (optimal) at 1/8, 1/4 and 1/2 of all routed
 *   experts, replayed by `k3 sim-cache --slots` on the traces of all prompts back to back (one
 *   cache serving request after request, as in `k3 serve`);
 * - the n-gram drafter's acceptance under `--spec 4` on each model's own greedy output.
 *
 *   bun run bench/routing.ts          (also part of `bun run bench`)
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { loadavg } from "node:os";
import { loadConfig } from "../src/checkpoint/config.ts";
import { prepareReplay, replayBelady, replayLru } from "../src/offline/cache-sim.ts";
import { readTraceFile } from "../src/weights/expert-trace.ts";
import { expectation, fixturesDir, modelDir } from "../test/support/fixtures.ts";
import { k3 } from "../test/support/k3.ts";
import { tempDir } from "../test/support/tmp.ts";
import { Figures, percent, type PartReport } from "./results.ts";

const root = resolve(import.meta.dir, "..");
const GEN = 48;

interface Source {
  name: string;
  dir: string;
  prompts: number[][];
}

export function routingSources(): Source[] {
  const demo = JSON.parse(readFileSync(join(fixturesDir, "demo", "expected.json"), "utf8")) as { cases: { prompt_ids: number[] }[] };
  const fixture = (name: string): Source => {
    const want = expectation(name);
    // The random fixtures' vocabularies are tiny; their oracle prompts and teacher-forced ids.
    return { name: `${name} (random weights)`, dir: modelDir(name), prompts: [want.prompt_ids, want.long.prompt_ids, want.tf.ids] };
  };
  return [{ name: "demo (trained)", dir: join(root, "assets", "demo"), prompts: demo.cases.map((c) => c.prompt_ids) }, fixture("tiny13"), fixture("nested14")];
}

/** dist/k3's stdout; any exit but 0 stops the bench. */
function k3Run(args: string[]): string {
  const r = k3(args);
  if (r.code !== 0) throw new Error(`k3 ${args.join(" ")} exited ${r.code}: ${r.stderr.slice(-400)}`);
  return r.stdout;
}

export interface RoutingFigures {
  name: string;
  experts: number;
  moeLayers: number;
  topK: number;
  requests: number;
  entropyBits: number[];
  uniformBits: number;
  cache: { slots: number; share: number; lru: number; belady: number }[];
  simCacheCommand: string;
  simCacheTable: string;
  spec: { sweeps: number; drafted: number; accepted: number; emitted: number; generated: number };
}

export function measureRouting(source: Source): RoutingFigures {
  const { config } = loadConfig(join(source.dir, "config.json"));
  const work = tempDir("routing");
  const pieces: Uint8Array[] = [];
  const spec = { sweeps: 0, drafted: 0, accepted: 0, emitted: 0, generated: 0 };
  source.prompts.forEach((ids, i) => {
    const traceDir = join(work, `trace-${i}`);
    mkdirSync(traceDir);
    k3Run([source.dir, "--ids", ids.join(","), "--gen", String(GEN), "--dump-cache-trace", traceDir, "--out", join(work, "plain.json")]);
    if (existsSync(join(traceDir, "expert_trace.bin"))) pieces.push(readFileSync(join(traceDir, "expert_trace.bin")));
    k3Run([source.dir, "--ids", ids.join(","), "--gen", String(GEN), "--spec", "4", "--out", join(work, "spec.json")]);
    const results = JSON.parse(readFileSync(join(work, "spec.json"), "utf8")) as { speculation: typeof spec; generated_ids: number[] };
    const plain = JSON.parse(readFileSync(join(work, "plain.json"), "utf8")) as { generated_ids: number[] };
    if (JSON.stringify(plain.generated_ids) !== JSON.stringify(results.generated_ids)) throw new Error(`${source.name}: --spec 4 changed the ids of prompt ${i}`);
    for (const key of ["sweeps", "drafted", "accepted", "emitted"] as const) spec[key] += results.speculation[key];
    spec.generated += results.generated_ids.length;
  });
  const all = join(work, "expert_trace.bin");
  writeFileSync(all, Buffer.concat(pieces));
  const trace = readTraceFile(all);
  const experts = config.numExperts;
  const moeLayers = config.numLayers - config.firstKDenseReplace;
  const counts = new Map<number, number[]>();
  for (let i = 0; i < trace.layers.length; i++) {
    const row = counts.get(trace.layers[i]!) ?? new Array<number>(experts).fill(0);
    row[trace.experts[i]!]! += 1;
    counts.set(trace.layers[i]!, row);
  }
  const entropyBits = [...counts.keys()].sort((a, b) => a - b).map((layer) => {
    const row = counts.get(layer)!;
    const total = row.reduce((s, n) => s + n, 0);
    return -row.reduce((h, n) => (n === 0 ? h : h + (n / total) * Math.log2(n / total)), 0);
  });
  const keys = new Float64Array(trace.layers.length);
  for (let i = 0; i < keys.length; i++) keys[i] = trace.layers[i]! * experts + trace.experts[i]!;
  const replay = prepareReplay(keys);
  const pool = experts * moeLayers;
  const shares = [1 / 8, 1 / 4, 1 / 2];
  const slots = shares.map((s) => Math.max(config.numExpertsPerToken + 1, Math.round(pool * s)));
  const rate = (o: { hits: number; misses: number }) => o.hits / (o.hits + o.misses);
  const cache = slots.map((n, i) => ({ slots: n, share: shares[i]!, lru: rate(replayLru(replay, n)), belady: rate(replayBelady(replay, n)) }));
  // One expert's bytes: w1, w3 [I, Λ] and w2 [Λ, I] in MXFP4, half a byte per weight and a scale byte per 32.
  const expertBytes = (3 * config.moeIntermediateSize * config.routedExpertHiddenSize * 17) / 32;
  const simArgs = ["sim-cache", all, "--slots", slots.join(","), "--expert-bytes", String(expertBytes), "--tokens", String(source.prompts.reduce((s, p) => s + p.length + GEN, 0))];
  const simCacheTable = k3Run(simArgs);
  return {
    name: source.name, experts, moeLayers, topK: config.numExpertsPerToken, requests: trace.layers.length, entropyBits,
    uniformBits: Math.log2(experts), cache, simCacheCommand: `k3 ${simArgs.join(" ")}`, simCacheTable, spec,
  };
}

export function routingReport(all: RoutingFigures[]): PartReport {
  const figures = new Figures("routing");
  const lines: string[] = [];
  for (const f of all) {
    const key = f.name.split(" ")[0] as string;
    const requests = figures.add(`${key}.requests`, `${f.name}: expert requests over the held-out prompts (prefill and decode)`, f.requests, "requests", "a count of the trace, not a rate");
    const mean = f.entropyBits.reduce((sum, h) => sum + h, 0) / f.entropyBits.length;
    const entropy = figures.add(`${key}.entropy`, `${f.name}: routing entropy per MoE layer, mean (samples: each layer)`, mean, "bits",
      { what: `a uniform choice of ${f.experts} experts`, value: f.uniformBits, unit: "bits" }, undefined, f.entropyBits);
    lines.push(`${f.name}: ${f.moeLayers} MoE layers x ${f.experts} experts, top-${f.topK}, ${requests.value} expert requests`);
    lines.push(`  routing entropy per MoE layer (bits, uniform = ${f.uniformBits.toFixed(2)}): ${f.entropyBits.map((h) => h.toFixed(2)).join(" ")}; mean ${entropy.value.toFixed(2)} (${percent(entropy)} of uniform)`);
    const sizes = f.cache.map((c) => {
      const part = `1/${Math.round(1 / c.share)}`;
      const name = `share${Math.round(1 / c.share)}`;
      const belady = figures.add(`${key}.belady.${name}`, `${f.name}: Belady hit rate, ${c.slots} slots (${part} of the routed experts)`, 100 * c.belady, "%",
        "the optimal replacement: the most any policy of this size hits; LRU is measured against it");
      const lru = figures.add(`${key}.lru.${name}`, `${f.name}: LRU hit rate, ${c.slots} slots (${part} of the routed experts)`, 100 * c.lru, "%",
        { what: "Belady (optimal) at the same size", value: belady.value, unit: "%" });
      return `${c.slots} slots (${part} of all): ${lru.value.toFixed(1)}% / ${belady.value.toFixed(1)}%`;
    });
    lines.push(`  cache hit rate, LRU / Belady: ${sizes.join("; ")}`);
    const s = f.spec;
    const accepted = figures.add(`${key}.spec.accepted`, `${f.name}: --spec 4 on its own greedy output, ids accepted of those drafted`, s.accepted, "ids",
      s.drafted > 0 ? { what: "ids drafted", value: s.drafted, unit: "ids" } : "nothing was drafted");
    const steps = figures.add(`${key}.spec.steps`, `${f.name}: --spec 4, forward steps for the ids emitted`, s.generated - s.emitted + s.sweeps, "steps",
      { what: "ids emitted (one step each without --spec)", value: s.generated, unit: "steps" });
    lines.push(`  --spec 4 on its own greedy output: ${s.sweeps} sweeps drafted ${s.drafted} ids, ${accepted.value} accepted (${s.drafted ? percent(accepted) : "-"}); ${s.generated} ids emitted in ${steps.value} forward steps`);
  }
  return { lines, figures: figures.list, failures: [] };
}

if (import.meta.main) {
  console.log(`routing: load average ${(loadavg()[0] ?? 0).toFixed(2)} before`);
  const figures = routingSources().map(measureRouting);
  for (const line of routingReport(figures).lines) console.log(line);
  for (const f of figures) console.log(`\n${f.simCacheCommand}\n${f.simCacheTable}`);
}
