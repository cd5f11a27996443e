/**
 * `bun run fuzz [--target NAME] [--count N] [--seed S] [--binary] [--first I] [--list]`: mutation
 * fuzzing of every parser k3 has (test/fuzz/targets/), in process (thousands of inputs a second)
 * or through dist/k3 (`--binary`, the whole contract). Deterministic: the same seed gives the same
 * inputs, and `--first I --count 1` makes input I alone again. Exits 1 when anything breaks the
 * contract, printing each finding with its index.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureBuilt } from "../../tools/build.ts";
import { fuzzTarget, type Finding, type Mode, type TargetCounts } from "./harness.ts";
import { targets } from "./targets/index.ts";

interface Options {
  target: string | undefined;
  count: number | undefined;
  seed: number;
  mode: Mode;
  first: number;
  list: boolean;
}

function parseArgs(argv: readonly string[]): Options {
  const options: Options = { target: undefined, count: undefined, seed: 1, mode: "process", first: 0, list: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    const whole = (v: string) => {
      if (!/^\d+$/.test(v)) throw new Error(`${arg} expects a whole number, got '${v}'`);
      return Number(v);
    };
    if (arg === "--target") options.target = value();
    else if (arg === "--count") options.count = whole(value());
    else if (arg === "--seed") options.seed = whole(value());
    else if (arg === "--first") options.first = whole(value());
    else if (arg === "--binary") options.mode = "binary";
    else if (arg === "--list") options.list = true;
    else throw new Error(`unknown option ${arg} (--target NAME, --count N, --seed S, --binary, --first I, --list)`);
  }
  return options;
}

/** Work directories of fuzz runs that were killed mid-input (a signal cannot interrupt a synchronous loop). */
function removeStaleWork(parent: string): void {
  for (const name of readdirSync(parent)) {
    const pid = Number(/^k3-fuzz-(\d+)-/.exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch {
      rmSync(join(parent, name), { recursive: true, force: true });
    }
  }
}

export function countsTable(rows: readonly TargetCounts[]): string {
  const header = ["target", "mode", "inputs", "refused", "accepted-identical", "accepted-different", "findings", "seconds", "inputs/s"];
  const body = rows.map((r) => [
    r.target, r.mode, r.inputs, r.refused, r.acceptedIdentical, r.acceptedDifferent, r.findings, r.seconds.toFixed(1), (r.inputs / Math.max(r.seconds, 1e-9)).toFixed(0),
  ].map(String));
  const total = rows.reduce((sum, r) => ({ ...sum, inputs: sum.inputs + r.inputs, refused: sum.refused + r.refused, acceptedIdentical: sum.acceptedIdentical + r.acceptedIdentical, acceptedDifferent: sum.acceptedDifferent + r.acceptedDifferent, findings: sum.findings + r.findings, seconds: sum.seconds + r.seconds }), { inputs: 0, refused: 0, acceptedIdentical: 0, acceptedDifferent: 0, findings: 0, seconds: 0 });
  body.push(["total", "", total.inputs, total.refused, total.acceptedIdentical, total.acceptedDifferent, total.findings, total.seconds.toFixed(1), ""].map(String));
  const widths = header.map((h, c) => Math.max(h.length, ...body.map((row) => (row[c] as string).length)));
  return [header, ...body].map((row) => row.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] as number) : cell.padStart(widths[c] as number))).join("  ")).join("\n");
}

async function main(): Promise<number> {
  const options = parseArgs(process.argv.slice(2));
  if (options.list) {
    for (const t of targets) process.stdout.write(`${t.name.padEnd(18)} ${t.about}\n`);
    return 0;
  }
  const named = options.target ? targets.filter((t) => t.name === options.target) : targets;
  const chosen = options.mode === "binary" ? named.filter((t) => t.command) : named;
  for (const t of named) if (!chosen.includes(t)) process.stderr.write(`fuzz: ${t.name} runs in process only (it has no command line)\n`);
  if (chosen.length === 0) throw new Error(`no target ${options.target} (${targets.map((t) => t.name).join(", ")})`);
  ensureBuilt();
  const count = options.count ?? (options.mode === "binary" ? 20 : 1000);
  const parent = existsSync("/dev/shm") ? "/dev/shm" : tmpdir();
  removeStaleWork(parent);
  const work = mkdtempSync(join(parent, `k3-fuzz-${process.pid}-`));
  // No signal handlers: one would keep a signal from stopping the synchronous loop; the next run
  // removes what a killed one left (removeStaleWork).
  const findings: Finding[] = [];
  const rows: TargetCounts[] = [];
  try {
    process.stderr.write(`fuzz: seed ${options.seed}, ${count} inputs per target from input ${options.first}, ${options.mode}\n`);
    for (const target of chosen) {
      const row = await fuzzTarget(target, { work }, { mode: options.mode, count, seed: options.seed, first: options.first }, (f) => {
        findings.push(f);
        if (findings.filter((x) => x.target === f.target).length <= 10) {
          process.stderr.write(`FINDING ${f.target} #${f.index} ${f.kind}: ${f.detail}\n  input: ${f.input}\n`);
        }
      });
      rows.push(row);
      process.stderr.write(`fuzz: ${row.target}: ${row.inputs} inputs, ${row.refused} refused, ${row.acceptedIdentical} accepted-identical, ${row.acceptedDifferent} accepted-different, ${row.findings} findings, ${row.seconds.toFixed(1)} s\n`);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  process.stdout.write(`bun run fuzz${process.argv.slice(2).length ? ` ${process.argv.slice(2).join(" ")}` : ""}\n${countsTable(rows)}\n`);
  return findings.length === 0 ? 0 : 1;
}

if (import.meta.main) process.exit(await main());
