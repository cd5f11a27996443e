/**
 * `k3 doctor [model_dir] [--trunk DIR] [budgets] [--json]` (runtime.md 11.1, done the intended
 * way): can this machine run Kimi K3, how fast will it be here, and what is the exact next command?
 *
 * Sections: platform; CPU (cores, SIMD features, the kernel variant libk3 selected and the ones
 * it could run); memory and the preset it fits, keyed on MemAvailable; free space where the
 * model lives; the disk measured the way k3 reads it (the trunk's sequential chunks in flight,
 * and random one-expert O_DIRECT reads at queue depths 1, 4, 8 and 16, on trunk.bin and a shard,
 * else on a temporary probe file that is removed); this machine's kernel and memory rates; the
 * forecast (src/plan/forecast.ts) for each preset that fits, or for the budgets given; the model
 * directory and the packed trunk. Only a machine that cannot run k3 at all fails; everything
 * else is a warning. Every fact also lands in one JSON object (`--json`).
 */
import { closeSync, existsSync, fsyncSync, openSync, readdirSync, rmSync, statSync, writeSync } from "node:fs";
import { platform } from "node:os";
import { join, resolve } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { indexCheckpoint } from "../checkpoint/safetensors.ts";
import { K3Error } from "../errors.ts";
import { autoBudget, budgetRequest, resolveBudgets, trunkBudgetGiven, type BudgetAction, type MemoryFacts } from "../plan/budget.ts";
import { expertReadsInFlight, forecastOf, tokenCensus, type Forecast, type ForecastBudget, type ModelCensus } from "../plan/forecast.ts";
import { findPreset } from "../plan/presets.ts";
import { kernelVariant, type KernelVariant } from "../native/kernel-runtime.ts";
import { trunkReadPattern } from "../native/file.ts";
import { kernelsChoice } from "../report/plan-report.ts";
import { budgetGb, formatBytes } from "../units.ts";
import { openPackedTrunk } from "../weights/streamed-trunk.ts";
import { readTrunkManifest, trunkBinName } from "../weights/trunk-file.ts";
import { TensorReader } from "../weights/tensor-reader.ts";
import { layerLayout } from "../weights/trunk-layout.ts";
import { measureCodec } from "./codec-probe.ts";
import { expertReadBytes, measureFile, measureSequential, prepareReaders, type DeviceMeasurement, type SequentialMeasurement } from "./device-bandwidth.ts";
import { measureMachineSpeed, type MachineSpeed } from "./machine-speed.ts";
import { cpuFacts, freeBytes, gibTruncated, memoryFacts, type CpuFacts } from "./machine.ts";
import { releaseCensus, releaseShards, releaseTotalBytes } from "../fetch/release-shards.ts";
import { budgetCensus, tensorBudget } from "./tensor-budget.ts";

/** RAM-to-preset thresholds, keyed on MemAvailable in GiB (runtime.md 11.1). */
export const presetThresholds: readonly { minGib: number; preset: string; expectation: string }[] = [
  { minGib: 192, preset: "server", expectation: "~6 s/token" },
  { minGib: 96, preset: "workstation", expectation: "~6-20 s/token" },
  { minGib: 32, preset: "desktop", expectation: "~24 s/token" },
  { minGib: 10, preset: "laptop", expectation: "~27 s/token" },
];

/** The packed trunk of the release (runtime.md 11.2: packing needs another ~109 GB). */
export const releaseTrunkBytes = 109e9;
export const expectationSource = "v1.0.0 anchors from a 124-core machine with fast NVMe; the streaming tiers scale with the disk, the resident tier with cores";
const toolFiles = ["config.json", "tiktoken.model", "tokenizer_config.json"] as const;
const probeBytes = 256 * 1024 * 1024;
const doctorReads = 16;
const doctorDepths = [1, 4, 8, 16] as const;
/** k3's I/O threads (zig/io/reader_pool.zig default_threads): no more expert reads are in flight. */
const ioThreads = 8;
/** How much of the file the trunk-pattern measurement reads. */
const sequentialBytes = 1 << 30;

export function recommendPreset(availableBytes: number): (typeof presetThresholds)[number] | undefined {
  const gib = gibTruncated(availableBytes);
  return presetThresholds.find((t) => gib >= t.minGib);
}

