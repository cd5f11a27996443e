/**
 * Chunked prefill on the K3-width checkpoint (issue 10): a 256-id prompt fed in chunks of 64
 * against the same prompt fed one id at a time, resident and at the 1.5 GB streamed budget. Per
 * prompt id: seconds, trunk bytes and expert bytes read, and the union statistics (picks against
 * distinct expert loads). Fed one at a time, every id reads the whole streamed trunk, so the
 * one-at-a-time runs feed only the prompt's first 32 ids and report the same per-id figures.
 *
 * `bun run bench/prefill.ts` alone, or part of `bun run bench`; progress on stderr, figures on stdout.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { initPool } from "../src/native/kernel-runtime.ts";
import { executablePath } from "../tools/build.ts";
import { measureFmaPeak } from "./kernels.ts";
import { benchIds, benchPaths, ensureExecutable, prepare, slug, type StreamingPaths } from "./streaming.ts";
import { Figures, percent, times, verdict, type PartReport } from "./results.ts";

const promptLength = 256;
const oneAtATimeLength = 32;
const chunk = 64;
const cacheGb = 2;
/** Issue 10: at the streamed budget, chunked prefill per id in at most this share of one-at-a-time. */
const streamedTarget = 1 / 8;

const progress = (line: string) => process.stderr.write(`[prefill] ${line}\n`);

interface PrefillRun {
  label: string;
  ids: number;
  chunk: number;
  secondsPerId: number;
  trunkBytesPerId: number;
  expertBytesPerId: number;
  picks: number;
  loads: number;
  /** Trunk payload (bf16 weights and the norms beside them), from the run's plan. */
  trunkPayloadBytes: number;
}

interface Step0 {
  seconds: number;
  experts: { picks: number; requests: number; bytes_read: number };
}

async function run(paths: StreamingPaths, label: string, ids: number, chunkIds: number, extra: string[]): Promise<PrefillRun> {
  const args = [paths.dir, "--ids", benchIds(ids).join(","), "--gen", "1", "--prefill-chunk", String(chunkIds), "--cache-gb", String(cacheGb), ...extra, "--out", "-"];
  progress(`${label}: ${ids} ids in chunks of ${chunkIds}`);
  const child = Bun.spawn([executablePath, ...args], { stdin: "ignore", stdout: "pipe", stderr: "ignore" });
  const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  if (code !== 0) throw new Error(`${label}: dist/k3 exited ${code}`);
  const result = JSON.parse(stdout) as { steps: Step0[]; trunk_stats: { bytes_read: number } | null; plan: { trunk_payload_bytes: number } };
  const step = result.steps[0] as Step0;
  // Resident: the trunk was read once at load, not by the prefill; streamed: by the prefill and the one decode step.
  const trunkBytes = result.trunk_stats ? result.trunk_stats.bytes_read : 0;
  return {
    label, ids, chunk: chunkIds, secondsPerId: step.seconds / ids, trunkBytesPerId: trunkBytes / ids,
    expertBytesPerId: step.experts.bytes_read / ids, picks: step.experts.picks, loads: step.experts.requests,
    trunkPayloadBytes: result.plan.trunk_payload_bytes,
  };
}

export interface PrefillBench {
  /** Resident chunked, resident one at a time, streamed chunked, streamed one at a time. */
  runs: PrefillRun[];
  floor: PrefillFloor;
}

/**
 * The compute floor of a prompt id: one multiply-add per trunk weight (every matrix of the
 * trunk is applied to every id; norms are a rounding error) and per weight of each routed
 * expert the id picks, at the f64 FMA peak measured in this run. Attention over a prompt this
 * short is under 1% of it and the one LM-head row is left out.
 */
export interface PrefillFloor {
  flopsPerId: number;
  peakGflops: number;
  secondsPerId: number;
  /** Issue 26: K3-width chunked prefill, resident, at most this many seconds per id. */
  target: number;
}

function prefillFloor(paths: StreamingPaths, chunked: PrefillRun, peakGflops: number): PrefillFloor {
  const text = (JSON.parse(readFileSync(join(paths.dir, "config.json"), "utf8")) as { text_config: Record<string, number> }).text_config;
  const expertWeights = 3 * (text.routed_expert_hidden_size ?? 0) * (text.moe_intermediate_size ?? 0);
  const trunkWeights = chunked.trunkPayloadBytes / 2;
  const flopsPerId = 2 * (trunkWeights + (chunked.picks / chunked.ids) * expertWeights);
  return { flopsPerId, peakGflops, secondsPerId: flopsPerId / (peakGflops * 1e9), target: 0.1 };
}

