/**
 * The oracle gate's runs through dist/k3 (test/gates/oracle.test.ts): for each fixture model,
 * greedy decode of the reference prompt (20 ids; also --recompute and --incremental), the long
 * prompt in both modes, the step-0 logits of the logits prompt, and 3 ids with their logits at
 * the default settings and under every kernel variant this machine runs at 1, 2 and 3 threads.
 * A model's runs are made longest first, in turn with the other early work (early.ts inTurn);
 * once per test process, started by the preload when the gate is in the run (support/early.ts).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { availableIsas } from "./kernel-hooks.ts";
import { once, wanted } from "./early.ts";
import { expectation, modelDir } from "./fixtures.ts";
import { inParallel, k3Async } from "./k3-async.ts";
import { tempDir } from "./tmp.ts";

export interface GateRun {
  ids: number[];
  /** The --dump-logits file, for the runs that write one. */
  logits: Buffer | undefined;
}

export interface GateRuns {
  greedy: GateRun;
  recompute: GateRun;
  incremental: GateRun;
  long: GateRun;
  longRecompute: GateRun;
  logits: GateRun;
  /** 3 ids and their logits at the default settings, and under each variant and thread count. */
  reference: GateRun;
  variants: { isa: string; threads: string; run: GateRun }[];
}

interface Spec {
  ids: number[];
  gen: number;
  extra?: string[];
  env?: Record<string, string>;
  logits?: boolean;
}

async function run(model: string, spec: Spec): Promise<GateRun> {
  const dir = tempDir("gate");
  const out = join(dir, "run.json");
  const logits = join(dir, "logits.f32");
  const r = await k3Async(
    [modelDir(model), "--ids", spec.ids.join(","), "--gen", String(spec.gen), "--out", out, ...(spec.logits ? ["--dump-logits", logits] : []), ...(spec.extra ?? [])],
    { env: spec.env, inTurn: true },
  );
  if (r.code !== 0) throw new Error(`k3 exited ${r.code}: ${r.stderr}`);
  return { ids: JSON.parse(readFileSync(out, "utf8")).generated_ids as number[], logits: spec.logits ? readFileSync(logits) : undefined };
}

/** The runs for `model`, which the gate awaits. */
export function oracleRuns(model: string): Promise<GateRuns> {
  wanted();
  return startOracleRuns(model);
}

export function startOracleRuns(model: string): Promise<GateRuns> {
  return once(`oracle-runs:${model}`, async () => {
    const want = expectation(model);
    const variants = availableIsas().flatMap((isa) => ["1", "2", "3"].map((threads) => ({ isa, threads })));
    const specs: Record<string, Spec> = {
      longRecompute: { ids: want.long.prompt_ids, gen: 20, extra: ["--recompute"] },
      long: { ids: want.long.prompt_ids, gen: 20 },
      greedy: { ids: want.prompt_ids, gen: 20 },
      recompute: { ids: want.prompt_ids, gen: 20, extra: ["--recompute"] },
      incremental: { ids: want.prompt_ids, gen: 20, extra: ["--incremental"] },
      logits: { ids: want.logits_prompt_ids, gen: 1, logits: true },
      reference: { ids: want.prompt_ids, gen: 3, logits: true },
      ...Object.fromEntries(variants.map(({ isa, threads }) => [`${isa}/${threads}`, { ids: want.prompt_ids, gen: 3, logits: true, env: { K3_ISA: isa, K3_THREADS: threads } }])),
    };
    const keys = Object.keys(specs);
    const results = await inParallel(keys, 2, (key) => run(model, specs[key]!));
    const got = Object.fromEntries(keys.map((key, i) => [key, results[i]!])) as Record<string, GateRun>;
    return {
      greedy: got.greedy!, recompute: got.recompute!, incremental: got.incremental!, long: got.long!, longRecompute: got.longRecompute!,
      logits: got.logits!, reference: got.reference!,
      variants: variants.map(({ isa, threads }) => ({ isa, threads, run: got[`${isa}/${threads}`]! })),
    };
  });
}