/** Why k3 cannot run here at all, or undefined. */
export function cannotRun(cpu: CpuFacts, os: string = platform()): string | undefined {
  if (os !== "linux" && os !== "darwin" && os !== "win32") return `k3 has no build for ${os}`;
  if (cpu.arch !== "x64" && cpu.arch !== "arm64") return `k3 has no kernels for ${cpu.arch}`;
  if (cpu.missingRequired.length > 0) {
    return `this CPU lacks ${cpu.missingRequired.map((f) => f.toUpperCase()).join(" and ")}; k3's x86-64 build needs AVX2 and FMA (x86-64-v3)`;
  }
  return undefined;
}

export interface DoctorOptions {
  modelDir: string | undefined;
  trunkDir: string | undefined;
  /** Skip the disk measurement (it reads the disk for a few seconds). */
  skipDisk: boolean;
  /** The budget options as given (--preset, --trunk-gb, --cache-gb), in argv order; empty: every preset that fits. */
  budgets: readonly BudgetAction[];
}

/** One forecast row, as `--json` carries it. */
export interface ForecastFacts {
  label: string;
  trunk: "resident" | "streamed";
  trunk_gb: number | null;
  cache_gb: number;
  pinned_layers: number;
  layers: number;
  trunk_disk_bytes: number;
  expert_picks: number;
  cache_slots: number;
  expert_hit_share: number;
  expert_disk_bytes: number;
  expert_disk_bytes_no_reuse: number;
  ram_bytes: number;
  expert_disk_rate: { used: string; mb_per_second: number } | null;
  seconds_per_token: { expected: number | null; low: number | null; high: number | null };
  seconds: { trunk_disk: number | null; expert_disk: number | null; kernels: number; memory_floor: number; compute_floor: number };
  binds: string | null;
}

/** Everything the doctor found, as `k3 doctor --json` prints it. */
export interface DoctorFacts {
  platform: string;
  arch: string;
  cpu: { model: string; cores: number; features: string[] | null };
  kernels: { selected: string; description: string; runnable: string[]; threads: number } | null;
  memory: { total_bytes: number | null; available_bytes: number; source: string; preset: string | null };
  storage: { path: string; free_bytes: number } | null;
  disk: {
    expert_reads: { path: string; direct: boolean; read_bytes: number; reads: number; depths: { depth: number; mb_per_second: number }[] };
    trunk_reads: { path: string; direct: boolean; chunk_bytes: number; depth: number; bytes: number; mb_per_second: number };
  } | null;
  speed: { threads: number; memory_gb_per_second: number; fma_gflops: number; bf16_gb_per_second: number; mxfp4_g_weights_per_second: number; mxfp4_gb_per_second: number } | null;
  forecast: { model: string; trunk_disk_rate: string | null; expert_assumption: string; rows: ForecastFacts[] } | null;
  reference: { source: string; expectation: string | null };
  model: { dir: string; shards: number } | null;
  trunk: { dir: string; matches: boolean } | null;
  warnings: string[];
  failures: string[];
  result: string;
  next: string[];
}

export interface DoctorResult {
  fail: boolean;
  warnings: number;
  preset: string | undefined;
  facts: DoctorFacts;
}

export class DoctorReport {
  readonly #out: (line: string) => void;
  readonly warnings: string[] = [];
  readonly failures: string[] = [];

  constructor(out: (line: string) => void) {
    this.#out = out;
  }

  /** A section's line; an empty section continues the one above. */
  info(section: string, text: string): void {
    this.#out(section === "" ? `  ${"".padEnd(9)}  ${text}` : `  ${section.padEnd(9)}: ${text}`);
  }

  warn(section: string, text: string): void {
    this.warnings.push(`${section}: ${text}`);
    this.#out(`  WARN ${section}: ${text}`);
  }

  fail(section: string, text: string): void {
    this.failures.push(`${section}: ${text}`);
    this.#out(`  FAIL ${section}: ${text}`);
  }

  line(text: string): void {
    this.#out(text);
  }
}

