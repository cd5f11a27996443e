/**
 * Benchmark results as data (bench/results.ts, bench/report.ts): a figure's ratio and verdict are
 * computed once, a results file reads back as it was written, a broken one is refused naming the
 * field, and the tables in docs/benchmarks.md and README.md are what the newest kept run generates.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { docsMarkers, docsTable, formatNumber, generate, newestResults, readmeFigureIds, readmeTable, replaceBetween, resultsDir } from "../../../bench/report.ts";
import { Figures, parseResults, renderResults, type BenchResults } from "../../../bench/results.ts";
import { K3Error } from "../../../src/errors.ts";

const root = resolve(import.meta.dir, "../../..");

function sample(): BenchResults {
  const figures = new Figures("kernels");
  const memory = figures.add("memory", "memory read", 32, "GB/s", "a limit of this machine");
  figures.add("bf16", "bf16 T=1 | 2 threads", 28.8, "GB/s", { what: "memory read", value: memory.value, unit: "GB/s" }, { min: 0.85, source: "issue 12" }, [28, 28.8]);
  figures.add("slow", "a slow row", 8, "GB/s", { what: "memory read", value: 32, unit: "GB/s" }, { min: 0.5, max: 2, source: "issue 9" });
  return {
    format: "k3-bench", version: 1, date: "2026-01-02T03:04:05.000Z", commit: "0123456789abcdef0123456789abcdef01234567", commit_dirty: false, bun: "1.4.5",
    machine: {
      cpu: "Test CPU", logical_cores: 2, mem_total_bytes: 24 * 2 ** 30, kernel_variant: "v4", kernel_variants: ["scalar", "v4"], compute_threads: 2,
      load_average: [0.5, 0.2, 0.1], os: "Linux x64", disk_probes: [], bench_env: { K3_BENCH_DIR: null },
    },
    parts: [
      { name: "kernels", seconds: 12.5, load_before: 0.5, skipped: null, error: null, figures: figures.list, failures: [] },
      { name: "streaming", seconds: 0, load_before: 0.5, skipped: "K3_BENCH_SKIP_STREAMING=1", error: null, figures: [], failures: [] },
    ],
    failed: false, failures: [],
  };
}

describe("figures", () => {
  test("the ratio is value / limit and the target's verdict is computed from it", () => {
    const [memory, bf16, slow] = sample().parts[0]!.figures;
    expect(memory!.ratio).toBeNull();
    expect(memory!.limit_reason).toBe("a limit of this machine");
    expect(bf16!.ratio).toBeCloseTo(0.9, 12);
    expect(bf16!.target).toEqual({ min: 0.85, max: null, met: true, source: "issue 12" });
    expect(slow!.ratio).toBe(0.25);
    expect(slow!.target!.met).toBe(false);
  });

  test("a limit that was not measured is no limit, and says so; a value that is not finite is refused", () => {
    const figures = new Figures("p");
    const f = figures.add("x", "x", 1, "s", { what: "the disk", value: Number.NaN, unit: "GB/s" }, { max: 1, source: "t" });
    expect(f.limit).toBeNull();
    expect(f.limit_reason).toBe("the disk: not measured");
    expect(f.target!.met).toBe(false);
    expect(() => figures.add("y", "y", Number.POSITIVE_INFINITY, "s", "none")).toThrow(/p\.y/);
    expect(() => figures.add("x", "again", 1, "s", "none")).toThrow(/twice/);
  });
});

describe("results files", () => {
  test("a rendered file parses back to the same results, one figure a line", () => {
    const r = sample();
    const text = renderResults(r);
    expect(parseResults(text, "f.json")).toEqual(r);
    expect(text.split("\n").filter((l) => l.includes('"id":"kernels.')).length).toBe(3);
    expect(text.endsWith("}\n")).toBe(true);
  });

  const hostile: [string, (d: Record<string, any>) => void, RegExp][] = [
    ["another format", (d) => { d.format = "k3-run"; }, /format is "k3-run"/],
    ["a later version", (d) => { d.version = 2; }, /version 2/],
    ["a date that is not UTC ISO 8601", (d) => { d.date = "yesterday"; }, /date "yesterday"/],
    ["no machine", (d) => { delete d.machine; }, /machine: missing/],
    ["zero cores", (d) => { d.machine.logical_cores = 0; }, /machine\.logical_cores/],
    ["two load averages", (d) => { d.machine.load_average = [1, 2]; }, /load_average/],
    ["no parts", (d) => { d.parts = []; }, /parts: empty/],
    ["a figure without a unit", (d) => { delete d.parts[0].figures[1].unit; }, /kernels\.bf16\).*no unit/],
    ["a ratio without a limit", (d) => { d.parts[0].figures[0].ratio = 1; }, /a ratio without a limit/],
    ["a limit without a ratio", (d) => { d.parts[0].figures[1].ratio = null; }, /a limit without a ratio/],
    ["no limit and no reason", (d) => { delete d.parts[0].figures[0].limit_reason; }, /limit_reason/],
    ["a figure id twice", (d) => { d.parts[0].figures[2].id = "kernels.bf16"; }, /appears twice/],
    ["a value that is a string", (d) => { d.parts[0].figures[1].value = "28.8"; }, /\.value: not a finite number/],
    ["a target with neither bound", (d) => { d.parts[0].figures[1].target = { min: null, max: null, met: true, source: "x" }; }, /neither min nor max/],
    ["a skipped part with figures", (d) => { d.parts[1].figures = d.parts[0].figures.slice(0, 1); d.parts[0].figures = d.parts[0].figures.slice(1); }, /skipped, yet it has figures/],
    ["failed without failures", (d) => { d.failed = true; }, /failed is true but 0 failure/],
  ];
  for (const [what, edit, message] of hostile) {
    test(`refuses ${what} in one line naming the file`, () => {
      const doc = JSON.parse(renderResults(sample())) as Record<string, any>;
      edit(doc);
      let error: unknown;
      try {
        parseResults(JSON.stringify(doc), "bench/results/x.json");
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(K3Error);
      const text = (error as Error).message;
      expect(text).toMatch(/^bench\/results\/x\.json: /);
      expect(text).toMatch(message);
      expect(text).not.toContain("\n");
    });
  }

  test("refuses text that is not JSON", () => {
    expect(() => parseResults("{", "r.json")).toThrow(/^r\.json: not JSON/);
  });
});

describe("the generated tables", () => {
  test("the docs table shows every figure of the run with its limit, ratio and verdict, and the parts skipped", () => {
    const table = docsTable(sample(), "run.json");
    expect(table).toContain("Test CPU, 2 logical cores, 24.0 GiB, kernel variant v4");
    expect(table).toContain("Not in this run: streaming (K3_BENCH_SKIP_STREAMING=1).");
    expect(table).toContain("| bf16 T=1 \\| 2 threads | 28.80 GB/s | memory read: 32.00 GB/s | 0.9000x | >= 0.85 (issue 12): met |");
    expect(table).toContain("| a slow row | 8.000 GB/s | memory read: 32.00 GB/s | 0.2500x | 0.5-2 (issue 9): **not met** |");
    expect(table).toContain("| memory read | 32.00 GB/s | (a limit of this machine) |  |  |");
  });

  test("README's table holds only the headline figures the run has", () => {
    const r = sample();
    r.parts[0]!.figures[1]!.id = readmeFigureIds[0];
    const table = readmeTable(r, "bench/results/run.json");
    expect(table).toContain("bf16 T=1");
    expect(table).not.toContain("a slow row");
  });

  test("numbers keep four significant digits", () => {
    expect([0, 0.000123456, 0.5, 12.345, 123.45, 1234.5].map(formatNumber)).toEqual(["0", "0.000123", "0.5000", "12.35", "123.5", "1235"]);
  });

  test("a document needs exactly one pair of markers", () => {
    expect(replaceBetween(`a\n${docsMarkers.begin}\nold\n${docsMarkers.end}\nb`, docsMarkers, "new", "d.md")).toBe(`a\n${docsMarkers.begin}\nnew\n${docsMarkers.end}\nb`);
    expect(() => replaceBetween("no markers", docsMarkers, "x", "d.md")).toThrow(/d\.md: needs one/);
    expect(() => replaceBetween(`${docsMarkers.begin}${docsMarkers.begin}${docsMarkers.end}`, docsMarkers, "x", "d.md")).toThrow(/needs one/);
  });

  test("the newest run is chosen by its own date, and a broken file in the folder is refused by name", () => {
    const dir = mkdtempSync(join(tmpdir(), "k3-bench-report-"));
    const older = sample();
    const newer = { ...sample(), date: "2026-02-01T00:00:00.000Z" };
    writeFileSync(join(dir, "z-older.json"), renderResults(older));
    writeFileSync(join(dir, "a-newer.json"), renderResults(newer));
    expect(newestResults(dir)).toBe(join(dir, "a-newer.json"));
    writeFileSync(join(dir, "broken.json"), "{}");
    expect(() => newestResults(dir)).toThrow(/broken\.json: format/);
    expect(() => newestResults(join(dir, "none"))).toThrow(/no results files/);
  });

  test("docs/benchmarks.md and README.md hold exactly what the newest kept run generates", () => {
    const newest = newestResults(resultsDir);
    for (const [path, current, generated] of generate(newest, root)) {
      expect({ path, text: current }).toEqual({ path, text: generated });
    }
    const docs = readFileSync(join(root, "docs/benchmarks.md"), "utf8");
    expect(docs).toContain(`bench/results/${newest.split("/").pop()}`);
  });
});
