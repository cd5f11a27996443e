/**
 * `bun run bench/attention.ts`: the latent MLA attention kernel alone at the released MLA widths
 * (96 heads, dn 128, dr 64, dv 128, latent rank 512), one query token over synthetic caches of
 * 1k, 8k and 32k positions: seconds per token per layer against its FMA floor (the f64 FMA peak
 * measured in the same run, with the kernel variant in use), and the cache bytes it reads per
 * second next to this machine's memory read bandwidth, also measured here. The kernel is bound by
 * arithmetic: per position and head, R + dr multiply-adds for the score and R for the value sum
 * (1,088 at released widths, 96 heads: 104,448 per 2,304-byte cache row, 45 per byte), plus the
 * absorb and v-out steps (H · (dn + dv) · R, once per token). Then the planned MLA cache of the
 * released config at 131,072 and 1,048,576 positions, latent against expanded.
 */
import { f32View, NativeBuffer } from "../src/native/memory.ts";
import { memReadSum, mlaLatentAttention, type F32Ref, type MatrixRef } from "../src/native/kernels.ts";
import { initPool } from "../src/native/kernel-runtime.ts";
import { isaInUse } from "../test/support/kernel-hooks.ts";
import { memoryPlan } from "../src/plan/memory-plan.ts";
import { attentionKind } from "../src/checkpoint/tensor-names.ts";
import { releasedConfig } from "../tools/checkpoint/released-config.ts";
import { best, measureFmaPeak } from "./kernels.ts";
import { Figures, percent, verdict, type PartReport } from "./results.ts";

const shape = { heads: 96, dn: 128, dr: 64, dv: 128, rank: 512 };
const positions = [1024, 8192, 32768];
/** Issue 26: one token over 32,768 positions at no more than 2x its FMA floor. */
const floorTarget = 2;

/** f64 multiply-adds of one query token over `n` positions at `shape`. */
export function attentionMacs(n: number, s = shape): number {
  return n * s.heads * (2 * s.rank + s.dr) + s.heads * (s.dn + s.dv) * s.rank;
}

/** A native f32 buffer of `floats` small pseudo-random values. */
function floats(count: number, purpose: string, seed: number): F32Ref & { buffer: NativeBuffer } {
  const buffer = NativeBuffer.allocate(count * 4, purpose, "read-target");
  const view = f32View(buffer.ptr, 0, count);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < count; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    view[i] = ((s >>> 0) / 0x100000000 - 0.5) * 0.2;
  }
  return { ptr: buffer.ptr, length: count, buffer };
}

export interface AttentionRow {
  positions: number;
  seconds: number;
  cacheBytes: number;
  gbPerSecond: number;
  /** Seconds at the FMA peak: multiply-adds / (peak GFLOP/s / 2). */
  floorSeconds: number;
}

export interface AttentionBench {
  threads: number;
  variant: string;
  bandwidthGbPerSecond: number;
  fmaGflops: number;
  rows: AttentionRow[];
  planned: { positions: number; latentBytes: number; expandedBytes: number }[];
}

export function benchAttention(): AttentionBench {
  const threads = initPool();
  const probe = NativeBuffer.allocate(1 << 30, "bandwidth probe", "read-target");
  probe.u8().fill(1);
  const bandwidth = (1 << 30) / best(5, () => memReadSum(probe)) / 1e9;
  probe.free();
  const fmaGflops = measureFmaPeak().gflops;
  const { heads: H, dn, dr, dv, rank: R } = shape;
  // kv_b_proj as shipped: bf16 [H·(dn+dv)][R], here as f32-valued bf16 bits of small numbers.
  const kvbBuffer = NativeBuffer.allocate(H * (dn + dv) * R * 2, "kv_b_proj", "read-target");
  const bits = new Uint16Array(kvbBuffer.u8().buffer, kvbBuffer.u8().byteOffset, H * (dn + dv) * R);
  for (let i = 0; i < bits.length; i++) bits[i] = 0x3c00 + (i % 97); // ~0.0078 .. 0.0088
  const kvb: MatrixRef = { ptr: kvbBuffer.ptr, rows: H * (dn + dv), cols: R, dtype: "BF16" };
  const q = floats(H * (dn + dr), "query", 7);
  const out = floats(H * dv, "output", 8);
  const rows: AttentionRow[] = [];
  for (const n of positions) {
    const ckv = floats(n * R, "latent cache", 11);
    const kr = floats(n * dr, "rope keys", 13);
    const seconds = best(5, () => mlaLatentAttention(q, kvb, ckv, kr, out, 1, n - 1, shape));
    const cacheBytes = n * (R + dr) * 4;
    const floorSeconds = attentionMacs(n) / ((fmaGflops * 1e9) / 2);
    rows.push({ positions: n, seconds, cacheBytes, gbPerSecond: cacheBytes / seconds / 1e9, floorSeconds });
    ckv.buffer.free();
    kr.buffer.free();
  }
  for (const b of [kvbBuffer, q.buffer, out.buffer]) b.free();
  const c = releasedConfig;
  const mlaLayers = Array.from({ length: c.numLayers }, (_, l) => l).filter((l) => attentionKind(c, l) === "mla").length;
  const planned = [131_072, 1_048_576].map((n) => {
    const plan = memoryPlan({
      config: c, layerCount: c.numLayers, positions: n, callTokens: 1, trunk: { mode: "resident", bytes: 0 },
      tablesBytes: 0, expertCacheBytes: 0, baselineBytes: 0,
    });
    const latentBytes = plan.terms.find((t) => t.name === "KV cache")?.bytes ?? 0;
    const expandedBytes = mlaLayers * n * (c.numAttentionHeads * (c.qkNopeHeadDim + c.vHeadDim) + c.qkRopeHeadDim) * 4;
    return { positions: n, latentBytes, expandedBytes };
  });
  return { threads, variant: isaInUse(), bandwidthGbPerSecond: bandwidth, fmaGflops, rows, planned };
}