function checkCpu(r: DoctorReport, cpu: CpuFacts): boolean {
  r.info("cpu", `${cpu.model}, ${cpu.cores} core(s) available`);
  if (cpu.features === undefined) {
    r.info("features", "unknown (no /proc/cpuinfo)");
  } else {
    r.info("features", cpu.features.length > 0 ? cpu.features.join(" ") : "none of the notable ones");
  }
  const reason = cannotRun(cpu);
  if (reason) {
    r.info("kernels", "none: libk3 is not loaded on this CPU");
    r.fail("cpu", reason);
    return false;
  }
  return true;
}

/** The variant libk3 selected when it loaded (K3_ISA, else the widest this CPU runs): what --version prints. */
function checkKernels(r: DoctorReport): KernelVariant {
  const kernels = kernelVariant();
  r.info("kernels", kernelsChoice(kernels));
  return kernels;
}

function checkMemory(r: DoctorReport, memory: MemoryFacts & { source: string }): string | undefined {
  const total = memory.totalBytes === undefined ? "?" : `${gibTruncated(memory.totalBytes)} GiB`;
  r.info("memory", `MemTotal ${total}, MemAvailable ${gibTruncated(memory.availableBytes)} GiB (${memory.source})`);
  const fit = recommendPreset(memory.availableBytes);
  if (!fit) {
    r.warn("memory", `MemAvailable is under ${presetThresholds.at(-1)?.minGib} GiB: below the ~8.2 GB floor for running the checkpoint (k3 demo and the tests still run)`);
    return undefined;
  }
  const preset = findPreset(fit.preset);
  r.info("preset", `${fit.preset} (trunk ${preset?.trunkGb} GB, expert cache ${preset?.cacheGb} GB), keyed on MemAvailable`);
  return fit.preset;
}

/** Release shards present in `dir` at their published size, by bytes. */
function releaseBytesPresent(dir: string | undefined): number {
  if (!dir) return 0;
  return releaseShards.reduce((sum, s) => {
    const path = join(dir, s.name);
    return sum + (existsSync(path) && statSync(path).size === s.bytes ? s.bytes : 0);
  }, 0);
}

function checkStorage(r: DoctorReport, o: DoctorOptions, trunkMatches: boolean): DoctorFacts["storage"] {
  const where = o.modelDir ?? ".";
  const free = freeBytes(where);
  if (free === undefined) {
    r.warn("storage", `cannot read the free space at ${resolve(where)}`);
    return null;
  }
  r.info("storage", `${formatBytes(free)} free at ${resolve(where)}`);
  const missingCheckpoint = releaseTotalBytes - releaseBytesPresent(o.modelDir);
  const needed = missingCheckpoint + (trunkMatches ? 0 : releaseTrunkBytes);
  const parts = [
    ...(missingCheckpoint > 0 ? [`${formatBytes(missingCheckpoint)} of the ${formatBytes(releaseTotalBytes)} checkpoint`] : []),
    ...(trunkMatches ? [] : ["a packed trunk (~109 GB)"]),
  ];
  if (free < needed) r.warn("storage", `${formatBytes(needed)} more is needed here: ${parts.join(" and ")}`);
  return { path: resolve(where), free_bytes: free };
}

function largestShard(dir: string | undefined): string | undefined {
  if (!dir || !existsSync(dir) || !statSync(dir).isDirectory()) return undefined;
  const shards = readdirSync(dir).filter((n) => n.endsWith(".safetensors")).map((n) => join(dir, n)).filter((p) => statSync(p).isFile());
  return shards.sort((a, b) => statSync(b).size - statSync(a).size)[0];
}

