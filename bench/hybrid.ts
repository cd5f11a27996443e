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

export function hybridReport(b: HybridBench): string {
  const s = b.hybrid.speculation;
  const h = b.hybrid.hybrid;
  const plain = decodeSecondsPerToken(b.plain);
  const hybrid = decodeSecondsPerToken(b.hybrid);
  return [
    `hybrid (K3-width, exact trunk streamed at 1.5 GB, ${cacheGb} GB expert cache; int8 draft ${b.draftDir}, default 6 GB draft budget; quantize-trunk ${b.quantizeSeconds.toFixed(1)} s):`,
    `  ${generation} tokens: plain ${plain.toFixed(3)} s/token, hybrid ${hybrid.toFixed(3)} s/token after step 0, replays included (${(plain / hybrid).toFixed(2)}x; ` +
      `load average ${b.plain.load.toFixed(2)} and ${b.hybrid.load.toFixed(2)} before); ` +
      `peak RSS ${(b.plain.peak_rss_bytes / 1e9).toFixed(2)} GB and ${(b.hybrid.peak_rss_bytes / 1e9).toFixed(2)} GB`,
    `  ${s ? `${s.sweeps} rounds, ${s.drafted} drafted, ${s.accepted} accepted (${s.drafted > 0 ? ((100 * s.accepted) / s.drafted).toFixed(1) : "0.0"}%), mean accepted run ${s.sweeps > 0 ? (s.accepted / s.sweeps).toFixed(2) : "0"}, ${s.replays} replayed` : "no speculation figures"}; ` +
      `${h ? `draft ${h.drafter.seconds.toFixed(1)} s over ${h.drafter.fed_ids} ids, routing ${h.experts.served}/${h.experts.picks} picks served from the cache, expert reads while drafting ${h.expert_reads_while_drafting}` : "no draft figures"}; ` +
      `ids ${b.identical ? "identical" : "FAIL: DIFFERENT"}`,
    ...b.failures.map((f) => `  FAIL: ${f}`),
  ].join("\n");
}

if (import.meta.main) {
  const result = await benchHybrid();
  console.log(hybridReport(result));
  if (result.failures.length > 0) process.exit(1);
}
