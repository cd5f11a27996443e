/**
 * The compressed trunk (issue 25) on the K3-width checkpoint, whose bf16 matrices are drawn from
 * a normal distribution and truncated (tools/k3width/generate.ts), in one run:
 *   - the stored size against the plain pack (target at most 75%), with the bits per weight of
 *     the code and of the alternatives its block statistics price (an ideal entropy coder of
 *     the exponent, a fixed 4-bit exponent field);
 *   - decode GB/s on 1 and on 2 threads (per core: the 1-thread figure) against the disk's
 *     O_DIRECT bandwidth on the same file system, measured right after;
 *   - dist/k3 streamed at --trunk-gb 1.5 from the plain and from the compressed pack (target:
 *     s/token at most 0.85x plain, the same ids), and at the smallest budget of a scan where the
 *     compressed pack pins more layers than the plain one;
 *   - the entropy of the experts' MXFP4 codes and E8M0 scales, of the demo model (trained) and of
 *     K3-width, and what an ideal code of them would save.
 *
 * `bun run bench/compressed.ts` alone, or part of `bun run bench`.
 */
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { loadConfig } from "../src/checkpoint/config.ts";
import { indexCheckpoint } from "../src/checkpoint/safetensors.ts";
import { DirectFile, readCapacity } from "../src/native/file.ts";
import { initPool } from "../src/native/kernel-runtime.ts";
import { NativeBuffer } from "../src/native/memory.ts";
import { blockCount, trunkEntryBytes } from "../src/native/trunk-code.ts";
import { measureCode, timeDecode } from "../src/doctor/codec-probe.ts";
import { planCompressedTrunk, planTrunk } from "../src/plan/trunk-plan.ts";
import { stagingPiece } from "../src/weights/compressed-trunk.ts";
import { openPackedTrunk } from "../src/weights/streamed-trunk.ts";
import { TensorReader } from "../src/weights/tensor-reader.ts";
import { readTrunkManifest, type TrunkManifest } from "../src/weights/trunk-file.ts";
import { layerLayout } from "../src/weights/trunk-layout.ts";
import { executablePath } from "../tools/build.ts";
import { benchPaths, directPass, ensureExecutable, prepare, runStreamedK3, slug, type StreamingPaths } from "./streaming.ts";
import { Figures, percent, times, type PartReport } from "./results.ts";

const progress = (line: string) => process.stderr.write(`[compressed] ${line}\n`);
const generation = 3;
const cacheGb = 3.6; // every routed expert cached: the trunk is what the runs read
const promptIds = "1,2,3,4,5";
const demoDir = resolve(import.meta.dir, "../assets/demo");

export interface CodeStats {
  plainBytes: number;
  storedBytes: number;
  weights: number;
  /** Order-0 entropy of the bf16 exponents, bits; escapes of a fixed 4-bit field (values outside a 15-wide window). */
  exponentEntropy: number;
  fixed4Bits: number;
}

export interface Run {
  label: string;
  secondsPerToken: number;
  ids: number[];
  pinned: number;
  bytesRead: number;
  bytesDecoded: number;
  load: number;
}

export interface ExpertEntropy {
  label: string;
  codeBits: number;
  scaleBits: number;
  /** What an ideal order-0 code of codes and scales would store, against MXFP4's 4.25 bits a weight. */
  idealShare: number;
}

export interface CompressedBench {
  code: CodeStats;
  decode: { threads: number; gbps: number }[];
  /** The same decoder on blocks that all choose k = 4 (the fixed 4-bit field). */
  fixedFour: { share: number; gbps: number };
  diskMbps: number;
  /** Whether the filesystem granted O_DIRECT for that read. */
  diskDirect: boolean;
  runs: Run[];
  pinBudgetGb: number | undefined;
  experts: ExpertEntropy[];
}

const compressedPaths = (p: StreamingPaths): StreamingPaths => ({ dir: p.dir, trunkDir: `${p.trunkDir}-compressed` });

async function packCompressed(paths: StreamingPaths): Promise<void> {
  const out = compressedPaths(paths).trunkDir;
  progress(`dist/k3 pack-trunk ${paths.dir} ${out} --compress --force`);
  const child = Bun.spawn([executablePath, "pack-trunk", paths.dir, out, "--compress", "--force"], { stdin: "ignore", stdout: "ignore", stderr: "pipe" });
  const [stderr, code] = await Promise.all([new Response(child.stderr).text(), child.exited]);
  for (const line of stderr.trimEnd().split("\n").slice(-3)) progress(`  ${line}`);
  if (code !== 0) throw new Error(`pack-trunk --compress exited ${code}`);
}

