/**
 * `bun run bench`: every benchmark in one process, each printing its figures next to the limit
 * it is measured against, cheapest first:
 *
 *   1. index      safetensors headers of the released checkpoint (497,220 names, 96 shards)
 *   2. kernels    bf16 / MXFP4 matmul against this machine's memory read bandwidth (T = 1)
 *                 and f64 FMA peak (T > 1), and the f64 contract's ceiling on this CPU
 *                 (bench/ceiling.ts: the inner loops alone)
 *   3. tokenizer  k3's loader and encoder against tiktoken (skipped without the real table)
 *   3b. attention the latent MLA kernel at released widths over 1k-32k cached positions, and the
 *                 planned cache of the released config
 *   3c. routing   the demo model's learned routing next to the random fixtures': routing entropy,
 *                 LRU and Belady hit rates (k3 sim-cache), --spec 4 acceptance (bench/routing.ts;
 *                 a run whose --spec 4 ids differ from plain decode fails)
 *   3d. constraint a constrained reply's mask per id for three schemas, on the demo and the Kimi
 *                 vocabularies, against the demo model's decode step (bench/constraint.ts)
 *   4. streaming  dist/k3 on the K3-width checkpoint: resident vs streamed trunk, against the
 *                 disk's O_DIRECT bandwidth (skipped with K3_BENCH_SKIP_STREAMING=1, or when the
 *                 disk cannot hold the ~15 GB of checkpoint and pack)
 *   5. prefill    the same checkpoint: a 256-id prompt in chunks against one id at a time,
 *                 resident and streamed (skipped with the streaming part)
 *   5b. long context the same checkpoint, resident: the decode step after an 8,192-id prompt
 *                 (prefilled in chunks once and kept as a state file) against the step after a
 *                 16-id prompt (skipped with the streaming part or K3_BENCH_SKIP_LONG=1)
 *   6. speculative the same checkpoint, streamed: one verification sweep against serial steps,
 *                 and --spec 4 against plain decode (skipped with the streaming part)
 *   6b. state     the same checkpoint, streamed: a state file's size, save and restore times
 *                 against plain writes and reads of as many bytes, a resumed run against a cold one,
 *                 and --tf-check against a chunked prefill (skipped with the streaming part)
 *   7. ultra      the same checkpoint: peak RSS of --preset ultra against --preset laptop, and
 *                 the laptop budgets with --ultra-low-memory (skipped with the streaming part)
 *   8. hybrid     the same checkpoint, streamed: plain decode against hybrid decode with the
 *                 int8 draft trunk (skipped with the streaming part)
 *   9. batch      the same checkpoint: 4 prompts decoded together (--batch --parallel 4)
 *                 against one after another, streamed at 1.5 GB and resident (skipped with the
 *                 streaming part)
 *  10. compressed the same checkpoint packed with --compress: stored size, decode GB/s against
 *                 the disk, streamed s/token against the plain pack, the experts' entropy
 *                 (skipped with the streaming part)
 *
 * Figures go to stdout, progress to stderr. `--json FILE` (or `--out FILE`) also writes the run
 * as one JSON document (bench/results.ts: the machine's facts, every part's figures with their
 * limits, ratios and targets, the parts skipped and why, the failures) through a temporary file
 * and a rename; with FILE `-` the JSON goes to stdout and the text report to stderr. Exits 1 when
 * a benchmark found a correctness failure (ids differing across budgets, tokenizer output
 * differing from tiktoken, peak RSS over the memory plan, ultra's peak RSS not below the laptop's
 * by the tables, a draft that read an expert, a resumed run or --tf-check disagreeing with an
 * uninterrupted run, batched ids differing from one-at-a-time ids, a compressed pack's ids
 * differing from the plain one's) or a part stopped on an error; 2 on a usage error.
 */
import { readFileSync } from "node:fs";
import { arch, availableParallelism, cpus, loadavg, release, totalmem, type } from "node:os";
import { resolve } from "node:path";
import { environment, envValue, type EnvName } from "../src/env.ts";
import { K3Error } from "../src/errors.ts";
import { checkOutputFile, writeAtomically } from "../src/fs.ts";
import { initPool } from "../src/native/kernel-runtime.ts";
import { availableIsas, isaInUse } from "../test/support/kernel-hooks.ts";
import { attentionReport, benchAttention } from "./attention.ts";
import { batchReport, benchBatch } from "./batch.ts";
import { benchCompressed, compressedReport } from "./compressed.ts";
import { benchConstraint, constraintReport } from "./constraint.ts";
import { benchHybrid, hybridReport } from "./hybrid.ts";
import { benchIndex, indexReport } from "./index-headers.ts";
import { benchKernels, kernelCeiling, kernelReport } from "./kernels.ts";
import { benchLongContext, longContextReport, longContextSkipReason } from "./long-context.ts";
import { benchPrefill, prefillReport } from "./prefill.ts";
import { renderResults, resultsFormat, resultsVersion, type BenchResults, type MachineFacts, type PartReport, type PartResult } from "./results.ts";
import { measureRouting, routingReport, routingSources } from "./routing.ts";
import { benchSpeculative, speculativeReport } from "./speculative.ts";
import { benchState, stateReport } from "./state.ts";
import { benchStreaming, streamingReport, streamingSkipReason } from "./streaming.ts";
import { benchTokenizer, tokenizerReport, tokenizerSkipReason } from "./tokenizer.ts";
import { benchUltra, ultraReport } from "./ultra.ts";

