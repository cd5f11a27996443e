/**
 * The fuzz harness: mutation-based, deterministic, judged by k3's contract for bad input.
 *
 * A target is one parser: the valid inputs it starts from, how an input is mutated, how it is
 * parsed in process and how dist/k3 is run on it. Two speeds:
 * - in process: the parser called directly; an input must give a valid result or a K3Error
 *   (exit 1 or 2, one line, short), never an exception of another kind, and never be slow.
 * - binary: dist/k3 run on the input; it must exit 1 or 2 with one line naming the file (no
 *   stack trace, no internal error, nothing on stdout), or exit 0 with the unmutated input's
 *   output when the input means the same; never crash or hang.
 */
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { K3Error } from "../../src/errors.ts";
import { executablePath } from "../../tools/build.ts";
import { inputRng, type Rng } from "./mutate.ts";

/** A valid input mutations start from. */
export interface Seed {
  readonly label: string;
  readonly bytes: Uint8Array;
}

/** How dist/k3 is run on one input, and what its refusal must name (one of them). */
export interface BinaryCommand {
  readonly args: readonly string[];
  readonly stdin?: Uint8Array;
  /** Strings one of which the message must contain (the file, the directory, the flag); empty: any. */
  readonly names: readonly string[];
}

/** What every target shares: fixture paths and prepared files, built once per run. */
export interface FuzzContext {
  /** A directory of this run's own; inputs get subdirectories that are removed after use. */
  readonly work: string;
}

export interface FuzzTarget<S extends Seed = Seed> {
  readonly name: string;
  /** The parser it reaches, for the listing. */
  readonly about: string;
  seeds(ctx: FuzzContext): S[];
  /** One edit of `input` (a run applies one to three). */
  mutate(input: Uint8Array, rng: Rng, seeds: readonly S[]): Uint8Array;
  /** In process: what the input means (a canonical string) if it is accepted; throws K3Error if not. */
  parse(input: Uint8Array, seed: S, scratch: string): string;
  /** Binary: the command line for the input; files go under `dir`. Absent: in process only (an HTTP body). */
  command?(input: Uint8Array, seed: S, dir: string): BinaryCommand;
  /** The part of a successful run's stdout that must not change (default: all of it). */
  output?(stdout: string): string;
  /** Inputs `bun test` runs in process, when fewer than the default suit a costly target. */
  readonly testCount?: number;
}

export type Mode = "process" | "binary";

/** Outcomes the contract allows. */
export type Allowed = "refused" | "accepted-identical" | "accepted-different";
/** Outcomes it does not. */
export type FindingKind =
  | "exception" | "bad-refusal" | "slow" | "crash" | "hang" | "stack-trace" | "internal-error" | "not-one-line"
  | "unnamed" | "results-on-failure" | "changed-output" | "bad-exit";

export interface Finding {
  target: string;
  index: number;
  kind: FindingKind;
  detail: string;
  input: string;
}

export interface TargetCounts {
  target: string;
  mode: Mode;
  inputs: number;
  refused: number;
  acceptedIdentical: number;
  acceptedDifferent: number;
  findings: number;
  seconds: number;
}

/** An in-process parse longer than this is a finding (a parser that loops or balloons). */
const slowParseMs = 2000;
/** A binary run longer than this is a hang. */
const binaryTimeoutMs = 30_000;
/** A refusal longer than this floods the terminal (twice PATH_MAX: a message may name a path in full). */
const maxMessageChars = 8192;

/** Input `index` of a run: a seed chosen and edited one to three times, all from (seed, target, index). */
export function makeInput<S extends Seed>(target: FuzzTarget<S>, seeds: readonly S[], runSeed: number, index: number): { seed: S; bytes: Uint8Array } {
  const rng = inputRng(runSeed, target.name, index);
  const seed = rng.pick(seeds);
  // The input's own copy (mutators may edit it in place); `set` copies faster than `slice` in JSC.
  let bytes: Uint8Array = new Uint8Array(seed.bytes.length);
  bytes.set(seed.bytes);
  for (let edits = 1 + rng.below(3); edits > 0; edits--) bytes = target.mutate(bytes, rng, seeds);
  return { seed, bytes };
}

