/**
 * State files and the teacher-forced check on the K3-width checkpoint at the 1.5 GB streamed
 * budget (issue 13), each run a child process of dist/k3:
 *
 *   1. one uninterrupted run over a 248-id prompt for 8 tokens (the reference);
 *   2. the same prompt for 4 tokens with --save-state: the file's size and the save time, set
 *      against a plain buffered write of as many bytes beside it (the save does not fsync either);
 *   3. --load-state of that file for 4 more tokens: the restore time, set against a plain
 *      buffered read of the file (where a resume in the same session reads it from) and an
 *      O_DIRECT read of it (a resume after the page cache lost it), and the resumed run's first
 *      step against a cold run over the same 252 ids (what the state file saves);
 *   4. --tf-check over the reference's whole sequence: seconds per position against the
 *      reference's chunked prefill, per prompt position.
 *
 * Correctness, a failure exits 1 as in the other benches: the saved and resumed runs' ids are the
 * uninterrupted run's, the cold run over the same context gives the resumed run's ids, and the
 * teacher-forced check agrees with every id greedy decode emitted (the prediction after each
 * prefix is that step's argmax).
 *
 * `bun run bench/state.ts` alone, or part of `bun run bench`.
 */
import { closeSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { DirectFile, readCapacity } from "../src/native/file.ts";
import { NativeBuffer } from "../src/native/memory.ts";
import { benchIds, benchPaths, ensureExecutable, prepare, runStreamedK3, type StreamingPaths } from "./streaming.ts";
import { Figures, times, type PartReport } from "./results.ts";

const progress = (line: string) => process.stderr.write(`[state] ${line}\n`);
const cacheGb = 2;
const trunkGb = 1.5;
/** With the 8 tokens of the uninterrupted run, 256 ids: the check's 255 positions take as many prefill chunks (4 of 64) as the prompt. */
const promptLength = 248;
const savedTokens = 4;
const resumedTokens = 4;

interface RunJson {
  generated_ids: number[];
  full_ids: number[];
  steps: { seconds: number }[];
  plan: { prefill_chunk: number };
  resumed_from: { prior_positions: number; prior_ids: number; bytes: number; seconds: number } | null;
  saved_state: { positions: number; bytes: number; seconds: number } | null;
}

interface TfCheck {
  positions: number;
  matches: number;
  seconds: number;
  /** Positions whose prediction differed from the next id. */
  mismatches: number[];
}

/** The 1-minute load average before each run of this bench (the machine is shared). */
const loads: number[] = [];

async function spawnK3(paths: StreamingPaths, label: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const r = await runStreamedK3(paths, label, args, { trunkGb, cacheGb }, progress);
  loads.push(r.load);
  return r;
}

const run = async (paths: StreamingPaths, label: string, args: string[]) => JSON.parse((await spawnK3(paths, label, args)).stdout) as RunJson;

/** The check's stderr lines (runtime.md 9.4): the agreement with its seconds, then the mismatches. */
export function parseTfCheck(stderr: string): TfCheck {
  const head = stderr.match(/teacher-forced agreement: (\d+)\/(\d+) positions \([\d.]+%\) in ([\d.]+) s/);
  if (!head) throw new Error(`--tf-check printed no agreement line:\n${stderr.slice(-2000)}`);
  const list = stderr.match(/per-position \(p=predicted a=actual\): (.*)/)?.[1] ?? "";
  const mismatches = [...list.matchAll(/\[(\d+) p=\d+ a=\d+\]/g)].map((m) => Number(m[1]));
  return { matches: Number(head[1]), positions: Number(head[2]), seconds: Number(head[3]), mismatches };
}

/** Limits are the best of a few tries: the filesystem's times for a 20 MB file vary by several times between calls. */
const limitTries = 3;
const best = (f: (i: number) => number) => Math.min(...Array.from({ length: limitTries }, (_, i) => f(i)));

/** Seconds of a plain buffered write of `bytes` to a temporary file in `dir`, renamed to a new name, as the save does. */
function plainWriteSeconds(dir: string, bytes: number): number {
  const data = new Uint8Array(bytes).fill(7);
  return best((i) => {
    const temporary = join(dir, `plain-${i}.tmp`);
    const started = performance.now();
    const fd = openSync(temporary, "w");
    for (let at = 0; at < bytes;) at += writeSync(fd, data, at, bytes - at);
    closeSync(fd);
    renameSync(temporary, join(dir, `plain-${i}.bin`));
    return (performance.now() - started) / 1000;
  });
}

/** Seconds of a plain buffered read of the whole file (from the page cache when it is there). */
function plainReadSeconds(path: string): number {
  return best(() => {
    const started = performance.now();
    readFileSync(path);
    return (performance.now() - started) / 1000;
  });
}

/** Seconds of one O_DIRECT read of the whole file (the page cache bypassed), and whether O_DIRECT was granted. */
function directReadSeconds(path: string): { seconds: number; direct: boolean } {
  const bytes = statSync(path).size;
  const file = new DirectFile(path);
  const buffer = NativeBuffer.allocate(readCapacity(bytes), "state file O_DIRECT probe");
  try {
    const seconds = best(() => {
      const started = performance.now();
      file.submit(0, bytes, buffer).wait();
      return (performance.now() - started) / 1000;
    });
    return { seconds, direct: file.direct };
  } finally {
    buffer.free();
    file.close();
  }
}

export interface StateBench {
  prompt: number;
  whole: RunJson;
  saved: RunJson;
  resumed: RunJson;
  /** A fresh run over the resumed run's context (the saved run's ids): what resuming replaces. */
  cold: RunJson;
  fileBytes: number;
  plainWrite: number;
  plainRead: number;
  direct: { seconds: number; direct: boolean };
  tf: TfCheck;
  tfIds: number;
  loads: number[];
  failures: string[];
}

export async function benchState(paths = benchPaths()): Promise<StateBench> {
  await ensureExecutable();
  await prepare(paths);
  loads.length = 0;
  const prompt = benchIds(promptLength, 41).join(",");
  // Beside the checkpoint: on its disk, never tmpfs (O_DIRECT) and never the repository.
  const dir = mkdtempSync(join(dirname(paths.dir), "k3-bench-state-"));
  const file = join(dir, "bench.k3st");
  try {
    const whole = await run(paths, `uninterrupted: ${promptLength} ids, ${savedTokens + resumedTokens} tokens`, ["--ids", prompt, "--gen", String(savedTokens + resumedTokens)]);
    const saved = await run(paths, `${savedTokens} tokens, --save-state`, ["--ids", prompt, "--gen", String(savedTokens), "--save-state", file]);
    const fileBytes = statSync(file).size;
    // Limits, measured beside the file: a cold O_DIRECT read first (before a buffered read brings it into the cache).
    const direct = directReadSeconds(file);
    const plainRead = plainReadSeconds(file);
    const plainWrite = plainWriteSeconds(dir, fileBytes);
    const resumed = await run(paths, `--load-state, ${resumedTokens} more tokens`, ["--load-state", file, "--gen", String(resumedTokens)]);
    const cold = await run(paths, `cold over the same ${saved.full_ids.length} ids, ${resumedTokens} tokens`, ["--ids", saved.full_ids.join(","), "--gen", String(resumedTokens)]);
    const tfCheck = await spawnK3(paths, `--tf-check over the ${whole.full_ids.length} ids of the uninterrupted run`, ["--ids", whole.full_ids.join(","), "--tf-check"]);
    const tf = parseTfCheck(tfCheck.stderr);

    const failures: string[] = [];
    const same = (a: readonly number[], b: readonly number[]) => JSON.stringify(a) === JSON.stringify(b);
    if (!same(saved.generated_ids, whole.generated_ids.slice(0, savedTokens))) failures.push(`the saved run's ids [${saved.generated_ids}] are not the uninterrupted run's first ${savedTokens} [${whole.generated_ids}]`);
    if (!same(resumed.generated_ids, whole.generated_ids.slice(savedTokens))) failures.push(`the resumed ids [${resumed.generated_ids}] are not the uninterrupted run's last ${resumedTokens} [${whole.generated_ids}]`);
    if (!same(resumed.full_ids, whole.full_ids)) failures.push("the resumed run's full_ids differ from the uninterrupted run's");
    if (!same(cold.generated_ids, resumed.generated_ids)) failures.push(`a cold run over the same context gave [${cold.generated_ids}], the resumed run [${resumed.generated_ids}]`);
    if (saved.saved_state?.bytes !== fileBytes) failures.push(`saved_state.bytes ${saved.saved_state?.bytes} is not the file's ${fileBytes}`);
    if (resumed.resumed_from?.bytes !== fileBytes) failures.push(`resumed_from.bytes ${resumed.resumed_from?.bytes} is not the file's ${fileBytes}`);
    // Every generated id is the argmax after its prefix: the check must agree at each of them.
    const firstGenerated = promptLength - 1;
    const spoiled = tf.mismatches.filter((i) => i >= firstGenerated);
    if (spoiled.length > 0) failures.push(`--tf-check disagrees with greedy decode at generated positions ${spoiled.join(", ")}`);
    if (tf.positions !== whole.full_ids.length - 1) failures.push(`--tf-check compared ${tf.positions} positions, expected ${whole.full_ids.length - 1}`);
    return { prompt: promptLength, whole, saved, resumed, cold, fileBytes, plainWrite, plainRead, direct, tf, tfIds: whole.full_ids.length, loads: [...loads], failures };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const ms = (seconds: number) => `${(seconds * 1000).toFixed(1)} ms`;
const rate = (bytes: number, seconds: number) => `${(bytes / 1e9 / seconds).toFixed(2)} GB/s`;

export function stateReport(b: StateBench): PartReport {
  const figures = new Figures("state");
  const save = b.saved.saved_state;
  const restore = b.resumed.resumed_from;
  const chunk = b.whole.plan.prefill_chunk;
  const size = figures.add("file", `K3-width state file after ${b.prompt} + ${savedTokens} ids`, b.fileBytes / 1e6, "MB", "the file's size, not a rate");
  const plainWrite = { what: `a plain buffered write of as many bytes, best of ${limitTries}`, value: b.plainWrite * 1000, unit: "ms" };
  const plainRead = { what: `a plain buffered read of the file, best of ${limitTries}`, value: b.plainRead * 1000, unit: "ms" };
  const saved = save ? figures.add("save", "--save-state: the save", save.seconds * 1000, "ms", plainWrite) : undefined;
  const restored = restore ? figures.add("restore", "--load-state: the restore", restore.seconds * 1000, "ms", plainRead) : undefined;
  const direct = figures.add("direct_read", `an O_DIRECT read of the state file, best of ${limitTries}${b.direct.direct ? "" : " (buffered: O_DIRECT refused)"}`, b.direct.seconds * 1000, "ms",
    "a limit: what a resume after the page cache lost the file would read at");
  const firstStep = figures.add("resumed.first_step", `the resumed run's first step (the pending id) against a cold run's first step over the same ${b.saved.full_ids.length} ids`,
    b.resumed.steps[0]?.seconds ?? 0, "s", { what: "the cold run's first step", value: b.cold.steps[0]?.seconds ?? NaN, unit: "s" });
  const wholeRuns = figures.add("resumed.steps", `the resumed run's steps for ${resumedTokens} tokens against the cold run's`, b.resumed.steps.reduce((a, x) => a + x.seconds, 0), "s",
    { what: "the cold run's steps", value: b.cold.steps.reduce((a, x) => a + x.seconds, 0), unit: "s" });
  const prefill = b.whole.steps[0]?.seconds ?? 0;
  const tf = figures.add("tf_check", `--tf-check over ${b.tfIds} ids: seconds per position against the chunked prefill's seconds per prompt id`, b.tf.seconds / b.tf.positions, "s/position",
    { what: `the uninterrupted run's prefill of ${b.prompt} ids, per id`, value: prefill / b.prompt, unit: "s/position" });
  const agree = figures.add("tf_check.agree", "--tf-check: positions whose prediction is the next id", b.tf.matches, "positions", { what: "positions checked", value: b.tf.positions, unit: "positions" });
  const out = [
    `state files and --tf-check (K3-width, ${trunkGb} GB streamed trunk, ${cacheGb} GB expert cache, ${b.prompt}-id prompt; ` +
      `load average ${b.loads.map((l) => l.toFixed(2)).join(", ")} before the ${b.loads.length} runs):`,
    save && restore && saved && restored
      ? `  state file ${size.value.toFixed(2)} MB (${save.positions} positions): saved in ${ms(save.seconds)} (${rate(b.fileBytes, save.seconds)}; a plain buffered write of as many bytes, best of ${limitTries}, ${ms(b.plainWrite)}: ` +
        `${times(saved)}), restored in ${ms(restore.seconds)} (${rate(b.fileBytes, restore.seconds)}; a plain buffered read of the file ${ms(b.plainRead)}: ` +
        `${times(restored)}; an O_DIRECT read of it ${direct.value.toFixed(1)} ms, ${rate(b.fileBytes, b.direct.seconds)}${b.direct.direct ? "" : " [buffered: O_DIRECT refused]"})`
      : "  FAIL: the runs reported no saved or restored state",
    `  resumed run's first step (the pending id) ${firstStep.value.toFixed(2)} s against a cold run's first step over the same ${b.saved.full_ids.length} ids ${(firstStep.limit?.value ?? NaN).toFixed(2)} s ` +
      `(${firstStep.ratio ? (1 / firstStep.ratio).toFixed(1) : "-"}x); whole runs ${wholeRuns.value.toFixed(2)} s against ${(wholeRuns.limit?.value ?? NaN).toFixed(2)} s of steps for ${resumedTokens} tokens; ` +
      `ids ${b.failures.length === 0 ? "identical to the uninterrupted run" : "see FAIL"}`,
    `  --tf-check over ${b.tfIds} ids: ${agree.value}/${b.tf.positions} agree, ${b.tf.seconds.toFixed(2)} s in ${Math.ceil(b.tf.positions / chunk)} chunks ` +
      `(${tf.value.toFixed(4)} s per position) against the uninterrupted run's prefill of ${b.prompt} ids in ${Math.ceil(b.prompt / chunk)} chunks of up to ${chunk}, ` +
      `${prefill.toFixed(2)} s (${(prefill / b.prompt).toFixed(4)} s per prompt id): ${times(tf)}`,
    ...b.failures.map((f) => `  FAIL: ${f}`),
  ];
  return {
    lines: out, figures: figures.list, failures: b.failures,
    disk: [{ what: "one O_DIRECT read of the state file, best of 3 (state)", value: b.fileBytes / 1e9 / b.direct.seconds, unit: "GB/s", direct: b.direct.direct }],
  };
}

if (import.meta.main) {
  const report = stateReport(await benchState());
  for (const line of report.lines) console.log(line);
  if (report.failures.length > 0) process.exit(1);
}
