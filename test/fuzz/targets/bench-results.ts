/**
 * A benchmark results file (bench/results.ts): kept in bench/results/ and read by
 * `bun run bench:report` and the suite. In process only (it is not read by dist/k3).
 */
import { parseResults } from "../../../bench/results.ts";
import { text, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

const results = JSON.stringify({
  format: "k3-bench", version: 1, date: "2026-01-01T00:00:00.000Z", commit: "0123456789abcdef0123456789abcdef01234567", commit_dirty: false, bun: "1.4.5",
  machine: {
    cpu: "a CPU", logical_cores: 2, mem_total_bytes: 25276182528, kernel_variant: "v4", kernel_variants: ["scalar", "v3", "v4"], compute_threads: 2,
    load_average: [0.5, 0.25, 0.1], os: "Linux x64", disk_probes: [{ part: "streaming", what: "O_DIRECT read", value: 2.1, unit: "GB/s", direct: true }],
    bench_env: { K3_BENCH_DIR: null, K3_BENCH_SKIP_STREAMING: "1", K3_BENCH_SKIP_LONG: null },
  },
  parts: [
    {
      name: "kernels", seconds: 40.5, load_before: 0.5, skipped: null, error: null, failures: [],
      figures: [
        { id: "kernels.memory", what: "memory read", value: 33.5, unit: "GB/s", limit: null, limit_reason: "a limit", ratio: null, target: null },
        { id: "kernels.bf16", what: "bf16 T=1", value: 30, unit: "GB/s", samples: [29, 30], limit: { what: "memory read", value: 33.5, unit: "GB/s" }, ratio: 0.8955, target: { min: 0.9, max: null, met: false, source: "issue 12" } },
      ],
    },
    { name: "streaming", seconds: 0, load_before: 0.5, skipped: "K3_BENCH_SKIP_STREAMING=1", error: null, figures: [], failures: [] },
  ],
  failed: false, failures: [],
}, null, 1);

export const benchResultsTarget: FuzzTarget = {
  name: "bench-results",
  about: "bench/results/*.json: parseResults (format, machine facts, figures, limits, ratios, targets, failures)",
  seeds: () => [{ label: "bench-results.json", bytes: utf8(results) }] as Seed[],
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse: (input, seed) => JSON.stringify(parseResults(text(input), seed.label)),
};