const root = resolve(import.meta.dir, "..");
const usage = "usage: bun run bench [--json FILE | --out FILE], FILE - for stdout (the text report then goes to stderr)";

/** Where the JSON goes (and the flag that named it), or nothing; a refusal is one line and exit 2. */
function parseBenchArgs(argv: readonly string[]): { out: string; flag: string } | undefined | "help" {
  let chosen: { out: string; flag: string } | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (arg === "-h" || arg === "--help") return "help";
    const eq = arg.match(/^(--json|--out)=(.*)$/);
    const flag = eq ? (eq[1] as string) : arg;
    if (flag !== "--json" && flag !== "--out") {
      throw new K3Error(2, arg.startsWith("-") ? `unknown flag ${arg}` : `unexpected argument ${JSON.stringify(arg)} (the parts run alone as bun run bench/<part>.ts)`);
    }
    const value = eq ? eq[2] : argv[i + 1];
    if (!eq) i++;
    if (value === undefined || value === "" || (value.startsWith("-") && value !== "-")) throw new K3Error(2, `${flag} needs a FILE (- for stdout)`);
    if (chosen) throw new K3Error(2, `${flag} ${value}: the results already go to ${chosen.flag} ${chosen.out}`);
    chosen = { out: value, flag };
  }
  return chosen;
}

let target: { out: string; flag: string } | undefined;
try {
  const parsed = parseBenchArgs(process.argv.slice(2));
  if (parsed === "help") {
    console.log(usage);
    process.exit(0);
  }
  target = parsed;
  if (target) checkOutputFile(target.out, target.flag);
} catch (error) {
  if (!(error instanceof K3Error)) throw error;
  process.stderr.write(`bench: ${error.message} (${usage})\n`);
  process.exit(error.exitCode);
}

/** The text report: stdout, or stderr when stdout carries the JSON. */
const say: (line: string) => void = target?.out === "-" ? (line) => process.stderr.write(`${line}\n`) : (line) => process.stdout.write(`${line}\n`);
const load = () => loadavg()[0] ?? 0;

function cpuModel(): string {
  try {
    const name = readFileSync("/proc/cpuinfo", "utf8").match(/^model name\s*:\s*(.+)$/m)?.[1]?.trim();
    if (name) return name;
  } catch {
    // not Linux: what Node reports
  }
  return cpus()[0]?.model.trim() || "unknown CPU";
}

function memTotalBytes(): number {
  try {
    const kb = readFileSync("/proc/meminfo", "utf8").match(/^MemTotal:\s*(\d+) kB$/m)?.[1];
    if (kb) return Number(kb) * 1024;
  } catch {
    // not Linux
  }
  return totalmem();
}

/** The commit checked out and whether tracked files differ from it; nulls outside a git work tree. */
function gitState(): { commit: string | null; dirty: boolean | null } {
  const git = (args: string[]) => Bun.spawnSync(["git", ...args], { cwd: root, stdout: "pipe", stderr: "ignore" });
  const head = git(["rev-parse", "HEAD"]);
  if (head.exitCode !== 0) return { commit: null, dirty: null };
  const status = git(["status", "--porcelain", "--untracked-files=no"]);
  return { commit: head.stdout.toString().trim(), dirty: status.exitCode === 0 ? status.stdout.toString().trim().length > 0 : null };
}

const date = new Date().toISOString();
const startLoad = loadavg();
const machine: MachineFacts = {
  cpu: cpuModel(),
  logical_cores: availableParallelism(),
  mem_total_bytes: memTotalBytes(),
  kernel_variant: isaInUse(),
  kernel_variants: availableIsas(),
  compute_threads: initPool(),
  load_average: startLoad.map((l) => Number(l.toFixed(2))),
  os: `${type()} ${release()} ${arch()}`,
  disk_probes: [],
  bench_env: Object.fromEntries(
    (Object.keys(environment) as EnvName[]).filter((name) => environment[name].audience === "bench").map((name) => [name, envValue(name) ?? null]),
  ),
};

