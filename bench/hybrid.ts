/**
 * Hybrid decode on the K3-width checkpoint (issue 13): the exact model streamed at the 1.5 GB
 * budget (one ring slot), with and without the int8 draft trunk `k3 quantize-trunk` makes of its
 * packed trunk (the draft at its default 6 GB budget, so the whole int8 trunk is pinned), over
 * the same generation. Reported as measured: both runs' s/token after step 0, the rounds and
 * acceptance, the draft's cache-only routing, and the expert reads issued while drafting (which
 * must be zero), with the ids compared (they must be equal).
 *
 * `bun run bench/hybrid.ts` alone, or part of `bun run bench`.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { executablePath } from "../tools/build.ts";
import { benchIds, benchPaths, ensureExecutable, prepare, runStreamedK3, type StreamingPaths } from "./streaming.ts";
import { Figures, percent, type PartReport } from "./results.ts";

const progress = (line: string) => process.stderr.write(`[hybrid] ${line}\n`);
const cacheGb = 2;
const generation = 16;

interface RunJson {
  generated_ids: number[];
  steps: { seconds: number }[];
  peak_rss_bytes: number;
  speculation: { sweeps: number; drafted: number; accepted: number; emitted: number; replays: number } | null;
  /** 1-minute load average just before the run (the machine is shared); set by the bench. */
  load: number;
  hybrid: {
    drafter: { fed_ids: number; restores: number; seconds: number };
    experts: { picks: number; served: number; skipped: number; shared_only: number };
    expert_reads_while_drafting: number;
    trunk_stats: { reads: number; bytes_read: number };
  } | null;
}

async function run(paths: StreamingPaths, label: string, args: string[]): Promise<RunJson> {
  const r = await runStreamedK3(paths, label, args, { trunkGb: 1.5, cacheGb }, progress);
  return { ...(JSON.parse(r.stdout) as RunJson), load: r.load };
}

/** The int8 draft trunk beside the packed trunk; quantize-trunk is a no-op when it is already there. */
export async function prepareDraft(paths: StreamingPaths): Promise<{ dir: string; seconds: number }> {
  const dir = `${paths.dir}-int8`;
  progress(`${existsSync(join(dir, "trunk.json")) ? "checking" : "writing"} the int8 draft trunk ${dir}`);
  const started = performance.now();
  const child = Bun.spawn([executablePath, "quantize-trunk", paths.trunkDir, dir, "--force"], { stdin: "ignore", stdout: "inherit", stderr: "inherit" });
  if ((await child.exited) !== 0) throw new Error("k3 quantize-trunk failed");
  return { dir, seconds: (performance.now() - started) / 1000 };
}

export interface HybridBench {
  draftDir: string;
  quantizeSeconds: number;
  plain: RunJson;
  hybrid: RunJson;
  identical: boolean;
  failures: string[];
}

export async function benchHybrid(paths = benchPaths()): Promise<HybridBench> {
  await ensureExecutable();
  await prepare(paths);
  const draft = await prepareDraft(paths);
  const prompt = benchIds(8, 29).join(",");
  const plain = await run(paths, `plain decode, ${generation} tokens`, ["--ids", prompt, "--gen", String(generation)]);
  const hybrid = await run(paths, `hybrid decode (int8 draft), ${generation} tokens`, ["--ids", prompt, "--gen", String(generation), "--draft-trunk", draft.dir]);
  const identical = JSON.stringify(plain.generated_ids) === JSON.stringify(hybrid.generated_ids);
  const failures: string[] = [];
  if (!identical) failures.push(`ids differ: plain [${plain.generated_ids.join(",")}] hybrid [${hybrid.generated_ids.join(",")}]`);
  const reads = hybrid.hybrid?.expert_reads_while_drafting;
  if (reads !== 0) failures.push(`the draft issued ${reads ?? "an unknown number of"} expert reads (cache-only routing must read none)`);
  return { draftDir: draft.dir, quantizeSeconds: draft.seconds, plain, hybrid, identical, failures };
}

/** Steady-state seconds per token: every step but step 0 (the prefill). */
const decodeSecondsPerToken = (r: RunJson) => r.steps.slice(1).reduce((a, s) => a + s.seconds, 0) / Math.max(1, r.steps.length - 1);