/** A probe file of pseudo-random bytes (so no filesystem can compress it), flushed to the device. */
function writeProbe(path: string): void {
  const fd = openSync(path, "wx");
  try {
    const block = new Uint8Array(8 * 1024 * 1024);
    let x = 0x9e3779b9;
    for (let i = 0; i < block.length; i += 4) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      block[i] = x & 0xff;
      block[i + 1] = (x >>> 8) & 0xff;
      block[i + 2] = (x >>> 16) & 0xff;
      block[i + 3] = (x >>> 24) & 0xff;
    }
    for (let done = 0; done < probeBytes; done += block.length) {
      block[0] = (done >>> 23) & 0xff;
      writeSync(fd, block, 0, block.length, done);
    }
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

interface DiskFigures {
  experts: DeviceMeasurement;
  trunk: SequentialMeasurement & { path: string };
  probe: boolean;
}

const depthsText = (m: DeviceMeasurement) => m.depths.map((d) => `QD${d.depth} ${d.mbPerSecond.toFixed(1)} MB/s`).join(", ");

/**
 * The disk as k3 reads it: random one-expert reads at each queue depth (on the largest shard),
 * and the trunk's sequential chunks in flight (on trunk.bin when a packed trunk is given, else
 * the same file); a temporary probe file when the model directory has no shard yet.
 */
function checkDisk(r: DoctorReport, o: DoctorOptions): DiskFigures | undefined {
  if (o.skipDisk) {
    r.info("disk", "not measured (--no-disk)");
    return undefined;
  }
  const shard = largestShard(o.modelDir);
  const probe = shard ? undefined : join(o.modelDir ?? ".", `.k3-doctor-probe-${process.pid}.tmp`);
  try {
    if (probe) writeProbe(probe);
    const target = (shard ?? probe) as string;
    const experts = measureFile(target, { reads: doctorReads, depths: doctorDepths });
    const trunkBin = o.trunkDir ? join(o.trunkDir, trunkBinName) : undefined;
    const trunkTarget = trunkBin && existsSync(trunkBin) && statSync(trunkBin).size >= 4096 ? trunkBin : target;
    const trunk = { ...measureSequential(trunkTarget, trunkReadPattern, sequentialBytes), path: trunkTarget };
    const size = experts.readBytes === expertReadBytes ? "one expert" : "the whole file, smaller than one expert";
    const what = (path: string) => (path === probe ? `a ${formatBytes(probeBytes)} probe file (removed)` : path);
    r.info("disk", `${what(target)}: ${doctorReads} random reads of ${experts.readBytes} bytes (${size}) per depth, ${experts.direct ? "O_DIRECT" : "buffered"}: ${depthsText(experts)}`);
    const chunks = trunk.chunkBytes === trunkReadPattern.chunkBytes
      ? `${trunk.chunkBytes >> 20} MiB chunks, ${trunk.depth} in flight`
      : `the whole file in one read (smaller than k3's ${trunkReadPattern.chunkBytes >> 20} MiB chunk)`;
    r.info("", `k3's trunk reads on ${what(trunkTarget)}: ${chunks}, ${formatBytes(trunk.bytes)}: ${trunk.mbPerSecond.toFixed(1)} MB/s`);
    if (!experts.direct || !trunk.direct) r.warn("disk", "the filesystem refused O_DIRECT: these figures include the page cache; k3 reads this disk buffered");
    r.info("", `for the full picture run: k3 devbw ${shard ?? "<a large file on that disk>"} (queue depths 1, 4 and 16)`);
    return { experts, trunk, probe: probe !== undefined };
  } catch (error) {
    if (!(error instanceof K3Error) && !(error as NodeJS.ErrnoException).code) throw error;
    r.warn("disk", `not measured: ${(error as Error).message}`);
    return undefined;
  } finally {
    if (probe) rmSync(probe, { force: true });
  }
}

/** Whether a compressed trunk pays here: this machine's decode speed against its disk. */
function checkCodec(r: DoctorReport, diskMbps: number | undefined): void {
  const c = measureCodec();
  const rates = `decodes ${c.oneThreadGbps.toFixed(2)} GB/s on 1 thread, ${c.allThreadsGbps.toFixed(2)} GB/s on ${c.allThreads} (normal bf16 stored in ${(100 * c.storedShare).toFixed(1)}%)`;
  if (diskMbps === undefined) {
    r.info("codec", `pack-trunk --compress: ${rates}; the disk was not measured, so whether it pays is not known`);
    return;
  }
  const pays = c.oneThreadGbps * 1000 > diskMbps;
  r.info(
    "codec",
    `pack-trunk --compress: ${rates}, against the disk's ${diskMbps.toFixed(0)} MB/s: ` +
      (pays
        ? `it pays for every byte streamed from disk (one core decodes ${((c.oneThreadGbps * 1000) / diskMbps).toFixed(1)}x faster than the disk reads); with the whole trunk pinned, the plain pack is faster`
        : "one core decodes slower than the disk reads: the plain pack is as fast or faster here"),
  );
}

function checkSpeed(r: DoctorReport): MachineSpeed {
  const s = measureMachineSpeed();
  r.info(
    "speed",
    `${s.threads} thread(s): memory read ${(s.memoryBytesPerSecond / 1e9).toFixed(1)} GB/s, f64 FMA peak ${((2 * s.multiplyAddsPerSecond) / 1e9).toFixed(1)} GFLOP/s; ` +
      `k3's kernels at one token: bf16 ${(s.bf16BytesPerSecond / 1e9).toFixed(1)} GB/s of weights, MXFP4 ${(s.mxfp4WeightsPerSecond / 1e9).toFixed(1)} G weights/s`,
  );
  return s;
}

/** The sizes the forecast uses: the checkpoint's headers when there is one, else the release's. */
function forecastModel(r: DoctorReport, modelDir: string | undefined): ModelCensus {
  if (modelDir && largestShard(modelDir)) {
    try {
      const census = budgetCensus(tensorBudget(modelDir));
      if (census) return census;
      r.warn("forecast", `${modelDir}: the headers and config.json do not give routed experts and top-k; forecasting the released model instead`);
    } catch (error) {
      if (!(error instanceof K3Error)) throw error;
      r.warn("forecast", `${error.message}; forecasting the released model instead`);
    }
  }
  return releaseCensus();
}

/** The budgets to forecast: the ones given, else each preset that fits and auto. */
function forecastBudgets(o: DoctorOptions, model: ModelCensus, memory: MemoryFacts): ForecastBudget[] {
  const sizes = { trunkBytes: model.trunkLayers.reduce((a, l) => a + l.bytes, 0), tablesBytes: 2 * model.lmHeadBytes };
  if (o.budgets.length > 0) {
    const b = resolveBudgets(budgetRequest(o.budgets), memory, sizes);
    // As a run would: a trunk budget streams (with --trunk); cache budgets alone leave the trunk resident.
    const streamed = o.trunkDir !== undefined || trunkBudgetGiven(o.budgets) || o.budgets.some((a) => a.kind === "preset");
    const label = streamed ? `--trunk-gb ${budgetGb(b.trunkBytes)} --cache-gb ${budgetGb(b.cacheBytes)}` : `resident trunk, --cache-gb ${budgetGb(b.cacheBytes)}`;
    return [{ label: b.preset ? `--preset ${b.preset} (${label})` : label, trunkBytes: streamed ? b.trunkBytes : undefined, cacheBytes: b.cacheBytes }];
  }
  const gib = gibTruncated(memory.availableBytes);
  const rows: ForecastBudget[] = presetThresholds.filter((t) => gib >= t.minGib).reverse().flatMap((t) => {
    const p = findPreset(t.preset);
    return p ? [{ label: `--preset ${p.name}`, trunkBytes: p.trunkGb * 1e9, cacheBytes: p.cacheGb * 1e9 }] : [];
  });
  try {
    const auto = autoBudget(memory, sizes);
    rows.push({ label: "--preset auto (sized from MemAvailable)", trunkBytes: auto.trunkBytes, cacheBytes: auto.cacheBytes });
  } catch (error) {
    if (!(error instanceof K3Error)) throw error;
  }
  return rows;
}

const seconds = (value: number | undefined) => (value === undefined ? "?" : value >= 10 ? value.toFixed(0) : value >= 1 ? value.toFixed(1) : value.toFixed(2));
const nullable = (value: number | undefined) => value ?? null;

/** The depth of the expert reads the forecast uses: a layer's expected misses, at most the I/O threads, as measured. */
function expertDepth(disk: DiskFigures, inFlight: number): { depth: number; mbPerSecond: number } {
  const want = Math.min(inFlight, ioThreads);
  const measured = disk.experts.depths.filter((d) => d.depth <= want);
  return (measured.at(-1) ?? disk.experts.depths[0]) as { depth: number; mbPerSecond: number };
}

function checkForecast(r: DoctorReport, o: DoctorOptions, memory: MemoryFacts, speed: MachineSpeed, disk: DiskFigures | undefined): DoctorFacts["forecast"] {
  const model = forecastModel(r, o.modelDir);
  const budgets = forecastBudgets(o, model, memory);
  const experts = model.routedExperts;
  const assumption = `routing spreads a token's ${model.expertsPerToken} picks per layer evenly over the ${model.moeLayers > 0 ? experts / model.moeLayers : 0} experts, ` +
    `so a cache of S slots serves S/${experts} of them (the original measured almost no reuse below ~36 GB of cache on the released model); the high end assumes none`;
  r.info("forecast", `per decode token, for ${model.source}, from the rates measured above`);
  r.info("", `experts: ${assumption}`);
  const rows: ForecastFacts[] = [];
  const kernelRates = {
    bf16BytesPerSecond: speed.bf16BytesPerSecond, mxfp4BytesPerSecond: speed.mxfp4BytesPerSecond,
    memoryBytesPerSecond: speed.memoryBytesPerSecond, multiplyAddsPerSecond: speed.multiplyAddsPerSecond,
  };
  for (const budget of budgets) {
    const census = tokenCensus(model, budget);
    const depth = disk ? expertDepth(disk, expertReadsInFlight(model, census)) : undefined;
    const f: Forecast = forecastOf(budget, census, {
      ...kernelRates, trunkDiskBytesPerSecond: disk ? disk.trunk.mbPerSecond * 1e6 : undefined, expertDiskBytesPerSecond: depth ? depth.mbPerSecond * 1e6 : undefined,
    });
    const c = census;
    const trunkPart = budget.trunkBytes === undefined ? "trunk resident" : `${c.pinnedLayers}/${c.layers} layers pinned, trunk ${formatBytes(c.trunkDiskBytes)}`;
    const figure = f.expectedSeconds === undefined
      ? `in RAM ${seconds(f.kernelSeconds)} s; the disk terms need the disk measured (drop --no-disk)`
      : `expect ${seconds(f.expectedSeconds)} s/token (${seconds(f.lowSeconds)}-${seconds(f.highSeconds)}), bound by ${f.binds}`;
    const expertDisk = depth ? `one-expert reads at QD${depth.depth}` : undefined;
    r.info("", `${budget.label}: ${figure}`);
    r.info("", `  from disk: ${trunkPart} + experts ${formatBytes(c.expertDiskBytes)} (${(100 * c.expertHitShare).toFixed(1)}% of ${c.expertPicks} picks cached${expertDisk ? `; ${expertDisk}` : ""}); ` +
      `in RAM ${formatBytes(c.ramBytes)}: kernels ${seconds(f.kernelSeconds)} s (floors: memory ${seconds(f.memoryFloorSeconds)} s, FMA ${seconds(f.computeFloorSeconds)} s)`);
    rows.push({
      label: budget.label, trunk: budget.trunkBytes === undefined ? "resident" : "streamed", trunk_gb: budget.trunkBytes === undefined ? null : budget.trunkBytes / 1e9,
      cache_gb: budget.cacheBytes / 1e9, pinned_layers: c.pinnedLayers, layers: c.layers, trunk_disk_bytes: c.trunkDiskBytes, expert_picks: c.expertPicks,
      cache_slots: c.cacheSlots, expert_hit_share: c.expertHitShare, expert_disk_bytes: c.expertDiskBytes, expert_disk_bytes_no_reuse: c.expertDiskBytesNoReuse, ram_bytes: c.ramBytes,
      expert_disk_rate: expertDisk && depth ? { used: expertDisk, mb_per_second: depth.mbPerSecond } : null,
      seconds_per_token: { expected: nullable(f.expectedSeconds), low: nullable(f.lowSeconds), high: nullable(f.highSeconds) },
      seconds: { trunk_disk: nullable(f.trunkDiskSeconds), expert_disk: nullable(f.expertDiskSeconds), kernels: f.kernelSeconds, memory_floor: f.memoryFloorSeconds, compute_floor: f.computeFloorSeconds },
      binds: f.binds ?? null,
    });
  }
  const trunkUsed = disk ? `k3's trunk reads (${trunkReadPattern.chunkBytes >> 20} MiB x ${trunkReadPattern.depth} in flight), ${disk.trunk.mbPerSecond.toFixed(0)} MB/s` : null;
  if (trunkUsed) r.info("", `disk rates used: trunk ${trunkUsed}; experts at a layer's expected misses in flight (at most the ${ioThreads} I/O threads), as measured above`);
  r.info("", "the range: everything overlapped with the kernels at their floors, to nothing overlapped with no expert reuse");
  return { model: model.source, trunk_disk_rate: trunkUsed, expert_assumption: assumption, rows };
}

function checkModel(r: DoctorReport, dir: string): DoctorFacts["model"] {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    r.warn("model", `${dir} is not a directory`);
    return null;
  }
  const shards = readdirSync(dir).filter((n) => n.endsWith(".safetensors")).sort();
  r.info("model", `${dir}: ${shards.length} shard(s)`);
  if (shards.length !== releaseShards.length) r.warn("model", `${shards.length} shard(s); the release has ${releaseShards.length}`);
  const table = new Map(releaseShards.map((s) => [s.name, s.bytes]));
  const differing = shards.filter((n) => table.get(n) !== statSync(join(dir, n)).size);
  if (shards.length > 0 && differing.length === 0) r.info("", `all ${shards.length} shard(s) match the release table's sizes`);
  else if (differing.length > 0) r.warn("model", `${differing.length} of ${shards.length} shard(s) are not release shards at their published size (k3 verify ${dir} lists them)`);
  const missing = toolFiles.filter((f) => !existsSync(join(dir, f)));
  const present = toolFiles.filter((f) => existsSync(join(dir, f)));
  if (present.length > 0) r.info("", `present: ${present.join(", ")}`);
  for (const f of missing) r.warn("model", `${f} is missing from ${dir}${f === "config.json" ? "" : " (--tok needs it)"}`);
  return { dir, shards: shards.length };
}