say(
  `k3 bench: ${machine.cpu}, ${machine.logical_cores} CPUs, ${(machine.mem_total_bytes / 1e9).toFixed(1)} GB RAM; kernel variant ${machine.kernel_variant}; ` +
    `Bun ${Bun.version}; load average ${load().toFixed(2)} at start`,
);

interface Part {
  name: string;
  /** Why the part does not run here, if it does not. */
  skip?: () => string | undefined;
  /** Print the load average before the part's own lines. */
  showLoad?: boolean;
  run: () => PartReport | Promise<PartReport>;
}

const parts: Part[] = [
  { name: "index", run: () => indexReport(benchIndex()) },
  { name: "kernels", showLoad: true, run: () => kernelReport(benchKernels(), kernelCeiling(), "  ") },
  { name: "tokenizer", skip: tokenizerSkipReason, run: () => tokenizerReport(benchTokenizer()!) },
  { name: "attention", run: () => attentionReport(benchAttention()) },
  { name: "routing", showLoad: true, run: () => routingReport(routingSources().map(measureRouting)) },
  { name: "constraint", run: async () => constraintReport(await benchConstraint()) },
  { name: "streaming", skip: streamingSkipReason, showLoad: true, run: async () => streamingReport(await benchStreaming()) },
  { name: "prefill", skip: streamingSkipReason, run: async () => prefillReport(await benchPrefill()) },
  { name: "long-context", skip: longContextSkipReason, run: async () => longContextReport(await benchLongContext()) },
  { name: "speculative", skip: streamingSkipReason, run: async () => speculativeReport(await benchSpeculative()) },
  { name: "state", skip: streamingSkipReason, run: async () => stateReport(await benchState()) },
  { name: "ultra", skip: streamingSkipReason, run: async () => ultraReport(await benchUltra()) },
  { name: "hybrid", skip: streamingSkipReason, run: async () => hybridReport(await benchHybrid()) },
  { name: "batch", skip: streamingSkipReason, run: async () => batchReport(await benchBatch()) },
  { name: "compressed", skip: streamingSkipReason, run: async () => compressedReport(await benchCompressed()) },
];

async function runPart(part: Part): Promise<PartResult> {
  process.stderr.write(`[bench] ${part.name} ...\n`);
  const loadBefore = load();
  const started = performance.now();
  const result: PartResult = { name: part.name, seconds: 0, load_before: Number(loadBefore.toFixed(2)), skipped: null, error: null, figures: [], failures: [] };
  const skip = part.skip?.();
  if (skip !== undefined) {
    result.skipped = skip;
    say(`${part.name}: skipped (${skip})`);
  } else {
    try {
      if (part.showLoad) say(`${part.name}: load average ${loadBefore.toFixed(2)} before`);
      const report = await part.run();
      for (const line of report.lines) say(line);
      result.figures = report.figures;
      result.failures = report.failures;
      for (const probe of report.disk ?? []) machine.disk_probes.push({ part: part.name, ...probe });
    } catch (error) {
      const e = error as Error;
      result.error = (e.message ?? String(error)).split("\n")[0] as string;
      result.failures = [...result.failures, `stopped on an error: ${result.error}`];
      say(`${part.name}: ERROR ${e.stack ?? String(error)}`);
    }
  }
  result.seconds = Number(((performance.now() - started) / 1000).toFixed(1));
  process.stderr.write(`[bench] ${part.name} took ${result.seconds.toFixed(1)} s\n`);
  return result;
}

const results: PartResult[] = [];
for (const part of parts) results.push(await runPart(part));

say(`took: ${results.map((r) => `${r.name} ${r.seconds.toFixed(1)} s`).join(", ")}; total ${results.reduce((a, r) => a + r.seconds, 0).toFixed(1)} s`);
const failures = results.flatMap((r) => r.failures.map((what) => ({ part: r.name, what })));
if (target) {
  const { commit, dirty } = gitState();
  const doc: BenchResults = {
    format: resultsFormat, version: resultsVersion, date, commit, commit_dirty: dirty, bun: Bun.version, machine, parts: results,
    failed: failures.length > 0, failures,
  };
  const text = renderResults(doc);
  try {
    if (target.out === "-") process.stdout.write(text);
    else writeAtomically(target.out, text, "bench results", target.flag);
  } catch (error) {
    if (!(error instanceof K3Error)) throw error;
    process.stderr.write(`bench: ${error.message}\n`);
    process.exit(error.exitCode);
  }
  if (target.out !== "-") process.stderr.write(`[bench] results written to ${target.out}\n`);
}
if (failures.length > 0) {
  say("bench: FAILED (see the FAIL lines above)");
  process.exit(1);
}
