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
import { benchIds, benchPaths, ensureExecutable, prepare, type StreamingPaths } from "./streaming.ts";

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
  runs: PrefillRun[];
  /** Chunked over one-at-a-time seconds per id, at the streamed budget. */
  streamedRatio: number;
  residentRatio: number;
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
  const ratio = (a: PrefillRun, b: PrefillRun) => a.secondsPerId / b.secondsPerId;
  initPool();
  const peak = measureFmaPeak().gflops; // after the runs, with no child competing for the cores
  return { runs, residentRatio: ratio(runs[0]!, runs[1]!), streamedRatio: ratio(runs[2]!, runs[3]!), floor: prefillFloor(paths, runs[0]!, peak) };
}

export function prefillReport(b: PrefillBench): string {
  const mb = (bytes: number) => (bytes / 1e6).toFixed(1);
  const resident = b.runs[0]!;
  const lines = [
    `prefill: K3-width, --cache-gb ${cacheGb}; chunked = ${promptLength} ids in chunks of ${chunk}, one at a time = the first ${oneAtATimeLength} ids`,
    `  ${"run".padEnd(32)}${"s/id".padStart(9)}${"trunk MB/id".padStart(13)}${"expert MB/id".padStart(14)}${"picks".padStart(8)}${"loads".padStart(8)}`,
    ...b.runs.map((r) => `  ${r.label.padEnd(32)}${r.secondsPerId.toFixed(4).padStart(9)}${mb(r.trunkBytesPerId).padStart(13)}${mb(r.expertBytesPerId).padStart(14)}${String(r.picks).padStart(8)}${String(r.loads).padStart(8)}`),
    `  chunked / one at a time, seconds per id: resident ${(100 * b.residentRatio).toFixed(1)}%, ` +
      `1.5 GB streamed ${(100 * b.streamedRatio).toFixed(1)}% (target at most ${(100 * streamedTarget).toFixed(1)}%: ${b.streamedRatio <= streamedTarget ? "met" : "NOT met"})`,
    `  FMA floor: ${(b.floor.flopsPerId / 1e9).toFixed(2)} GFLOP per id at the ${b.floor.peakGflops.toFixed(1)} GFLOP/s f64 peak measured now = ` +
      `${b.floor.secondsPerId.toFixed(4)} s/id; resident chunked ${(resident.secondsPerId / b.floor.secondsPerId).toFixed(2)}x the floor ` +
      `(${(100 * b.floor.secondsPerId / resident.secondsPerId).toFixed(0)}% of the peak; target at most ${b.floor.target} s/id: ` +
      `${resident.secondsPerId <= b.floor.target ? "met" : "NOT met"}, which is ${(b.floor.target / b.floor.secondsPerId).toFixed(2)}x the floor)`,
  ];
  return lines.join("\n");
}

if (import.meta.main) console.log(prefillReport(await benchPrefill()));