const entropy = (counts: ArrayLike<number>) => {
  let total = 0;
  for (let i = 0; i < counts.length; i++) total += counts[i] as number;
  let h = 0;
  for (let i = 0; i < counts.length; i++) {
    const c = counts[i] as number;
    if (c > 0) h -= (c / total) * Math.log2(c / total);
  }
  return h;
};

/** The exponent statistics of every bf16 matrix of the trunk, read from the checkpoint. */
function codeStats(paths: StreamingPaths, plain: TrunkManifest, compressed: TrunkManifest): CodeStats {
  const index = indexCheckpoint(paths.dir);
  const reader = new TensorReader(index);
  const histogram = new Float64Array(256);
  let weights = 0;
  let fixed4Escapes = 0;
  try {
    for (const layer of plain.layers) {
      for (const [name, t] of Object.entries(layer.tensors)) {
        if (t.dtype !== "BF16" || t.shape.length < 2) continue;
        const entry = index.get(name)!;
        const local = new Float64Array(256);
        for (let at = 0; at < entry.nbytes; at += 64 << 20) {
          const bytes = reader.readRange(entry.shard, entry.offset + at, Math.min(64 << 20, entry.nbytes - at));
          const words = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.length >> 1);
          for (let i = 0; i < words.length; i++) local[((words[i] as number) >> 7) & 0xff]! += 1;
          weights += words.length;
        }
        // The best 15-wide window of this matrix: what a fixed 4-bit field would escape.
        let best = 0;
        for (let base = 0; base + 15 <= 256; base++) {
          let inside = 0;
          for (let e = base; e < base + 15; e++) inside += local[e] as number;
          best = Math.max(best, inside);
        }
        fixed4Escapes += local.reduce((a, b) => a + b, 0) - best;
        for (let e = 0; e < 256; e++) histogram[e]! += local[e] as number;
      }
    }
  } finally {
    reader.close();
  }
  return {
    plainBytes: plain.layers.reduce((sum, l) => sum + l.payload_bytes, 0),
    storedBytes: compressed.layers.reduce((sum, l) => sum + (l.stored_bytes ?? 0), 0),
    weights, exponentEntropy: entropy(histogram), fixed4Bits: 12 + (8 * fixed4Escapes) / weights,
  };
}

/** Decode GB/s of the largest compressed layer, held in memory, at `threads` compute threads (no checksums: the per-token path). */
function decodeRate(dir: string, manifest: TrunkManifest, threads: number): number {
  const layer = manifest.layers.reduce((a, b) => (b.payload_bytes > a.payload_bytes ? b : a));
  const codec = manifest.codec!;
  const stored = NativeBuffer.allocate(readCapacity(layer.nbytes), "bench: a stored layer", "read-target");
  const decoded = NativeBuffer.allocate(layer.payload_bytes, "bench: a decoded layer", "read-target");
  const file = new DirectFile(join(dir, "trunk.bin"));
  try {
    file.readInto(layer.file_off, layer.nbytes, stored);
    const blocks = blockCount(layer.payload_bytes, codec.block_bytes);
    const tableBytes = blocks * trunkEntryBytes;
    const table = stored.u8(0, tableBytes).slice();
    initPool(threads);
    return timeDecode({
      layer: layer.layer, table, first: 0, count: blocks, src: stored.u8(tableBytes, layer.stored_bytes! - tableBytes), srcBytes: layer.stored_bytes! - tableBytes,
      srcBase: tableBytes, dst: decoded.ptr, dstBytes: layer.payload_bytes, blockBytes: codec.block_bytes, verify: false,
    });
  } finally {
    initPool();
    file.close();
    stored.free();
    decoded.free();
  }
}

/**
 * The fixed 4-bit exponent field, timed with the same decoder: words whose exponents spread
 * evenly over 15 values make every block choose k = 4 planes and no escapes. Returns the stored
 * share and decode GB/s on one thread.
 */