function shortText(bytes: Uint8Array): string {
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes.subarray(0, 160));
  return JSON.stringify(bytes.length > 160 ? `${text}...` : text);
}

function refusalProblem(error: unknown): { kind: FindingKind; detail: string } | undefined {
  if (!(error instanceof K3Error)) {
    const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    return { kind: "exception", detail: detail.slice(0, 500) };
  }
  if (error.exitCode !== 1 && error.exitCode !== 2) return { kind: "bad-refusal", detail: `exit code ${error.exitCode}: ${error.message.slice(0, 300)}` };
  if (error.message.includes("\n") || error.message.length > maxMessageChars) {
    return { kind: "bad-refusal", detail: `a message of ${error.message.length} characters${error.message.includes("\n") ? " over several lines" : ""}: ${error.message.slice(0, 300)}` };
  }
  return undefined;
}

/** Runs `count` inputs of one target in one mode, one after another; findings go to `onFinding`. */
export async function fuzzTarget<S extends Seed>(
  target: FuzzTarget<S>, ctx: FuzzContext, options: { mode: Mode; count: number; seed: number; first?: number },
  onFinding: (finding: Finding) => void,
): Promise<TargetCounts> {
  const started = performance.now();
  const seeds = target.seeds(ctx);
  const counts: TargetCounts = { target: target.name, mode: options.mode, inputs: 0, refused: 0, acceptedIdentical: 0, acceptedDifferent: 0, findings: 0, seconds: 0 };
  const scratch = join(ctx.work, `${target.name}-${options.mode}`);
  mkdirSync(scratch, { recursive: true });
  const meanings = new Map<S, string>(seeds.map((seed) => [seed, target.parse(seed.bytes, seed, scratch)]));
  const baselines = new Map<S, string>();
  const judge = options.mode === "process" ? judgeInProcess : judgeBinary;
  try {
    for (let i = options.first ?? 0; i < (options.first ?? 0) + options.count; i++) {
      const { seed, bytes } = makeInput(target, seeds, options.seed, i);
      const outcome = await judge(target, seed, bytes, { scratch, meanings, baselines, index: i });
      counts.inputs++;
      if (typeof outcome === "string") {
        if (outcome === "refused") counts.refused++;
        else if (outcome === "accepted-identical") counts.acceptedIdentical++;
        else counts.acceptedDifferent++;
      } else {
        counts.findings++;
        onFinding({ target: target.name, index: i, kind: outcome.kind, detail: outcome.detail, input: shortText(bytes) });
      }
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  counts.seconds = (performance.now() - started) / 1000;
  return counts;
}

interface JudgeState<S> {
  scratch: string;
  meanings: Map<S, string>;
  baselines: Map<S, string>;
  index: number;
}

type Outcome = Allowed | { kind: FindingKind; detail: string };

/** In process: a valid result (same or different meaning) or a typed one-line refusal. */
function judgeInProcess<S extends Seed>(target: FuzzTarget<S>, seed: S, bytes: Uint8Array, state: JudgeState<S>): Outcome {
  const started = performance.now();
  let outcome: Outcome;
  try {
    const meaning = target.parse(bytes, seed, state.scratch);
    outcome = meaning === state.meanings.get(seed) ? "accepted-identical" : "accepted-different";
  } catch (error) {
    outcome = refusalProblem(error) ?? "refused";
  }
  const ms = performance.now() - started;
  return ms > slowParseMs && typeof outcome === "string" ? { kind: "slow", detail: `${ms.toFixed(0)} ms (${outcome})` } : outcome;
}

interface Ran {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  stdout: string;
  stderr: string;
}

/** One dist/k3 run, without blocking (several targets' runs can go at once); killed after binaryTimeoutMs. */
async function runBinary(command: BinaryCommand, cwd: string): Promise<Ran> {
  const child = Bun.spawn([executablePath, ...command.args], {
    cwd, stdin: command.stdin ? Buffer.from(command.stdin) : "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, NO_COLOR: "1" },
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    child.kill("SIGKILL");
  }, binaryTimeoutMs);
  try {
    const [stdout, stderr] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    const signal = child.signalCode === null || child.signalCode === undefined ? null : String(child.signalCode);
    return { code: signal === null ? child.exitCode : null, signal, timedOut, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** Binary: exit 1/2 with one clean line naming the file and nothing on stdout, or exit 0 and the same output. */
async function judgeBinary<S extends Seed>(target: FuzzTarget<S>, seed: S, bytes: Uint8Array, state: JudgeState<S>): Promise<Outcome> {
  const output = target.output ?? ((stdout: string) => stdout);
  const commandOf = target.command?.bind(target);
  if (!commandOf) throw new Error(`${target.name} has no binary command`);
  if (!state.baselines.has(seed)) {
    const dir = join(state.scratch, "baseline");
    mkdirSync(dir, { recursive: true });
    const base = await runBinary(commandOf(seed.bytes, seed, dir), dir);
    rmSync(dir, { recursive: true, force: true });
    if (base.code !== 0) throw new Error(`${target.name}: the unmutated input ${seed.label} fails: ${base.stderr.slice(-500)}`);
    state.baselines.set(seed, output(base.stdout));
  }
  const dir = join(state.scratch, `input-${state.index}`);
  mkdirSync(dir, { recursive: true });
  try {
    const command = commandOf(bytes, seed, dir);
    const r = await runBinary(command, dir);
    const last = r.stderr.trimEnd().split("\n").at(-1) ?? "";
    if (r.timedOut) return { kind: "hang", detail: `killed after ${binaryTimeoutMs} ms` };
    if (r.stderr.includes("Bun has crashed") || /panic: /.test(r.stderr) || r.signal) return { kind: "crash", detail: `${r.signal ?? r.code}: ${r.stderr.slice(-300)}` };
    if (/\n\s+at .+[:(]/.test(r.stderr)) return { kind: "stack-trace", detail: r.stderr.slice(-300) };
    if (r.stderr.includes("internal error")) return { kind: "internal-error", detail: last };
    if (r.code === 0) {
      if (output(r.stdout) === state.baselines.get(seed)) return "accepted-identical";
      let meaning: string | undefined;
      try {
        meaning = target.parse(bytes, seed, state.scratch);
      } catch {
        meaning = undefined;
      }
      if (meaning !== undefined && meaning !== state.meanings.get(seed)) return "accepted-different";
      return { kind: "changed-output", detail: `exit 0 with other output for an input that means the same (${meaning === undefined ? "refused in process" : "same meaning"})` };
    }
    if (r.code !== 1 && r.code !== 2) return { kind: "bad-exit", detail: `exit ${r.code}: ${last}` };
    if (r.stdout.length > 0) return { kind: "results-on-failure", detail: `exit ${r.code} with ${r.stdout.length} bytes on stdout` };
    // The refusal is the one `k3: ` line; progress may come before it and a usage error's detail
    // (the usage text, the preset list) after it.
    const lines = r.stderr.split("\n").filter((line) => line.startsWith("k3: "));
    const message = lines[0] ?? "";
    if (lines.length !== 1 || message.length > maxMessageChars) {
      return { kind: "not-one-line", detail: `${lines.length} k3 lines, the first ${message.length} chars: ${message.slice(0, 300) || last.slice(0, 300)}` };
    }
    if (command.names.length > 0 && !command.names.some((name) => message.includes(name))) return { kind: "unnamed", detail: message.slice(0, 300) };
    return "refused";
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