export async function benchPrefill(paths = benchPaths()): Promise<PrefillBench> {
  await ensureExecutable();
  await prepare(paths);
  const streamed = ["--trunk", paths.trunkDir, "--trunk-gb", "1.5"];
  const runs = [
    await run(paths, "resident, chunked", promptLength, chunk, []),
    await run(paths, "resident, one at a time", oneAtATimeLength, 1, []),
    await run(paths, "1.5 GB streamed, chunked", promptLength, chunk, streamed),
    await run(paths, "1.5 GB streamed, one at a time", oneAtATimeLength, 1, streamed),
  ];
  initPool();
  const peak = measureFmaPeak().gflops; // after the runs, with no child competing for the cores
  return { runs, floor: prefillFloor(paths, runs[0]!, peak) };
}

export function prefillReport(b: PrefillBench): PartReport {
  const figures = new Figures("prefill");
  const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
  const resident = b.runs[0]!;
  const rows = b.runs.map((r) => {
    const name = slug(r.label);
    const perId = figures.add(`${name}.s_per_id`, `K3-width prefill, ${r.label}, ${r.ids} ids in chunks of ${r.chunk}: seconds per prompt id`, r.secondsPerId, "s/id",
      "the chunked / one-at-a-time ratios and the FMA floor are figures of their own");
    const trunk = figures.add(`${name}.trunk_read`, `the same, trunk read per id`, r.trunkBytesPerId / 1e6, "MB/id", "bytes read, not a rate");
    const experts = figures.add(`${name}.experts_read`, `the same, expert bytes read per id`, r.expertBytesPerId / 1e6, "MB/id", "bytes read, not a rate");
    const loads = figures.add(`${name}.loads`, `the same, distinct expert loads for the picks`, r.loads, "loads", { what: "expert picks", value: r.picks, unit: "loads" });
    return `  ${r.label.padEnd(32)}${perId.value.toFixed(4).padStart(9)}${mb(1e6 * trunk.value).padStart(13)}${mb(1e6 * experts.value).padStart(14)}${String(r.picks).padStart(8)}${String(loads.value).padStart(8)}`;
  });
  const chunkedOver = (i: number, j: number, where: string, target?: { max: number; source: string }) => figures.add(`${where}.chunked_over_single`,
    `K3-width prefill, ${b.runs[i]!.label}: seconds per id against one id at a time`, b.runs[i]!.secondsPerId, "s/id",
    { what: `${b.runs[j]!.label} (the first ${oneAtATimeLength} ids)`, value: b.runs[j]!.secondsPerId, unit: "s/id" }, target);
  const residentRatio = chunkedOver(0, 1, "resident");
  const streamedRatio = chunkedOver(2, 3, "streamed_1.5", { max: streamedTarget, source: "issue 10" });
  const peak = figures.add("fma", "f64 FMA peak, all threads, after the runs", b.floor.peakGflops, "GFLOP/s", "a limit measured in this part: the floor is set by it");
  const floor = figures.add("resident_chunked.floor", `K3-width prefill, resident, chunked: seconds per id against its FMA floor (${(b.floor.flopsPerId / 1e9).toFixed(2)} GFLOP an id)`,
    resident.secondsPerId, "s/id", { what: "the FMA floor of an id at the f64 peak measured in this part", value: b.floor.secondsPerId, unit: "s/id" },
    { max: b.floor.target / b.floor.secondsPerId, source: `issue 26 (at most ${b.floor.target} s/id)` });
  const lines = [
    `prefill: K3-width, --cache-gb ${cacheGb}; chunked = ${promptLength} ids in chunks of ${chunk}, one at a time = the first ${oneAtATimeLength} ids`,
    `  ${"run".padEnd(32)}${"s/id".padStart(9)}${"trunk MB/id".padStart(13)}${"expert MB/id".padStart(14)}${"picks".padStart(8)}${"loads".padStart(8)}`,
    ...rows,
    `  chunked / one at a time, seconds per id: resident ${percent(residentRatio, 1)}, ` +
      `1.5 GB streamed ${percent(streamedRatio, 1)} (target at most ${(100 * streamedTarget).toFixed(1)}%: ${verdict(streamedRatio)})`,
    `  FMA floor: ${(b.floor.flopsPerId / 1e9).toFixed(2)} GFLOP per id at the ${peak.value.toFixed(1)} GFLOP/s f64 peak measured now = ` +
      `${b.floor.secondsPerId.toFixed(4)} s/id; resident chunked ${times(floor)} the floor ` +
      `(${(100 / (floor.ratio ?? NaN)).toFixed(0)}% of the peak; target at most ${b.floor.target} s/id: ` +
      `${verdict(floor)}, which is ${(b.floor.target / b.floor.secondsPerId).toFixed(2)}x the floor)`,
  ];
  return { lines, figures: figures.list, failures: [] };
}

if (import.meta.main) for (const line of prefillReport(await benchPrefill()).lines) console.log(line);
