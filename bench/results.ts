/**
 * The bench's figures as data: every part turns its measurements into `Figure`s once, and both
 * its text report (stdout) and `bun run bench --json FILE` are rendered from them, so a ratio or
 * a verdict is computed in one place. A figure is a value with its unit, the limit it is measured
 * against (a limit of this machine measured in the same run, a baseline run of the same part, or
 * a quoted figure; or none, with the reason), the ratio value / limit, and the target the
 * ratio must meet, if an issue sets one.
 *
 * A results file (bench/results/*.json) is one run: the machine's facts, each part with its
 * figures (or the reason it was skipped), and the correctness failures. `parseResults` is the one
 * reader (bench/report.ts, test/unit/repo/bench-report.test.ts); it refuses a file that breaks
 * the format with one line naming the file and the field.
 */

import { K3Error } from "../src/errors.ts";

export const resultsFormat = "k3-bench";
export const resultsVersion = 1;

/** What a figure is measured against. */
export interface Limit {
  what: string;
  value: number;
  unit: string;
}

/** Bounds on a figure's ratio (either may be absent), whether the ratio met them, and who set them. */
export interface Target {
  min: number | null;
  max: number | null;
  met: boolean;
  source: string;
}

export interface Figure {
  /** `<part>.<name>`, unique in a run. */
  id: string;
  what: string;
  value: number;
  unit: string;
  /** Where the value is one of several (rounds, passes, layers, steps): all of them, in order. */
  samples?: number[];
  limit: Limit | null;
  /** Why there is no limit; present exactly when `limit` is null. */
  limit_reason?: string;
  /** value / limit.value; null without a limit. */
  ratio: number | null;
  target: Target | null;
}

/** A disk bandwidth a part measured (the machine's facts carry it). */
export interface DiskProbe {
  what: string;
  value: number;
  unit: string;
  /** Whether the filesystem granted O_DIRECT (false: the reads were buffered). */
  direct: boolean;
}

/** What a part hands back: its text lines (stdout), its figures, its correctness failures. */
export interface PartReport {
  lines: string[];
  figures: Figure[];
  failures: string[];
  disk?: DiskProbe[];
}

export interface TargetSpec {
  min?: number;
  max?: number;
  source: string;
}

/**
 * A part's figures under construction. `add` computes the ratio and the verdict once; the text
 * report reads them back from the returned figure.
 */
export class Figures {
  readonly list: Figure[] = [];
  private readonly ids = new Set<string>();

  constructor(readonly part: string) {}

  /**
   * `against` is the limit, or the reason there is none. A limit whose value is not a finite,
   * non-zero number was not measured: the figure keeps no limit and says so.
   */
  add(name: string, what: string, value: number, unit: string, against: Limit | string, target?: TargetSpec, samples?: number[]): Figure {
    const id = `${this.part}.${name}`;
    if (this.ids.has(id)) throw new Error(`figure ${id} added twice`);
    if (!Number.isFinite(value)) throw new Error(`figure ${id} (${what}): the value is ${value}`);
    this.ids.add(id);
    let limit: Limit | null = null;
    let reason: string | undefined;
    if (typeof against === "string") reason = against;
    else if (Number.isFinite(against.value) && against.value !== 0) limit = { ...against };
    else reason = `${against.what}: not measured`;
    const ratio = limit ? value / limit.value : null;
    const figure: Figure = { id, what, value, unit, ...(samples ? { samples: samples.filter(Number.isFinite) } : {}), limit, ...(reason === undefined ? {} : { limit_reason: reason }), ratio, target: null };
    if (target) {
      const min = target.min ?? null;
      const max = target.max ?? null;
      const met = ratio !== null && (min === null || ratio >= min) && (max === null || ratio <= max);
      figure.target = { min, max, met, source: target.source };
    }
    this.list.push(figure);
    return figure;
  }
}

/** The ratio as a percentage ("90%"), "-" without one. */
export const percent = (f: Figure, digits = 0): string => (f.ratio === null ? "-" : `${(100 * f.ratio).toFixed(digits)}%`);
/** The ratio as a multiple ("1.62x"), "-" without one. */
export const times = (f: Figure, digits = 2): string => (f.ratio === null ? "-" : `${f.ratio.toFixed(digits)}x`);
/** "met" / "NOT met". */
export const verdict = (f: Figure): string => (f.target?.met ? "met" : "NOT met");

/** The target as text: ">= 0.9", "<= 1.35", "0.7-1.3"; "" without one. */
export function targetText(t: Target | null, digits = 2): string {
  if (!t) return "";
  const n = (v: number) => String(Number(v.toFixed(digits)));
  if (t.min !== null && t.max !== null) return `${n(t.min)}-${n(t.max)}`;
  return t.min !== null ? `>= ${n(t.min)}` : `<= ${n(t.max as number)}`;
}

// ---------------------------------------------------------------------------------------------
// The results file.

