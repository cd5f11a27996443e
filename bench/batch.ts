/**
 * Continuous batching on the K3-width checkpoint (issue 24): 4 prompts through `dist/k3 --batch`
 * decoded together (`--parallel 4`) against the same 4 one after another (`--parallel 1`, the
 * same process shape), in two places:
 *   - streamed at --trunk-gb 1.5, where the trunk read dominates a step: one read serves the 4
 *     sequences, so the target is at least 3x the aggregate ids/s;
 *   - the same trunk budget with every routed expert cached, the trunk read alone;
 *   - resident with every routed expert cached, where compute does: target at least 1.5x;
 * with the bytes read from disk per generated id in both (the trunk's and the experts'), and
 * the ids compared (they must be equal: batching never changes an answer).
 * The load average before each run is printed with it: the machine is shared.
 *
 * `bun run bench/batch.ts` alone, or part of `bun run bench`.
 */
import { writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { executablePath } from "../tools/build.ts";
import { benchPaths, ensureExecutable, prepare, slug, type StreamingPaths } from "./streaming.ts";
import { Figures, times, type PartReport } from "./results.ts";

const progress = (line: string) => process.stderr.write(`[batch] ${line}\n`);
const prompts = 4;
const promptIds = 5;
const generation = 8;
const places = [
  { label: "streamed, --trunk-gb 1.5", args: (p: StreamingPaths) => ["--trunk", p.trunkDir, "--trunk-gb", "1.5", "--cache-gb", "2"], target: 3 },
  // The same trunk budget with every routed expert cached: the trunk read alone, the cost the
  // first place's target assumes dominates (K3-width routes 16 of 64 experts, so 4 rows' union
  // is about 2.7x one row's; the released model's experts are sparser).
  { label: "streamed, --trunk-gb 1.5, every expert cached", args: (p: StreamingPaths) => ["--trunk", p.trunkDir, "--trunk-gb", "1.5", "--cache-gb", "3.6"], target: 3 },
  { label: "resident, every expert cached", args: () => ["--cache-gb", "3.6"], target: 1.5 },
];

interface BatchRun {
  ids: number[][];
  seconds: number;
  generated: number;
  trunkBytes: number;
  expertBytes: number;
  load: number;
}

async function runBatch(paths: StreamingPaths, file: string, parallel: number, extra: string[]): Promise<BatchRun> {
  const load = loadavg()[0] ?? 0;
  const args = [paths.dir, "--batch", file, "--parallel", String(parallel), "--gen", String(generation), ...extra];
  progress(`dist/k3 ${args.join(" ")} (load average ${load.toFixed(2)})`);
  const child = Bun.spawn([executablePath, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  if (code !== 0) throw new Error(`--parallel ${parallel}: dist/k3 exited ${code}: ${stderr.trimEnd().split("\n").slice(-5).join(" | ")}`);
  const summary = stderr.match(/batch: \d+ prompt\(s\), (\d+) generated ids in ([\d.]+) s/);
  const bytes = stderr.match(/trunk_bytes=(\d+) expert_bytes=(\d+)/);
  if (!summary || !bytes) throw new Error(`--parallel ${parallel}: no batch summary on stderr`);
  return {
    ids: stdout.split("\n").filter(Boolean).map((line) => (JSON.parse(line) as { generated_ids: number[] }).generated_ids),
    generated: Number(summary[1]), seconds: Number(summary[2]), trunkBytes: Number(bytes[1]), expertBytes: Number(bytes[2]), load,
  };
}

export interface BatchPlace {
  label: string;
  target: number;
  alone: BatchRun;
  together: BatchRun;
  idsEqual: boolean;
}

export async function benchBatch(paths: StreamingPaths = benchPaths()): Promise<BatchPlace[]> {
  await ensureExecutable();
  await prepare(paths);
  const file = join(tmpdir(), `k3-bench-batch-${process.pid}.txt`);
  // Different prompts, each of 5 ids.
  writeFileSync(file, Array.from({ length: prompts }, (_, p) => Array.from({ length: promptIds }, (_, i) => 1 + ((p * 7919 + i * 104729) % 4000)).join(",")).join("\n") + "\n");
  const results: BatchPlace[] = [];
  for (const place of places) {
    const extra = place.args(paths);
    const alone = await runBatch(paths, file, 1, extra);
    const together = await runBatch(paths, file, prompts, extra);
    results.push({ label: place.label, target: place.target, alone, together, idsEqual: JSON.stringify(alone.ids) === JSON.stringify(together.ids) });
  }
  return results;
}

export function batchReport(places: readonly BatchPlace[]): PartReport {
  const figures = new Figures("batch");
  const lines: string[] = [`batch: ${prompts} prompts of ${promptIds} ids, --gen ${generation}, --parallel ${prompts} against --parallel 1 (dist/k3 --batch)`];
  const failures: string[] = [];
  for (const p of places) {
    const name = slug(p.label);
    const rate = (r: BatchRun) => r.generated / r.seconds;
    const perId = (r: BatchRun) => (r.trunkBytes + r.expertBytes) / Math.max(r.generated, 1) / 1e9;
    const gain = figures.add(`${name}.ids_per_second`, `K3-width, ${p.label}: ${prompts} prompts decoded together (--parallel ${prompts}), generated ids per second`, rate(p.together), "ids/s",
      { what: "the same prompts one after another (--parallel 1)", value: rate(p.alone), unit: "ids/s" }, { min: p.target, source: "issue 24" });
    const read = figures.add(`${name}.read_per_id`, `K3-width, ${p.label}: bytes read from disk per generated id, together`, perId(p.together), "GB/id",
      { what: "one after another", value: perId(p.alone), unit: "GB/id" });
    lines.push(
      `  ${p.label}: ${(gain.limit?.value ?? NaN).toFixed(3)} -> ${gain.value.toFixed(3)} ids/s, ${times(gain)} (target ${p.target}x: ${gain.target?.met ? "met" : "not met"}); ` +
        `read per generated id ${(read.limit?.value ?? NaN).toFixed(3)} -> ${read.value.toFixed(3)} GB; load ${p.alone.load.toFixed(2)} / ${p.together.load.toFixed(2)}; ` +
        `ids ${p.idsEqual ? "identical" : "DIFFER (FAIL)"}`,
    );
    if (!p.idsEqual) failures.push(`${p.label}: --parallel ${prompts} generated other ids than --parallel 1`);
  }
  return { lines, figures: figures.list, failures };
}

if (import.meta.main) {
  const report = batchReport(await benchBatch());
  for (const line of report.lines) console.log(line);
  process.exitCode = report.failures.length > 0 ? 1 : 0;
}