export function fixedFourBitRate(): { share: number; gbps: number } {
  const { storedShare, gbps } = measureCode((words) => {
    let x = 0x9e3779b9;
    for (let i = 0; i < words.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      const r = x >>> 0;
      words[i] = (r & 0x807f) | ((112 + (r >>> 8) % 15) << 7);
    }
  }, [1]);
  return { share: storedShare, gbps: gbps[0] as number };
}

/** The first budget of a scan at which the compressed plan pins more layers than the plain one. */
function pinningBudgetGb(paths: StreamingPaths): number | undefined {
  const { config } = loadConfig(join(paths.dir, "config.json"));
  const index = indexCheckpoint(paths.dir);
  const layouts = Array.from({ length: config.numLayers }, (_, l) => layerLayout(index, config, l));
  const reader = new TensorReader(index);
  try {
    const plain = openPackedTrunk(paths.trunkDir, layouts, reader);
    const compressed = openPackedTrunk(compressedPaths(paths).trunkDir, layouts, reader);
    const piece = stagingPiece(compressed.compressed!.largestStoredBytes);
    for (let gb = 1.5; gb <= 12; gb += 0.25) {
      const bytes = gb * 1e9;
      const c = planCompressedTrunk(compressed.compressed!.storedCosts, compressed.compressed!.decodedSlotBytes, bytes, piece);
      if (c.pinned > planTrunk(plain.layerCosts, bytes).pinned && !c.raised) return gb;
    }
    return undefined;
  } finally {
    reader.close();
  }
}

async function streamedRun(paths: StreamingPaths, label: string, trunkGb: number): Promise<Run> {
  const run = await runStreamedK3(paths, `${label}: dist/k3 --trunk ${paths.trunkDir} --trunk-gb ${trunkGb}`, ["--ids", promptIds, "--gen", String(generation)], { trunkGb, cacheGb }, progress);
  const r = JSON.parse(run.stdout) as {
    seconds_per_token: number; generated_ids: number[]; plan: { trunk: { plan: { pinned: number } } };
    trunk_stats: { bytes_read: number; bytes_decoded: number };
  };
  return {
    label, secondsPerToken: r.seconds_per_token, ids: r.generated_ids, pinned: r.plan.trunk.plan.pinned,
    bytesRead: r.trunk_stats.bytes_read, bytesDecoded: r.trunk_stats.bytes_decoded, load: run.load,
  };
}

/** Order-0 entropy of the routed experts' MXFP4 nibbles and E8M0 scale bytes of a checkpoint. */
function expertEntropy(label: string, dir: string, most = 64): ExpertEntropy {
  const index = indexCheckpoint(dir);
  const reader = new TensorReader(index);
  const codes = new Float64Array(16);
  const scales = new Float64Array(256);
  try {
    const names = [...index.names()].filter((n) => n.includes(".experts."));
    const packed = names.filter((n) => n.endsWith(".weight_packed")).slice(0, most * 3);
    const scaleNames = names.filter((n) => n.endsWith(".weight_scale")).slice(0, most * 3);
    for (const name of packed) {
      const bytes = reader.readRaw(index.get(name)!);
      for (let i = 0; i < bytes.length; i++) {
        codes[(bytes[i] as number) & 15]! += 1;
        codes[(bytes[i] as number) >> 4]! += 1;
      }
    }
    for (const name of scaleNames) {
      const bytes = reader.readRaw(index.get(name)!);
      for (let i = 0; i < bytes.length; i++) scales[bytes[i] as number]! += 1;
    }
  } finally {
    reader.close();
  }
  const codeBits = entropy(codes);
  const scaleBits = entropy(scales);
  return { label, codeBits, scaleBits, idealShare: (codeBits + scaleBits / 32) / 4.25 };
}