/** True when the trunk matches the checkpoint. */
function checkTrunk(r: DoctorReport, trunkDir: string, modelDir: string | undefined): boolean {
  try {
    if (!modelDir) {
      const manifest = readTrunkManifest(trunkDir);
      r.info("trunk", `${trunkDir}: ${manifest.n_layers} packed layers (give <model_dir> to check it matches the checkpoint)`);
      return false;
    }
    const { config } = loadConfig(join(modelDir, "config.json"));
    const index = indexCheckpoint(modelDir);
    const layouts = Array.from({ length: config.numLayers }, (_, layer) => layerLayout(index, config, layer));
    // The pack's source hashes are recomputed from the checkpoint (a few small reads per tensor).
    const reader = new TensorReader(index);
    let packed;
    try {
      packed = openPackedTrunk(trunkDir, layouts, reader);
    } finally {
      reader.close();
    }
    r.info("trunk", `${trunkDir}: matches the checkpoint (${packed.layers.length} layers, ${formatBytes(packed.packedBytes)})`);
    return true;
  } catch (error) {
    if (!(error instanceof K3Error)) throw error;
    r.warn("trunk", `${error.message}; pack it again with k3 pack-trunk`);
    return false;
  }
}

export function runDoctor(o: DoctorOptions, out: (line: string) => void): DoctorResult {
  const r = new DoctorReport(out);
  r.line("k3 doctor");
  const cpu = cpuFacts();
  r.info("platform", `${platform()} ${cpu.arch}`);
  const runnable = checkCpu(r, cpu);
  const kernels = runnable ? checkKernels(r) : undefined;
  // The I/O threads' count is fixed when they first start: enough for the deepest queue.
  if (runnable) prepareReaders(Math.max(...doctorDepths));
  const memory = memoryFacts();
  const preset = checkMemory(r, memory);
  const model = o.modelDir ? checkModel(r, o.modelDir) : null;
  if (o.trunkDir && !runnable) r.info("trunk", "not checked (k3 cannot load its kernels on this CPU)");
  const trunkMatches = o.trunkDir !== undefined && runnable && checkTrunk(r, o.trunkDir, o.modelDir);
  const storage = checkStorage(r, o, trunkMatches);
  let disk: DiskFigures | undefined;
  let speed: MachineSpeed | undefined;
  let forecastFacts: DoctorFacts["forecast"] = null;
  if (runnable) {
    disk = checkDisk(r, o);
    checkCodec(r, disk?.trunk.mbPerSecond);
    speed = checkSpeed(r);
    forecastFacts = checkForecast(r, o, memory, speed, disk);
  } else {
    r.info("disk", "not measured (k3 cannot load its kernels on this CPU)");
  }
  const reference = preset ? presetThresholds.find((t) => t.preset === preset)?.expectation : undefined;
  if (reference) r.info("reference", `${preset}: ${reference} (${expectationSource}; not this machine)`);
  const { result, next } = nextSteps(r, o, runnable, preset, trunkMatches);
  for (const line of [result, ...(next.length > 0 ? ["next:", ...next.map((n) => `  ${n}`)] : [])]) r.line(line);
  const facts: DoctorFacts = {
    platform: platform(), arch: cpu.arch, cpu: { model: cpu.model, cores: cpu.cores, features: cpu.features ?? null },
    kernels: kernels ? { selected: kernels.isa, description: kernels.description, runnable: kernels.runnable, threads: kernels.threads } : null,
    memory: { total_bytes: memory.totalBytes ?? null, available_bytes: memory.availableBytes, source: memory.source, preset: preset ?? null },
    storage,
    disk: disk
      ? {
          expert_reads: { path: disk.probe ? "(probe file, removed)" : disk.experts.path, direct: disk.experts.direct, read_bytes: disk.experts.readBytes, reads: doctorReads, depths: disk.experts.depths.map((d) => ({ depth: d.depth, mb_per_second: d.mbPerSecond })) },
          trunk_reads: { path: disk.probe && disk.trunk.path === disk.experts.path ? "(probe file, removed)" : disk.trunk.path, direct: disk.trunk.direct, chunk_bytes: disk.trunk.chunkBytes, depth: disk.trunk.depth, bytes: disk.trunk.bytes, mb_per_second: disk.trunk.mbPerSecond },
        }
      : null,
    speed: speed
      ? {
          threads: speed.threads, memory_gb_per_second: speed.memoryBytesPerSecond / 1e9, fma_gflops: (2 * speed.multiplyAddsPerSecond) / 1e9,
          bf16_gb_per_second: speed.bf16BytesPerSecond / 1e9, mxfp4_g_weights_per_second: speed.mxfp4WeightsPerSecond / 1e9, mxfp4_gb_per_second: speed.mxfp4BytesPerSecond / 1e9,
        }
      : null,
    forecast: forecastFacts,
    reference: { source: expectationSource, expectation: reference ?? null },
    model, trunk: o.trunkDir ? { dir: o.trunkDir, matches: trunkMatches } : null,
    warnings: r.warnings, failures: r.failures, result, next,
  };
  return { fail: r.failures.length > 0, warnings: r.warnings.length, preset, facts };
}

