/**
 * `bun run bench:report [FILE] [--check]`: the results tables of docs/benchmarks.md (every figure
 * of one run) and README.md (a few headline figures) generated from one results file
 * (bench/results.ts), between their `<!-- bench:report begin/end -->` and
 * `<!-- bench:readme begin/end -->` markers. Without FILE: the newest run in bench/results/ (by its
 * `date`). With `--check` nothing is written: exit 1 when either document differs from what the
 * file generates (the test suite runs this), so a table cannot drift from its data.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { K3Error } from "../src/errors.ts";
import { writeAtomically } from "../src/fs.ts";
import { parseResults, targetText, type BenchResults, type Figure } from "./results.ts";

const root = resolve(import.meta.dir, "..");
export const resultsDir = join(root, "bench/results");
const usage = "usage: bun run bench:report [FILE] [--check]";

/** The figures README shows, in this order; one a run does not have is left out. */
export const readmeFigureIds = [
  "kernels.v4.bf16.t1.threads2",
  "kernels.v4.bf16.t32.threads2",
  "kernels.v4.mxfp4.t32.threads2",
  "attention.mla.32768",
  "streaming.floor.resident_all_experts_cached",
  "streaming.floor.trunk_gb_1.5",
  "prefill.resident_chunked.floor",
  "speculative.warm.sweep",
  "hybrid.hybrid.s_per_token",
  "batch.streamed_trunk_gb_1.5.ids_per_second",
  "state.resumed.first_step",
] as const;

export interface Markers {
  begin: string;
  end: string;
}
export const docsMarkers: Markers = { begin: "<!-- bench:report begin -->", end: "<!-- bench:report end -->" };
export const readmeMarkers: Markers = { begin: "<!-- bench:readme begin -->", end: "<!-- bench:readme end -->" };

/** A number as a table shows it: 4 significant digits, no exponent, thousands unseparated. */
export function formatNumber(v: number): string {
  if (v === 0) return "0";
  const a = Math.abs(v);
  if (a >= 1000) return v.toFixed(0);
  const digits = Math.max(0, 3 - Math.floor(Math.log10(a)));
  return v.toFixed(Math.min(digits, 6));
}

const cell = (text: string) => text.replace(/\|/g, "\\|").replace(/\s*\n\s*/g, " ");
const measured = (f: Figure) => `${formatNumber(f.value)} ${f.unit}`;
const against = (f: Figure) => (f.limit ? `${f.limit.what}: ${formatNumber(f.limit.value)} ${f.limit.unit}` : `(${f.limit_reason ?? "no limit"})`);
const ratio = (f: Figure) => (f.ratio === null ? "" : `${formatNumber(f.ratio)}x`);
const target = (f: Figure) => (f.target ? `${targetText(f.target)} (${f.target.source}): ${f.target.met ? "met" : "**not met**"}` : "");

/** One line naming the run: where it ran, when, at which commit. */
export function runLine(r: BenchResults, file: string): string {
  const m = r.machine;
  const commit = r.commit === null ? "no commit" : `commit ${r.commit.slice(0, 10)}${r.commit_dirty ? " (with uncommitted changes)" : ""}`;
  return `From \`${file}\`: ${r.date.slice(0, 16).replace("T", " ")} UTC, ${m.cpu}, ${m.logical_cores} logical cores, ` +
    `${(m.mem_total_bytes / 2 ** 30).toFixed(1)} GiB, kernel variant ${m.kernel_variant} with ${m.compute_threads} compute threads, ` +
    `${m.os}, Bun ${r.bun}, ${commit}, load average ${m.load_average[0]} at the start.`;
}

/** docs/benchmarks.md's table: every part, every figure. */
export function docsTable(r: BenchResults, file: string): string {
  const out: string[] = [runLine(r, file), ""];
  if (r.machine.disk_probes.length > 0) {
    out.push(`Disk probes: ${r.machine.disk_probes.map((p) => `${p.what} ${formatNumber(p.value)} ${p.unit}${p.direct ? "" : " (buffered: O_DIRECT refused)"} (${p.part})`).join("; ")}.`, "");
  }
  const skipped = r.parts.filter((p) => p.skipped !== null);
  if (skipped.length > 0) out.push(`Not in this run: ${skipped.map((p) => `${p.name} (${p.skipped})`).join("; ")}.`, "");
  out.push(r.failed ? `**Correctness failures:** ${r.failures.map((f) => `${f.part}: ${f.what}`).join("; ")}.` : "Every correctness check held.", "");
  for (const p of r.parts) {
    if (p.skipped !== null) continue;
    out.push(`### ${p.name} (${formatNumber(p.seconds)} s, load ${p.load_before} before)`, "");
    if (p.error !== null) out.push(`Stopped on an error: ${cell(p.error)}`, "");
    if (p.figures.length === 0) continue;
    out.push("| figure | measured | against | ratio | target |", "|---|---|---|---|---|");
    for (const f of p.figures) out.push(`| ${cell(f.what)} | ${measured(f)} | ${cell(against(f))} | ${ratio(f)} | ${cell(target(f))} |`);
    out.push("");
  }
  return out.join("\n").trimEnd();
}