export async function benchCompressed(paths: StreamingPaths = benchPaths()): Promise<CompressedBench> {
  await ensureExecutable();
  await prepare(paths);
  await packCompressed(paths);
  const plain = readTrunkManifest(paths.trunkDir);
  const compressed = readTrunkManifest(compressedPaths(paths).trunkDir);
  progress("exponent statistics of the checkpoint's bf16 matrices");
  const code = codeStats(paths, plain, compressed);
  const decode = [1, 2].map((threads) => {
    const gbps = decodeRate(compressedPaths(paths).trunkDir, compressed, threads);
    progress(`decode, ${threads} thread(s): ${gbps.toFixed(2)} GB/s of bf16 out (load average ${(loadavg()[0] ?? 0).toFixed(2)})`);
    return { threads, gbps };
  });
  const fixedFour = fixedFourBitRate();
  progress(`k = 4 blocks (a fixed 4-bit exponent field): ${(100 * fixedFour.share).toFixed(1)}% stored, ${fixedFour.gbps.toFixed(2)} GB/s on 1 thread`);
  const disk = directPass(paths.trunkDir, { kind: "chunks", bytes: 64 << 20, depth: 4 });
  progress(`O_DIRECT read of the plain trunk.bin: ${disk.mbps.toFixed(0)} MB/s`);
  const runs: Run[] = [];
  runs.push(await streamedRun(paths, "plain", 1.5));
  runs.push(await streamedRun(compressedPaths(paths), "compressed", 1.5));
  const pinBudgetGb = pinningBudgetGb(paths);
  if (pinBudgetGb !== undefined) {
    runs.push(await streamedRun(paths, "plain", pinBudgetGb));
    runs.push(await streamedRun(compressedPaths(paths), "compressed", pinBudgetGb));
  }
  progress("expert entropy");
  const experts = [expertEntropy("demo (trained)", demoDir), expertEntropy("K3-width", paths.dir)];
  return { code, decode, fixedFour, diskMbps: disk.mbps, diskDirect: disk.direct, runs, pinBudgetGb, experts };
}