function nextSteps(r: DoctorReport, o: DoctorOptions, runnable: boolean, preset: string | undefined, trunkMatches: boolean): { result: string; next: string[] } {
  const model = o.modelDir ?? "<model_dir>";
  const trunk = o.trunkDir ?? "~/k3trunk";
  if (!runnable) return { result: "result: this machine cannot run k3 (see FAIL above)", next: [] };
  if (!preset) {
    return {
      result: "result: this machine can run k3 demo and the tests, but not the released checkpoint:\n        running it needs ~10 GB of MemAvailable and ~1.7 TB of disk",
      next: ["k3 demo"],
    };
  }
  const next: string[] = [];
  if (!o.modelDir) next.push(`k3 download ${model} && k3 verify ${model}`);
  if (!trunkMatches) next.push(`k3 pack-trunk ${model} ${trunk}`);
  // --tok and --trunk always: without them the line would fail (no tokenizer) or hold the trunk resident.
  next.push(`k3 ${model} --trunk ${trunk} --preset ${preset} --tok ${model} --prompt "Hello" --gen 8`);
  const warned = r.warnings.length > 0 ? ` (${r.warnings.length} warning(s) above)` : "";
  return { result: `result: this machine can run Kimi K3 with --preset ${preset}${warned}`, next };
}
