/**
 * Decode deep in a conversation on the K3-width checkpoint (issue 26): the resident decode step
 * after an 8,192-id prompt against the same decode after a 16-id prompt, in one bench run. The
 * fixture has one MLA layer in four, the released model's share (24 of 96), so the ratio is what
 * a long conversation costs the released model per token over a short one here.
 *
 * The 8,192-id prompt is prefilled once in chunks and kept as a state file beside the bench
 * checkpoint (about 25 minutes of prefill on 2 cores); later runs resume it with --load-state,
 * which is exact (bench/state.ts checks that). The file is rebuilt when the checkpoint is newer.
 *
 * Every expert fits the cache (--cache-gb 4), and both runs first feed the same 16-id prompt
 * (the long one after resuming the state), whose chunk loads nearly every expert; the steady step
 * is the median of the last steps, which then read no expert, so the two runs differ only by the
 * positions their attention reads. The two runs alternate three times and the faster of each is
 * compared (all rounds are printed).
 *
 * `bun run bench/long-context.ts` alone, or part of `bun run bench`.
 */
import { existsSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { loadavg } from "node:os";
import { executablePath } from "../tools/build.ts";
import { envValue } from "../src/env.ts";
import { benchIds, benchPaths, ensureExecutable, prepare, streamingSkipReason, type StreamingPaths } from "./streaming.ts";
import { Figures, times, verdict, type Figure, type PartReport } from "./results.ts";

export const longPromptIds = 8192;
const shortPromptIds = 16;
const prefillChunk = 256;
const cacheGb = 4;
const genTokens = 12;
/** Short and long runs alternate this many times. */
const rounds = 3;
/** Steps whose median is the steady step: the last ones, once each run has read its experts. */
const steadySteps = 6;
/** Issue 26: the decode step at 8,192 positions in at most this multiple of the short prompt's. */
const target = 1.3;

const progress = (line: string) => process.stderr.write(`[long-context] ${line}\n`);

interface RunJson {
  generated_ids: number[];
  steps: { seconds: number; experts: { requests: number; reads: number } }[];
  resumed_from: { prior_positions: number } | null;
}

export interface DecodeRun {
  label: string;
  positions: number;
  stepSeconds: number[];
  steadySeconds: number;
  /** Experts read from disk during the steady steps (0 when both runs are warm). */
  steadyReads: number;
  load: number;
}

export interface LongContextBench {
  statePath: string;
  /** Seconds the 8,192-id prefill took in this run; undefined when the state file was reused. */
  prefillSeconds: number | undefined;
  /** The faster round of each. */
  short: DecodeRun;
  long: DecodeRun;
  /** Every round's runs: [short ones, long ones]. */
  rounds: [DecodeRun[], DecodeRun[]];
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function k3(label: string, args: string[]): Promise<{ json: RunJson; load: number }> {
  const load = loadavg()[0] ?? 0;
  progress(`${label} (load average ${load.toFixed(2)})`);
  const child = Bun.spawn([executablePath, ...args, "--out", "-"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`${label}: dist/k3 exited ${code}: ${stderr.trimEnd().split("\n").slice(-5).join(" | ")}`);
  return { json: JSON.parse(stdout) as RunJson, load };
}

/** The state after the long prompt, made once per checkpoint (written under a temp name, then renamed). */
async function ensureLongState(paths: StreamingPaths): Promise<{ statePath: string; seconds: number | undefined }> {
  const statePath = `${paths.dir}-${longPromptIds}.state`;
  const checkpointTime = statSync(join(paths.dir, "config.json")).mtimeMs;
  if (existsSync(statePath) && statSync(statePath).mtimeMs > checkpointTime) return { statePath, seconds: undefined };
  const temp = `${statePath}.${process.pid}.tmp`;
  progress(`prefilling ${longPromptIds} ids in chunks of ${prefillChunk} once, kept in ${statePath} (about 25 minutes on 2 cores)`);
  const started = performance.now();
  try {
    await k3("long prefill", [paths.dir, "--ids", benchIds(longPromptIds).join(","), "--gen", "1", "--prefill-chunk", String(prefillChunk),
      "--cache-gb", String(cacheGb), "--save-state", temp]);
    renameSync(temp, statePath);
  } finally {
    rmSync(temp, { force: true });
  }
  return { statePath, seconds: (performance.now() - started) / 1000 };
}

function decodeRun(label: string, run: { json: RunJson; load: number }, positions: number): DecodeRun {
  // steps[0] feeds the short prompt (after the resumed state in the long run); the rest are one-token steps.
  const steps = run.json.steps.slice(1);
  if (steps.length < steadySteps) throw new Error(`${label}: ${steps.length} decode steps, fewer than the ${steadySteps} the median needs`);
  const steady = steps.slice(-steadySteps);
  return {
    label, positions, stepSeconds: steps.map((s) => s.seconds), steadySeconds: median(steady.map((s) => s.seconds)),
    steadyReads: steady.reduce((n, s) => n + s.experts.reads, 0), load: run.load,
  };
}

/** Why `bun run bench` leaves this part out, if it does: the streaming part's reasons, or K3_BENCH_SKIP_LONG=1. */
export function longContextSkipReason(): string | undefined {
  return streamingSkipReason() ?? (envValue("K3_BENCH_SKIP_LONG") === "1" ? "K3_BENCH_SKIP_LONG=1" : undefined);
}

export async function benchLongContext(paths = benchPaths()): Promise<LongContextBench> {
  await ensureExecutable();
  await prepare(paths);
  const { statePath, seconds: prefillSeconds } = await ensureLongState(paths);
  // Both runs feed the same short prompt first (after the long state in the second run): its
  // chunk loads nearly every expert, so the decode steps after it read none in either run.
  const common = [paths.dir, "--ids", benchIds(shortPromptIds).join(","), "--gen", String(genTokens), "--cache-gb", String(cacheGb)];
  // Alternated rounds, the faster of each kept: one process's steady step varies by 10-20% from
  // the next on this shared VM, more than the attention over 8,192 positions adds.
  const shorts: DecodeRun[] = [];
  const longs: DecodeRun[] = [];
  for (let round = 1; round <= rounds; round++) {
    shorts.push(decodeRun(`${shortPromptIds}-id prompt`, await k3(`round ${round}: decode after ${shortPromptIds} ids`, common), shortPromptIds));
    const resumed = await k3(`round ${round}: decode after ${longPromptIds} + ${shortPromptIds} ids (--load-state)`, [...common, "--load-state", statePath]);
    const priorPositions = resumed.json.resumed_from?.prior_positions;
    if (priorPositions === undefined || priorPositions < longPromptIds) {
      throw new Error(`the resumed run reports ${priorPositions ?? "no"} prior positions, expected at least ${longPromptIds}`);
    }
    longs.push(decodeRun(`${longPromptIds} + ${shortPromptIds} ids`, resumed, priorPositions + shortPromptIds));
  }
  const fastest = (runs: DecodeRun[]) => runs.reduce((a, b) => (b.steadySeconds < a.steadySeconds ? b : a));
  const short = fastest(shorts);
  const long = fastest(longs);
  return { statePath, prefillSeconds, short, long, rounds: [shorts, longs] };
}

export function longContextReport(b: LongContextBench): PartReport {
  const figures = new Figures("long-context");
  const short = figures.add("short.steady", `K3-width resident decode after a ${shortPromptIds}-id prompt: steady s/token, the faster of ${rounds} rounds (samples: every round)`,
    b.short.steadySeconds, "s/token", "the baseline the long prompt's step is measured against", undefined, b.rounds[0].map((r) => r.steadySeconds));
  const long = figures.add("long.steady", `K3-width resident decode after ${longPromptIds} + ${shortPromptIds} ids (1 MLA layer in 4): steady s/token, the faster of ${rounds} rounds (samples: every round)`,
    b.long.steadySeconds, "s/token", { what: `the decode step after ${shortPromptIds} ids, measured in the same part`, value: b.short.steadySeconds, unit: "s/token" },
    { max: target, source: "issue 26" }, b.rounds[1].map((r) => r.steadySeconds));
  const prefill = b.prefillSeconds === undefined ? undefined
    : figures.add("long.prefill", `prefilling the ${longPromptIds}-id state in chunks of ${prefillChunk}, once`, b.prefillSeconds, "s", "set-up time, kept as a state file for later runs");
  const row = (r: DecodeRun, f: Figure) =>
    `  ${r.label.padEnd(16)} from position ${String(r.positions).padStart(5)}: steady ${f.value.toFixed(3)} s/token ` +
    `(median of the last ${steadySteps} of ${r.stepSeconds.length} steps, ${r.steadyReads} experts read in them; load average ${r.load.toFixed(2)})`;
  const lines = [
    `long context: K3-width resident decode (1 MLA layer in 4, the released share), every expert cached (--cache-gb ${cacheGb})`,
    prefill === undefined
      ? `  the ${longPromptIds}-id state was reused from ${b.statePath}`
      : `  prefilled ${longPromptIds} ids in chunks of ${prefillChunk}: ${prefill.value.toFixed(0)} s (${(prefill.value / longPromptIds).toFixed(3)} s/id), kept in ${b.statePath}`,
    row(b.short, short),
    row(b.long, long),
    `  steady s/token of every round, short: ${(short.samples ?? []).map((x) => x.toFixed(3)).join(", ")}; long: ${(long.samples ?? []).map((x) => x.toFixed(3)).join(", ")} (the faster of each above)`,
    `  ${longPromptIds} positions over ${shortPromptIds}: ${times(long, 3)} (target at most ${target}x: ${verdict(long)})`,
  ];
  return { lines, figures: figures.list, failures: [] };
}

if (import.meta.main) for (const line of longContextReport(await benchLongContext()).lines) console.log(line);