export function compressedReport(b: CompressedBench): PartReport {
  const figures = new Figures("compressed");
  const c = b.code;
  const stored = figures.add("stored", "K3-width trunk (bf16 ~ N(0, 0.015^2) truncated) packed with --compress: stored size", c.storedBytes / 1e9, "GB",
    { what: "the plain pack", value: c.plainBytes / 1e9, unit: "GB" }, { max: 0.75, source: "issue 25" });
  const bits = figures.add("bits.code", "bits per weight of this code (table and headers included)", 16 * (stored.ratio ?? NaN), "bits",
    { what: "an ideal entropy coder of the exponent (8 + its order-0 entropy)", value: 8 + c.exponentEntropy, unit: "bits" });
  const fixed4 = figures.add("bits.fixed4", "bits per weight of a fixed 4-bit exponent field (escapes outside each matrix's best 15-wide window)", c.fixed4Bits, "bits",
    { what: "this code", value: bits.value, unit: "bits" });
  const entropyBits = figures.add("bits.exponent_entropy", "order-0 entropy of the trunk's bf16 exponents", c.exponentEntropy, "bits", { what: "the exponent's 8 bits", value: 8, unit: "bits" });
  const diskGb = b.diskMbps / 1000;
  const disk = figures.add("disk", "O_DIRECT read of the plain trunk.bin (64 MB x 4 in flight)", diskGb, "GB/s", "a limit of this machine, measured in this part: decode is set against it");
  const decode = b.decode.map((d) => figures.add(`decode.threads${d.threads}`, `decode of the largest compressed layer, ${d.threads} thread${d.threads > 1 ? "s" : ""} (no checksums: the per-token path), GB/s of bf16 out`,
    d.gbps, "GB/s", { what: "the disk's O_DIRECT read", value: diskGb, unit: "GB/s" }));
  const fixedFour = figures.add("decode.fixed4", `the same decoder on blocks that all choose k = 4 (a fixed 4-bit field, ${(100 * b.fixedFour.share).toFixed(1)}% stored), 1 thread`, b.fixedFour.gbps, "GB/s",
    { what: "the decode of the real blocks, 1 thread", value: b.decode[0]?.gbps ?? NaN, unit: "GB/s" });
  const lines = [
    `compressed trunk (K3-width, bf16 ~ N(0, 0.015^2) truncated): ${(stored.limit?.value ?? NaN).toFixed(3)} GB plain -> ${stored.value.toFixed(3)} GB stored, ` +
      `${percent(stored, 1)} (target at most 75%: ${stored.target?.met ? "met" : "not met"})`,
    `  bits per weight: this code ${bits.value.toFixed(2)} (table and headers included); an ideal entropy coder of the exponent ${(bits.limit?.value ?? NaN).toFixed(2)} ` +
      `(exponent entropy ${entropyBits.value.toFixed(2)} bits); a fixed 4-bit exponent field ${fixed4.value.toFixed(2)} ` +
      `(timed on blocks that all choose k = 4: ${fixedFour.value.toFixed(2)} GB/s on 1 thread)`,
    `  decode: ${decode.map((d, i) => `${d.value.toFixed(2)} GB/s on ${b.decode[i]!.threads} thread${b.decode[i]!.threads > 1 ? "s" : ""}`).join(", ")}; the disk reads ${disk.value.toFixed(2)} GB/s ` +
      `(O_DIRECT, 64 MB x 4 in flight): one core decodes ${decode[0] ? times(decode[0], 1) : "-"} what the disk delivers`,
  ];
  const failures: string[] = [];
  for (let i = 0; i + 1 < b.runs.length; i += 2) {
    const plain = b.runs[i]!;
    const packed = b.runs[i + 1]!;
    const budget = i === 0 ? "--trunk-gb 1.5" : `--trunk-gb ${b.pinBudgetGb}`;
    const f = figures.add(`${slug(budget)}.s_per_token`, `K3-width, ${budget}, --cache-gb ${cacheGb}: the compressed pack's s/token (${packed.pinned} pinned, ${(packed.bytesDecoded / 1e9).toFixed(2)} GB decoded)`,
      packed.secondsPerToken, "s/token", { what: `the plain pack's (${plain.pinned} pinned)`, value: plain.secondsPerToken, unit: "s/token" },
      i === 0 ? { max: 0.85, source: "issue 25" } : undefined);
    const read = figures.add(`${slug(budget)}.read`, `K3-width, ${budget}: trunk bytes read from disk, compressed`, packed.bytesRead / 1e9, "GB",
      { what: "plain", value: plain.bytesRead / 1e9, unit: "GB" });
    const same = JSON.stringify(plain.ids) === JSON.stringify(packed.ids);
    if (!same) failures.push(`${budget}: the compressed pack generated other ids than the plain one`);
    lines.push(
      `  ${budget}, --cache-gb ${cacheGb}: plain ${plain.secondsPerToken.toFixed(3)} s/token (${plain.pinned} pinned, ${(read.limit?.value ?? NaN).toFixed(2)} GB read), ` +
        `compressed ${f.value.toFixed(3)} s/token (${packed.pinned} pinned, ${read.value.toFixed(2)} GB read, ${(packed.bytesDecoded / 1e9).toFixed(2)} GB decoded): ` +
        `${times(f)}${f.target ? ` (target at most 0.85x: ${f.target.met ? "met" : "not met"})` : ""}; load ${plain.load.toFixed(2)} / ${packed.load.toFixed(2)}; ids ${same ? "identical" : "DIFFER (FAIL)"}`,
    );
  }
  if (b.pinBudgetGb === undefined) lines.push("  no budget of the scan pins more layers compressed than plain");
  for (const e of b.experts) {
    const key = slug(e.label.split(" ")[0] as string);
    const codes = figures.add(`experts.${key}.codes`, `experts, ${e.label}: order-0 entropy of the MXFP4 codes`, e.codeBits, "bits", { what: "the code's 4 bits", value: 4, unit: "bits" });
    const scales = figures.add(`experts.${key}.scales`, `experts, ${e.label}: order-0 entropy of the E8M0 scales`, e.scaleBits, "bits", { what: "the scale's 8 bits", value: 8, unit: "bits" });
    const ideal = figures.add(`experts.${key}.ideal`, `experts, ${e.label}: what an ideal order-0 code would store, bits a weight`, 4.25 * e.idealShare, "bits",
      { what: "MXFP4's 4.25 bits a weight", value: 4.25, unit: "bits" });
    lines.push(`  experts, ${e.label}: MXFP4 codes ${codes.value.toFixed(3)} bits of 4, E8M0 scales ${scales.value.toFixed(3)} bits of 8; an ideal code would store ${percent(ideal, 1)} (compress only below 90%)`);
  }
  return {
    lines, figures: figures.list, failures,
    disk: [{ what: "O_DIRECT read of the plain K3-width trunk.bin, 64 MB x 4 in flight (compressed)", value: disk.value, unit: "GB/s", direct: b.diskDirect }],
  };
}

if (import.meta.main) {
  const report = compressedReport(await benchCompressed());
  for (const line of report.lines) console.log(line);
  process.exitCode = report.failures.length > 0 ? 1 : 0;
}