/** README's table: the headline figures the run has. */
export function readmeTable(r: BenchResults, file: string): string {
  const byId = new Map(r.parts.flatMap((p) => p.figures).map((f) => [f.id, f]));
  const rows = readmeFigureIds.map((id) => byId.get(id)).filter((f): f is Figure => f !== undefined);
  const m = r.machine;
  const out = [
    `Measured by \`bun run bench\` on ${m.cpu} (${m.logical_cores} cores, ${(m.mem_total_bytes / 2 ** 30).toFixed(0)} GiB), ` +
      `${r.date.slice(0, 10)} ([${basename(file)}](${file})); each figure against a limit measured in the same run:`,
    "",
    "| figure | measured | against | ratio |",
    "|---|---|---|---|",
    ...rows.map((f) => `| ${cell(f.what)} | ${measured(f)} | ${cell(against(f))} | ${ratio(f)} |`),
  ];
  return out.join("\n");
}

/** `text` with what lies between the markers replaced; refuses a document without exactly one pair. */
export function replaceBetween(text: string, markers: Markers, body: string, file: string): string {
  const begin = text.indexOf(markers.begin);
  const end = text.indexOf(markers.end);
  if (begin < 0 || end < 0 || end < begin || text.indexOf(markers.begin, begin + 1) >= 0) {
    throw new K3Error(1, `${file}: needs one ${markers.begin} ... ${markers.end} pair`);
  }
  return `${text.slice(0, begin + markers.begin.length)}\n${body}\n${text.slice(end)}`;
}

/** The newest results file in `dir` by the run's own date (file names need not sort). */
export function newestResults(dir = resultsDir): string {
  const files = existsSync(dir) ? readdirSync(dir).filter((n) => n.endsWith(".json")) : [];
  if (files.length === 0) throw new K3Error(1, `${relative(root, dir) || dir}: no results files (bun run bench --json bench/results/NAME.json)`);
  const dated = files.map((n) => {
    const path = join(dir, n);
    return { path, date: readResults(path).date };
  });
  dated.sort((a, b) => (a.date < b.date ? 1 : a.date > b.date ? -1 : 0));
  return (dated[0] as { path: string }).path;
}

export function readResults(path: string): BenchResults {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new K3Error(1, `${path}: cannot read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  return parseResults(text, path);
}

/** The two documents as the results file generates them: [path, current text, generated text]. */
export function generate(resultsPath: string, repo = root): [string, string, string][] {
  const results = readResults(resultsPath);
  const shown = relative(repo, resultsPath).startsWith("..") ? resultsPath : relative(repo, resultsPath);
  const docs = [
    ["docs/benchmarks.md", docsMarkers, docsTable(results, `../${shown}`)],
    ["README.md", readmeMarkers, readmeTable(results, shown)],
  ] as const;
  return docs.map(([name, markers, body]) => {
    const path = join(repo, name);
    const current = readFileSync(path, "utf8");
    return [path, current, replaceBetween(current, markers, body, name)];
  });
}

if (import.meta.main) {
  try {
    const args = process.argv.slice(2);
    const check = args.includes("--check");
    const rest = args.filter((a) => a !== "--check");
    const unknown = rest.find((a) => a.startsWith("-"));
    if (unknown) throw new K3Error(2, `unknown flag ${unknown} (${usage})`);
    if (rest.length > 1) throw new K3Error(2, `one results file, not ${rest.length} (${usage})`);
    const file = rest[0] === undefined ? newestResults() : resolve(rest[0]);
    const stale: string[] = [];
    for (const [path, current, generated] of generate(file)) {
      if (current === generated) continue;
      if (check) stale.push(relative(root, path));
      else {
        writeAtomically(path, generated, "the generated table");
        process.stderr.write(`bench:report: ${relative(root, path)} updated from ${relative(root, file)}\n`);
      }
    }
    if (stale.length > 0) throw new K3Error(1, `${stale.join(" and ")} differ from what ${relative(root, file)} generates (run bun run bench:report)`);
  } catch (error) {
    if (!(error instanceof K3Error)) throw error;
    process.stderr.write(`bench:report: ${error.message}\n`);
    process.exit(error.exitCode);
  }
}