export interface MachineFacts {
  /** "model name" of /proc/cpuinfo. */
  cpu: string;
  logical_cores: number;
  /** MemTotal of /proc/meminfo, bytes. */
  mem_total_bytes: number;
  /** The kernel variant libk3 selected at start (zig/isa/), and every variant this machine runs. */
  kernel_variant: string;
  kernel_variants: string[];
  compute_threads: number;
  /** 1, 5 and 15 minutes, at the start of the run. */
  load_average: number[];
  os: string;
  /** The disk bandwidths the parts that ran measured (none when no part probes the disk). */
  disk_probes: (DiskProbe & { part: string })[];
  /** The bench's environment variables (src/env.ts, audience "bench") as set for this run. */
  bench_env: Record<string, string | null>;
}

export interface PartResult {
  name: string;
  seconds: number;
  /** 1-minute load average just before the part. */
  load_before: number;
  /** Why the part did not run; null when it ran. */
  skipped: string | null;
  /** The error that stopped the part; null when it finished. */
  error: string | null;
  figures: Figure[];
  failures: string[];
}

export interface BenchResults {
  format: typeof resultsFormat;
  version: typeof resultsVersion;
  /** Start of the run, ISO 8601 UTC. */
  date: string;
  commit: string | null;
  /** Whether the work tree differed from the commit. */
  commit_dirty: boolean | null;
  bun: string;
  machine: MachineFacts;
  parts: PartResult[];
  /** Whether any correctness check (or a part's error) failed: `bun run bench` then exits 1. */
  failed: boolean;
  failures: { part: string; what: string }[];
}

/**
 * The file's text: two-space JSON, one figure a line (a results file is read in diffs), ending in
 * a newline. JSON.parse reads it back.
 */
export function renderResults(r: BenchResults): string {
  const nested = (v: unknown, pad: string) => JSON.stringify(v, null, 2).replace(/\n/g, `\n${pad}`);
  const part = (p: PartResult) => {
    const fields = Object.entries(p).map(([k, v]) => {
      if (k !== "figures") return `      ${JSON.stringify(k)}: ${nested(v, "      ")}`;
      const figures = v as Figure[];
      return `      "figures": ${figures.length === 0 ? "[]" : `[\n${figures.map((f) => `        ${JSON.stringify(f)}`).join(",\n")}\n      ]`}`;
    });
    return `    {\n${fields.join(",\n")}\n    }`;
  };
  const fields = Object.entries(r).map(([k, v]) =>
    k === "parts" ? `  "parts": [\n${(v as PartResult[]).map(part).join(",\n")}\n  ]` : `  ${JSON.stringify(k)}: ${nested(v, "  ")}`);
  return `{\n${fields.join(",\n")}\n}\n`;
}

/** A results file that breaks the format: the message is one line naming the file and the field. */
export class ResultsError extends K3Error {
  constructor(message: string) {
    super(1, message);
  }
}

type Json = unknown;

