/**
 * Ultra-low-memory mode on the K3-width checkpoint (issue 13): the laptop configuration
 * (`--preset laptop`) against `--preset ultra`, and, to isolate the tables, the laptop budgets
 * with `--ultra-low-memory`; each a child process of dist/k3 on the packed trunk with the same
 * prompt, so each peak RSS is its own. The ids must be identical; ultra's peak RSS must sit below
 * the laptop configuration's by at least the size of the embedding and the LM head (the plan's
 * `embed + lm_head` term of the laptop run).
 *
 * `bun run bench/ultra.ts` alone, or part of `bun run bench`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { benchPaths, ensureExecutable, prepare, runK3, slug, type StreamingRun } from "./streaming.ts";
import { Figures, type PartReport } from "./results.ts";

export interface UltraBench {
  laptop: StreamingRun;
  ultra: StreamingRun;
  /** The laptop budgets with --ultra-low-memory: the difference is the tables alone. */
  laptopUltra: StreamingRun;
  /** The embedding and LM head as the laptop run holds them. */
  tablesBytes: number;
  /** 1-minute load average before each of the three runs (the machine is shared). */
  loads: number[];
  failures: string[];
}

const term = (run: StreamingRun, name: string) => run.result?.plan.memory.terms.find((t) => t.name === name)?.bytes;

export async function benchUltra(paths = benchPaths()): Promise<UltraBench> {
  await ensureExecutable();
  await prepare(paths);
  const outDir = mkdtempSync(join(tmpdir(), "k3-bench-ultra-"));
  const trunk = ["--trunk", paths.trunkDir];
  let laptop: StreamingRun;
  let ultra: StreamingRun;
  let laptopUltra: StreamingRun;
  const loads: number[] = [];
  const load = () => loads.push(loadavg()[0] ?? 0);
  try {
    load();
    laptop = await runK3("--preset laptop", paths, [...trunk, "--preset", "laptop"], outDir);
    load();
    ultra = await runK3("--preset ultra", paths, [...trunk, "--preset", "ultra"], outDir);
    load();
    laptopUltra = await runK3("laptop + ultra mode", paths, [...trunk, "--preset", "laptop", "--ultra-low-memory"], outDir);
  } finally {
    rmSync(outDir, { recursive: true, force: true });
  }
  const failures: string[] = [];
  const runs = [laptop, ultra, laptopUltra];
  for (const r of runs) if (r.code !== 0 || !r.generated) failures.push(`run '${r.label}' exited ${r.code}:\n    ${r.stderrTail.join("\n    ")}`);
  const ids = runs.map((r) => JSON.stringify(r.generated));
  if (new Set(ids).size !== 1) failures.push(`generated ids differ: ${runs.map((r) => `${r.label} ${ids[runs.indexOf(r)]}`).join("; ")}`);
  const tablesBytes = term(laptop, "embed + lm_head") ?? 0;
  if (laptop.peakRss !== undefined && ultra.peakRss !== undefined && laptop.peakRss - ultra.peakRss < tablesBytes) {
    failures.push(`--preset ultra peak RSS ${gb(ultra.peakRss)} is not below --preset laptop's ${gb(laptop.peakRss)} by the ${gb(tablesBytes)} of embedding and LM head`);
  }
  return { laptop, ultra, laptopUltra, tablesBytes, loads, failures };
}

const gb = (bytes: number) => `${(bytes / 1e9).toFixed(3)} GB`;
const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`;

export function ultraReport(b: UltraBench): PartReport {
  const figures = new Figures("ultra");
  const out = [
    `ultra (K3-width, packed trunk; embedding + LM head ${mb(b.tablesBytes)} resident in the laptop run; ` +
      `load average ${b.loads.map((l) => l.toFixed(2)).join(", ")} before the three runs):`,
  ];
  for (const r of [b.laptop, b.ultra, b.laptopUltra]) {
    const name = slug(r.label);
    const tables = term(r, "embed + lm_head") ?? term(r, "embed + lm_head (STREAMED)");
    const peak = r.peakRss === undefined ? undefined
      : figures.add(`${name}.peak_rss`, `K3-width, ${r.label}: peak RSS`, r.peakRss / 1e9, "GB",
        r.planTotal === undefined ? "the run's plan gave no TOTAL" : { what: "the memory plan's TOTAL", value: r.planTotal / 1e9, unit: "GB" });
    const steady = r.steadySecondsPerToken === undefined ? undefined
      : figures.add(`${name}.steady`, `K3-width, ${r.label}: s/token after step 0`, r.steadySecondsPerToken, "s/token", "the three runs' speeds side by side; the check is the peak RSS");
    out.push(
      `  ${r.label.padEnd(22)} peak RSS ${peak === undefined ? "-" : `${peak.value.toFixed(3)} GB`} (plan ${peak?.limit ? `${peak.limit.value.toFixed(3)} GB` : "-"}, ` +
        `tables term ${tables === undefined ? "-" : mb(tables)}), ${steady?.value.toFixed(3) ?? "-"} s/token after step 0, ` +
        `read embedding ${mb(r.result?.embedding_bytes_read ?? 0)} + LM head ${mb(r.result?.lm_head_bytes_read ?? 0)}, ids [${r.generated?.join(",") ?? "-"}]`,
    );
  }
  const diff = (a: StreamingRun, c: StreamingRun) => (a.peakRss !== undefined && c.peakRss !== undefined ? a.peakRss - c.peakRss : undefined);
  const presetGap = diff(b.laptop, b.ultra);
  const sameBudgetGap = diff(b.laptop, b.laptopUltra);
  const tables = { what: "the embedding and LM head (the laptop run's plan term)", value: b.tablesBytes / 1e6, unit: "MB" };
  const gap = presetGap === undefined ? undefined
    : figures.add("preset_gap", "K3-width: --preset laptop's peak RSS minus --preset ultra's", presetGap / 1e6, "MB", tables, { min: 1, source: "issue 13 (below by at least the tables)" });
  const alone = sameBudgetGap === undefined ? undefined
    : figures.add("mode_gap", "K3-width, the laptop budgets: the peak RSS --ultra-low-memory alone saves (it keeps a 4 MiB chunk buffer instead)", sameBudgetGap / 1e6, "MB", tables);
  out.push(
    `  --preset ultra is ${gap === undefined ? "-" : gb(1e6 * gap.value)} below --preset laptop (needs >= ${gb(b.tablesBytes)}: ` +
      `${gap?.target?.met ? "met" : "FAIL"}); at the laptop budgets ultra mode alone saves ` +
      `${alone === undefined ? "-" : `${alone.value.toFixed(1)} MB`} of the ${mb(b.tablesBytes)} of tables (it keeps a 4 MiB chunk buffer instead)`,
  );
  for (const f of b.failures) out.push(`  FAIL: ${f}`);
  return { lines: out, figures: figures.list, failures: b.failures };
}

if (import.meta.main) {
  const report = ultraReport(await benchUltra());
  for (const line of report.lines) console.log(line);
  if (report.failures.length > 0) process.exit(1);
}
