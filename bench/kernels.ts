/**
 * `bun run bench/kernels.ts`: the hot kernels against this machine's memory read bandwidth.
 *
 * - bandwidth: one read of a 1 GiB native buffer (a wrapping integer sum in Zig), by all pool
 *   threads; best of several passes.
 * - bf16 matvec 7168 x 12288 (the KDA o_proj shape, 176 MB of weights, far larger than the
 *   last-level cache): GB/s of weight bytes, T = 1.
 * - MXFP4 matvec 3072 x 3584 (one routed expert's w1: 5.85 MB packed + scales). One matrix fits
 *   in the L3 cache, so the bench rotates through enough distinct experts (> 8x the L3) that
 *   every call streams its weights from DRAM, as the engine's expert cache does.
 * Each figure is measured with 1 thread and with all threads, and divided by the bandwidth.
 * The machine may be shared: best-of-N timings are reported, and a noisy neighbour shows as a
 * low all-threads figure.
 */
import { availableParallelism, loadavg } from "node:os";
import { f32View, NativeBuffer, offsetPointer } from "../src/native/memory.ts";
import { initPool, matmul, matmulMxfp4, memReadSum, type F32Ref } from "../src/native/kernels.ts";

const GB = 1e9;

interface Row {
  what: string;
  threads: number;
  seconds: number;
  gbPerSecond: number;
}

function best(passes: number, run: () => void): number {
  let bestSeconds = Infinity;
  for (let i = 0; i < passes; i++) {
    const start = performance.now();
    run();
    bestSeconds = Math.min(bestSeconds, (performance.now() - start) / 1000);
  }
  return bestSeconds;
}

function floatsOf(buffer: NativeBuffer, floats: number): F32Ref & { a: Float32Array } {
  return { ptr: buffer.ptr, length: floats, a: f32View(buffer.ptr, 0, floats) };
}

/** Pseudo-random bytes (xorshift), fast enough for hundreds of MB. */
function fillRandom(buffer: NativeBuffer, mask = 0xffffffff, or = 0): void {
  const bytes = buffer.u8();
  const words = new Uint32Array(bytes.buffer, bytes.byteOffset, Math.floor(buffer.bytes / 4));
  let s = 0x9e3779b9;
  for (let i = 0; i < words.length; i++) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    words[i] = ((s >>> 0) & mask) | or;
  }
}

export function benchKernels(): Row[] {
  const all = initPool();
  const threadCounts = all > 1 ? [1, all] : [1];
  const rows: Row[] = [];

  // Memory read bandwidth.
  const probeBytes = 1 << 30;
  const probe = NativeBuffer.allocate(probeBytes, "bandwidth probe");
  fillRandom(probe);
  for (const t of threadCounts) {
    initPool(t);
    memReadSum(probe); // warm
    const seconds = best(5, () => memReadSum(probe));
    rows.push({ what: "memory read (1 GiB)", threads: t, seconds, gbPerSecond: probeBytes / seconds / GB });
  }
  probe.free();

  // bf16 matvec 7168 x 12288.
  const outRows = 7168;
  const inCols = 12288;
  const weightBytes = outRows * inCols * 2;
  const w = NativeBuffer.allocate(weightBytes, "bf16 weights");
  // bf16 pairs with exponent bits kept in a normal range (no inf/NaN): mask and or per half
  fillRandom(w, 0xbfffbfff, 0x38003800);
  const x = NativeBuffer.allocate(inCols * 4, "x");
  const xv = floatsOf(x, inCols);
  for (let i = 0; i < inCols; i++) xv.a[i] = Math.sin(i);
  const y = NativeBuffer.allocate(outRows * 4, "y");
  const matrix = { ptr: w.ptr, rows: outRows, cols: inCols, dtype: "BF16" as const };
  for (const t of threadCounts) {
    initPool(t);
    matmul(matrix, xv, floatsOf(y, outRows), 1);
    const seconds = best(10, () => matmul(matrix, xv, floatsOf(y, outRows), 1));
    rows.push({ what: `bf16 matvec ${outRows}x${inCols}`, threads: t, seconds, gbPerSecond: weightBytes / seconds / GB });
  }
  w.free();
  x.free();
  y.free();

  // MXFP4 expert matvec 3072 x 3584, rotating through distinct experts.
  const eRows = 3072;
  const eCols = 3584;
  const packedBytes = (eRows * eCols) / 2;
  const scaleBytes = (eRows * eCols) / 32;
  const expertBytes = packedBytes + scaleBytes;
  const experts = 48; // 281 MB: > 8x a 32 MB L3
  const arena = NativeBuffer.allocate(expertBytes * experts, "experts");
  fillRandom(arena);
  // scale bytes in the released range (120-122), never 255
  const arenaBytes = arena.u8();
  for (let e = 0; e < experts; e++) arenaBytes.fill(121, e * expertBytes + packedBytes, (e + 1) * expertBytes);
  const ex = NativeBuffer.allocate(eCols * 4, "x");
  const exv = floatsOf(ex, eCols);
  for (let i = 0; i < eCols; i++) exv.a[i] = Math.cos(i);
  const ey = NativeBuffer.allocate(eRows * 4, "y");
  const eyv = floatsOf(ey, eRows);
  const expert = (e: number) => ({
    packed: offsetPointer(arena.ptr, e * expertBytes),
    scales: offsetPointer(arena.ptr, e * expertBytes + packedBytes),
    rows: eRows,
    cols: eCols,
  });
  for (const t of threadCounts) {
    initPool(t);
    for (let e = 0; e < experts; e++) matmulMxfp4(expert(e), exv, eyv, 1);
    const seconds = best(3, () => {
      for (let e = 0; e < experts; e++) matmulMxfp4(expert(e), exv, eyv, 1);
    }) / experts;
    rows.push({ what: `MXFP4 matvec ${eRows}x${eCols}`, threads: t, seconds, gbPerSecond: expertBytes / seconds / GB });
  }
  arena.free();
  ex.free();
  ey.free();

  initPool();
  return rows;
}

if (import.meta.main) {
  const load = loadavg()[0] ?? 0;
  if (load > 0.5) {
    console.log(`note: load average ${load.toFixed(2)} on ${availableParallelism()} CPUs before the bench; other work shares the cores and the memory bus, so multi-thread figures may be low`);
  }
  const rows = benchKernels();
  const bandwidth = new Map(rows.filter((r) => r.what.startsWith("memory")).map((r) => [r.threads, r.gbPerSecond]));
  const peak = Math.max(...bandwidth.values());
  console.log(`kernels bench (${rows[rows.length - 1]?.threads ?? 1} threads max); ratios are to the best measured read bandwidth, ${peak.toFixed(1)} GB/s`);
  for (const r of rows) {
    const ratio = r.what.startsWith("memory") ? "" : `  ${((100 * r.gbPerSecond) / peak).toFixed(0).padStart(3)}% of bandwidth`;
    console.log(`${r.what.padEnd(28)} ${String(r.threads).padStart(2)} thr  ${(r.seconds * 1000).toFixed(3).padStart(9)} ms  ${r.gbPerSecond.toFixed(2).padStart(6)} GB/s${ratio}`);
  }
}