/** Reads and checks a results file's text; `file` names it in every refusal. */
export function parseResults(text: string, file: string): BenchResults {
  const fail = (what: string): never => {
    throw new ResultsError(`${file}: ${what}`.replace(/\s*\n\s*/g, " "));
  };
  let doc: Json;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    return fail(`not JSON (${(error as Error).message})`);
  }
  const isObject = (v: Json): v is Record<string, Json> => typeof v === "object" && v !== null && !Array.isArray(v);
  const str = (v: Json, at: string, empty = false): string => (typeof v === "string" && (empty || v.length > 0) ? v : fail(`${at}: ${v === undefined ? "missing" : "not a non-empty string"}`));
  const num = (v: Json, at: string): number => (typeof v === "number" && Number.isFinite(v) ? v : fail(`${at}: ${v === undefined ? "missing" : "not a finite number"}`));
  const bool = (v: Json, at: string): boolean => (typeof v === "boolean" ? v : fail(`${at}: not true or false`));
  const arr = (v: Json, at: string): Json[] => (Array.isArray(v) ? v : fail(`${at}: ${v === undefined ? "missing" : "not an array"}`));
  const obj = (v: Json, at: string): Record<string, Json> => (isObject(v) ? v : fail(`${at}: ${v === undefined ? "missing" : "not an object"}`));
  const orNull = <T>(v: Json, read: (v: Json) => T): T | null => (v === null ? null : read(v));

  const top = obj(doc, "the document");
  if (top.format !== resultsFormat) fail(`format is ${JSON.stringify(top.format)}, expected "${resultsFormat}"`);
  if (top.version !== resultsVersion) fail(`version ${JSON.stringify(top.version)} is not one this reader knows (${resultsVersion})`);
  const date = str(top.date, "date");
  if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(date) || Number.isNaN(Date.parse(date))) fail(`date ${JSON.stringify(date)} is not an ISO 8601 UTC time`);
  const commit = orNull(top.commit, (v) => str(v, "commit"));
  const commitDirty = orNull(top.commit_dirty, (v) => bool(v, "commit_dirty"));
  const bun = str(top.bun, "bun");

  const m = obj(top.machine, "machine");
  const cores = num(m.logical_cores, "machine.logical_cores");
  if (!Number.isInteger(cores) || cores < 1) fail("machine.logical_cores: not a positive integer");
  const memory = num(m.mem_total_bytes, "machine.mem_total_bytes");
  if (memory <= 0) fail("machine.mem_total_bytes: not positive");
  const load = arr(m.load_average, "machine.load_average").map((v, i) => num(v, `machine.load_average[${i}]`));
  if (load.length !== 3) fail("machine.load_average: not 3 numbers (1, 5 and 15 minutes)");
  const env = obj(m.bench_env, "machine.bench_env");
  const machine: MachineFacts = {
    cpu: str(m.cpu, "machine.cpu"),
    logical_cores: cores,
    mem_total_bytes: memory,
    kernel_variant: str(m.kernel_variant, "machine.kernel_variant"),
    kernel_variants: arr(m.kernel_variants, "machine.kernel_variants").map((v, i) => str(v, `machine.kernel_variants[${i}]`)),
    compute_threads: num(m.compute_threads, "machine.compute_threads"),
    load_average: load,
    os: str(m.os, "machine.os"),
    disk_probes: arr(m.disk_probes, "machine.disk_probes").map((v, i) => {
      const at = `machine.disk_probes[${i}]`;
      const p = obj(v, at);
      return { part: str(p.part, `${at}.part`), what: str(p.what, `${at}.what`), value: num(p.value, `${at}.value`), unit: str(p.unit, `${at}.unit`), direct: bool(p.direct, `${at}.direct`) };
    }),
    bench_env: Object.fromEntries(Object.entries(env).map(([k, v]) => [k, orNull(v, (s) => str(s, `machine.bench_env.${k}`, true))])),
  };

  const ids = new Set<string>();
  const parts = arr(top.parts, "parts").map((v, i): PartResult => {
    const p = obj(v, `parts[${i}]`);
    const name = str(p.name, `parts[${i}].name`);
    const at = `parts[${i}] (${name})`;
    const skipped = orNull(p.skipped, (s) => str(s, `${at}.skipped`));
    const figures = arr(p.figures, `${at}.figures`).map((fv, j): Figure => {
      const raw = obj(fv, `${at}.figures[${j}]`);
      const fat = `${at}.figures[${j}]${typeof raw.id === "string" ? ` (${raw.id})` : ""}`;
      const id = str(raw.id, `${fat}.id`);
      if (ids.has(id)) fail(`${fat}: id ${id} appears twice`);
      ids.add(id);
      if (raw.unit === undefined) fail(`${fat}: no unit`);
      const figure: Figure = {
        id, what: str(raw.what, `${fat}.what`), value: num(raw.value, `${fat}.value`), unit: str(raw.unit, `${fat}.unit`),
        limit: null, ratio: orNull(raw.ratio, (r) => num(r, `${fat}.ratio`)), target: null,
      };
      if (raw.samples !== undefined) figure.samples = arr(raw.samples, `${fat}.samples`).map((s, k) => num(s, `${fat}.samples[${k}]`));
      if (!("limit" in raw)) fail(`${fat}: no limit (give null and a limit_reason when there is none)`);
      if (raw.limit === null) {
        figure.limit_reason = str(raw.limit_reason, `${fat}.limit_reason (the limit is null)`);
        if (figure.ratio !== null) fail(`${fat}: a ratio without a limit`);
      } else {
        const l = obj(raw.limit, `${fat}.limit`);
        figure.limit = { what: str(l.what, `${fat}.limit.what`), value: num(l.value, `${fat}.limit.value`), unit: str(l.unit, `${fat}.limit.unit`) };
        if (figure.ratio === null) fail(`${fat}: a limit without a ratio`);
      }
      if (raw.target !== null && raw.target !== undefined) {
        const t = obj(raw.target, `${fat}.target`);
        const min = orNull(t.min, (x) => num(x, `${fat}.target.min`));
        const max = orNull(t.max, (x) => num(x, `${fat}.target.max`));
        if (min === null && max === null) fail(`${fat}.target: neither min nor max`);
        figure.target = { min, max, met: bool(t.met, `${fat}.target.met`), source: str(t.source, `${fat}.target.source`) };
      } else if (raw.target === undefined) {
        fail(`${fat}: no target (give null when there is none)`);
      }
      return figure;
    });
    if (skipped !== null && figures.length > 0) fail(`${at}: skipped, yet it has figures`);
    return {
      name, seconds: num(p.seconds, `${at}.seconds`), load_before: num(p.load_before, `${at}.load_before`), skipped,
      error: orNull(p.error, (s) => str(s, `${at}.error`)), figures,
      failures: arr(p.failures, `${at}.failures`).map((s, k) => str(s, `${at}.failures[${k}]`)),
    };
  });
  if (parts.length === 0) fail("parts: empty");
  const failures = arr(top.failures, "failures").map((v, i) => {
    const f = obj(v, `failures[${i}]`);
    return { part: str(f.part, `failures[${i}].part`), what: str(f.what, `failures[${i}].what`) };
  });
  const failed = bool(top.failed, "failed");
  if (failed !== failures.length > 0) fail(`failed is ${failed} but ${failures.length} failure(s) are listed`);
  return { format: resultsFormat, version: resultsVersion, date, commit, commit_dirty: commitDirty, bun, machine, parts, failed, failures };
}