export function attentionReport(b: AttentionBench): PartReport {
  const figures = new Figures("attention");
  const threads = `${b.variant}, ${b.threads} threads`;
  const peak = figures.add("fma", `f64 FMA peak, ${threads}`, b.fmaGflops, "GFLOP/s", "a limit measured in this part: the floors below are set by it");
  const bandwidth = figures.add("memory", `memory read bandwidth, ${b.threads} threads`, b.bandwidthGbPerSecond, "GB/s", "a limit measured in this part: the cache reads are set against it");
  const lines = [
    `attention: latent MLA, one token, one layer, released widths (96 heads, rank 512, dr 64), ${b.variant}, ${b.threads} threads; ` +
      `f64 FMA peak ${peak.value.toFixed(1)} GFLOP/s, memory read bandwidth ${bandwidth.value.toFixed(1)} GB/s (both measured now)`,
    ...b.rows.map((r) => {
      const step = figures.add(`mla.${r.positions}`, `latent MLA attention, released widths, 1 token over ${r.positions} positions, one layer, ${threads}`, r.seconds * 1000, "ms",
        { what: "its FMA floor (multiply-adds at the f64 FMA peak)", value: r.floorSeconds * 1000, unit: "ms" },
        r.positions === 32768 ? { max: floorTarget, source: "issue 26" } : undefined);
      const cache = figures.add(`mla.${r.positions}.cache_read`, `the same, cache of ${(r.cacheBytes / 1e6).toFixed(1)} MB read`, r.gbPerSecond, "GB/s",
        { what: `memory read bandwidth, ${b.threads} threads`, value: b.bandwidthGbPerSecond, unit: "GB/s" });
      const ratio = step.ratio ?? NaN;
      const target = step.target ? ` (target at most ${floorTarget}x: ${verdict(step)})` : "";
      return `  ${String(r.positions).padStart(6)} positions  ${step.value.toFixed(2).padStart(9)} ms/token/layer  ` +
        `${ratio.toFixed(2)}x its FMA floor of ${(step.limit?.value ?? NaN).toFixed(2)} ms, ${(100 / ratio).toFixed(0)}% of the peak${target}; ` +
        `cache ${(r.cacheBytes / 1e6).toFixed(1)} MB read at ${cache.value.toFixed(2)} GB/s, ${percent(cache)} of bandwidth`;
    }),
    ...b.planned.map((p) => {
      const f = figures.add(`planned_cache.${p.positions}`, `planned MLA cache, released config, ${p.positions} positions (latent)`, p.latentBytes / 1e9, "GB",
        { what: "the expanded cache (keys and values per head)", value: p.expandedBytes / 1e9, unit: "GB" });
      return `  planned MLA cache, released config, ${p.positions} positions: ${f.value.toFixed(2)} GB latent ` +
        `(expanded would be ${((f.limit?.value ?? NaN) / 1e3).toFixed(2)} TB)`;
    }),
  ];
  return { lines, figures: figures.list, failures: [] };
}

if (import.meta.main) for (const line of attentionReport(benchAttention()).lines) console.log(line);