export function hybridReport(b: HybridBench): PartReport {
  const figures = new Figures("hybrid");
  const s = b.hybrid.speculation;
  const h = b.hybrid.hybrid;
  const plain = figures.add("plain.s_per_token", `K3-width, ${generation} tokens, exact trunk streamed at 1.5 GB, plain decode: s/token after step 0`, decodeSecondsPerToken(b.plain), "s/token",
    "the baseline hybrid decode is measured against");
  const hybrid = figures.add("hybrid.s_per_token", `K3-width, ${generation} tokens, hybrid decode with the int8 draft trunk: s/token after step 0, replays included`, decodeSecondsPerToken(b.hybrid), "s/token",
    { what: "plain decode of the same prompt", value: plain.value, unit: "s/token" });
  const plainPeak = figures.add("plain.peak_rss", "K3-width, plain decode: peak RSS", b.plain.peak_rss_bytes / 1e9, "GB", "the baseline hybrid's peak sits beside");
  const hybridPeak = figures.add("hybrid.peak_rss", "K3-width, hybrid decode: peak RSS (the int8 draft pinned)", b.hybrid.peak_rss_bytes / 1e9, "GB",
    { what: "plain decode's peak RSS", value: plainPeak.value, unit: "GB" });
  const accepted = s ? figures.add("hybrid.accepted", "K3-width, hybrid decode: ids accepted of those the int8 draft proposed", s.accepted, "ids",
    s.drafted > 0 ? { what: "ids drafted", value: s.drafted, unit: "ids" } : "nothing was drafted") : undefined;
  const served = h ? figures.add("hybrid.draft_routing", "K3-width, hybrid decode: the draft's expert picks served from the cache", h.experts.served, "picks",
    h.experts.picks > 0 ? { what: "the draft's expert picks", value: h.experts.picks, unit: "picks" } : "the draft picked no expert") : undefined;
  const reads = h ? figures.add("hybrid.draft_reads", "K3-width, hybrid decode: expert reads issued while drafting (must be 0)", h.expert_reads_while_drafting, "reads",
    "a check (cache-only routing reads none), not a rate") : undefined;
  const faster = hybrid.ratio ? (1 / hybrid.ratio).toFixed(2) : "-";
  const lines = [
    `hybrid (K3-width, exact trunk streamed at 1.5 GB, ${cacheGb} GB expert cache; int8 draft ${b.draftDir}, default 6 GB draft budget; quantize-trunk ${b.quantizeSeconds.toFixed(1)} s):`,
    `  ${generation} tokens: plain ${plain.value.toFixed(3)} s/token, hybrid ${hybrid.value.toFixed(3)} s/token after step 0, replays included (${faster}x; ` +
      `load average ${b.plain.load.toFixed(2)} and ${b.hybrid.load.toFixed(2)} before); ` +
      `peak RSS ${plainPeak.value.toFixed(2)} GB and ${hybridPeak.value.toFixed(2)} GB`,
    `  ${s ? `${s.sweeps} rounds, ${s.drafted} drafted, ${s.accepted} accepted (${s.drafted > 0 && accepted ? percent(accepted, 1) : "0.0%"}), mean accepted run ${s.sweeps > 0 ? (s.accepted / s.sweeps).toFixed(2) : "0"}, ${s.replays} replayed` : "no speculation figures"}; ` +
      `${h && served && reads ? `draft ${h.drafter.seconds.toFixed(1)} s over ${h.drafter.fed_ids} ids, routing ${served.value}/${h.experts.picks} picks served from the cache, expert reads while drafting ${reads.value}` : "no draft figures"}; ` +
      `ids ${b.identical ? "identical" : "FAIL: DIFFERENT"}`,
    ...b.failures.map((f) => `  FAIL: ${f}`),
  ];
  return { lines, figures: figures.list, failures: b.failures };
}

if (import.meta.main) {
  const report = hybridReport(await benchHybrid());
  for (const line of report.lines) console.log(line);
  if (report.failures.length > 0) process.exit(1);
}
