/**
 * `k3 doctor [model_dir] [--trunk DIR]` (runtime.md 11.1, done the intended way): can this
 * machine run Kimi K3, how fast should it expect to be, and what is the exact next command?
 *
 * Sections: platform; CPU (cores, SIMD features, the kernel variant k3 will use); memory and the
 * preset it fits, keyed on MemAvailable; free space where the model lives; the disk measured the
 * way k3 reads it (random one-expert O_DIRECT reads at queue depth 1 and 16, on a shard, else
 * on a temporary probe file that is removed); the model directory (shards against the release
 * table, config and tokenizer files); the packed trunk (does it match the checkpoint). Only a
 * machine that cannot run k3 at all fails; everything else is a warning.
 */
import { closeSync, existsSync, fsyncSync, openSync, readdirSync, rmSync, statSync, writeSync } from "node:fs";
import { platform } from "node:os";
import { join, resolve } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { indexCheckpoint } from "../checkpoint/safetensors.ts";
import { K3Error } from "../errors.ts";
import { findPreset } from "../plan/presets.ts";
import { formatBytes } from "../units.ts";
import { openPackedTrunk } from "../weights/streamed-trunk.ts";
import { readTrunkManifest } from "../weights/trunk-file.ts";
import { TensorReader } from "../weights/tensor-reader.ts";
import { layerLayout } from "../weights/trunk-layout.ts";
import { measureCodec } from "./codec-probe.ts";
import { expertReadBytes, measureFile, prepareReaders } from "./device-bandwidth.ts";
import { kernelVariantName } from "./kernel-variant.ts";
import { cpuFacts, freeBytes, gibTruncated, memoryFacts, type CpuFacts } from "./machine.ts";
import { releaseShards, releaseTotalBytes } from "./release-shards.ts";

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
const probeBytes = 128 * 1024 * 1024;
const doctorReads = 16;
const doctorDepths = [1, 16] as const;

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
}

export interface DoctorResult {
  fail: boolean;
  warnings: number;
  preset: string | undefined;
}

export class DoctorReport {
  readonly #out: (line: string) => void;
  warnings = 0;
  failures = 0;

  constructor(out: (line: string) => void) {
    this.#out = out;
  }

  /** A section's line; an empty section continues the one above. */
  info(section: string, text: string): void {
    this.#out(section === "" ? `  ${"".padEnd(9)}  ${text}` : `  ${section.padEnd(9)}: ${text}`);
  }

  warn(section: string, text: string): void {
    this.warnings++;
    this.#out(`  WARN ${section}: ${text}`);
  }

  fail(section: string, text: string): void {
    this.failures++;
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
  r.info("kernels", kernelVariantName(cpu.arch));
  const reason = cannotRun(cpu);
  if (reason) {
    r.fail("cpu", reason);
    return false;
  }
  return true;
}

function checkMemory(r: DoctorReport): string | undefined {
  const memory = memoryFacts();
  const total = memory.totalBytes === undefined ? "?" : `${gibTruncated(memory.totalBytes)} GiB`;
  r.info("memory", `MemTotal ${total}, MemAvailable ${gibTruncated(memory.availableBytes)} GiB (${memory.source})`);
  const fit = recommendPreset(memory.availableBytes);
  if (!fit) {
    r.warn("memory", `MemAvailable is under ${presetThresholds.at(-1)?.minGib} GiB: below the ~8.2 GB floor for running the checkpoint (k3 demo and the tests still run)`);
    return undefined;
  }
  const preset = findPreset(fit.preset);
  r.info("preset", `${fit.preset} (trunk ${preset?.trunkGb} GB, expert cache ${preset?.cacheGb} GB), keyed on MemAvailable`);
  r.info("expect", `${fit.expectation} (${expectationSource})`);
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

function checkStorage(r: DoctorReport, o: DoctorOptions, trunkMatches: boolean): void {
  const where = o.modelDir ?? ".";
  const free = freeBytes(where);
  if (free === undefined) {
    r.warn("storage", `cannot read the free space at ${resolve(where)}`);
    return;
  }
  r.info("storage", `${formatBytes(free)} free at ${resolve(where)}`);
  const missingCheckpoint = releaseTotalBytes - releaseBytesPresent(o.modelDir);
  const needed = missingCheckpoint + (trunkMatches ? 0 : releaseTrunkBytes);
  const parts = [
    ...(missingCheckpoint > 0 ? [`${formatBytes(missingCheckpoint)} of the ${formatBytes(releaseTotalBytes)} checkpoint`] : []),
    ...(trunkMatches ? [] : ["a packed trunk (~109 GB)"]),
  ];
  if (free < needed) r.warn("storage", `${formatBytes(needed)} more is needed here: ${parts.join(" and ")}`);
}

function largestShard(dir: string | undefined): string | undefined {
  if (!dir || !existsSync(dir)) return undefined;
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

/** The best sequential-ish figure the disk section measured, MB/s, or undefined. */
function checkDisk(r: DoctorReport, o: DoctorOptions): number | undefined {
  if (o.skipDisk) {
    r.info("disk", "not measured (--no-disk)");
    return undefined;
  }
  const shard = largestShard(o.modelDir);
  const probe = shard ? undefined : join(o.modelDir ?? ".", `.k3-doctor-probe-${process.pid}.tmp`);
  try {
    if (probe) writeProbe(probe);
    const target = (shard ?? probe) as string;
    const m = measureFile(target, { reads: doctorReads, depths: doctorDepths });
    const figures = m.depths.map((d) => `QD${d.depth} ${d.mbPerSecond.toFixed(1)} MB/s`).join(", ");
    const size = m.readBytes === expertReadBytes ? "one expert" : "the whole file, smaller than one expert";
    const what = shard ? target : `a ${formatBytes(probeBytes)} probe file (removed)`;
    r.info("disk", `${what}: ${doctorReads} random reads of ${m.readBytes} bytes (${size}) per depth, ${m.direct ? "O_DIRECT" : "buffered"}: ${figures}`);
    if (!m.direct) r.warn("disk", "the filesystem refused O_DIRECT: these figures include the page cache; k3 reads this disk buffered");
    r.info("", `for the full picture run: k3 devbw ${shard ?? "<a large file on that disk>"} (queue depths 1, 4 and 16)`);
    return Math.max(...m.depths.map((d) => d.mbPerSecond));
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

function checkModel(r: DoctorReport, dir: string): void {
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    r.warn("model", `${dir} is not a directory`);
    return;
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
  // The I/O threads' count is fixed when they first start: enough for the deepest queue.
  if (runnable) prepareReaders(Math.max(...doctorDepths));
  const preset = checkMemory(r);
  if (o.modelDir) checkModel(r, o.modelDir);
  if (o.trunkDir && !runnable) r.info("trunk", "not checked (k3 cannot load its kernels on this CPU)");
  const trunkMatches = o.trunkDir !== undefined && runnable && checkTrunk(r, o.trunkDir, o.modelDir);
  checkStorage(r, o, trunkMatches);
  if (runnable) checkCodec(r, checkDisk(r, o));
  else r.info("disk", "not measured (k3 cannot load its kernels on this CPU)");
  next(r, o, runnable, preset, trunkMatches);
  return { fail: r.failures > 0, warnings: r.warnings, preset };
}

function next(r: DoctorReport, o: DoctorOptions, runnable: boolean, preset: string | undefined, trunkMatches: boolean): void {
  const model = o.modelDir ?? "<model_dir>";
  const trunk = o.trunkDir ?? "~/k3trunk";
  if (!runnable) {
    r.line("result: this machine cannot run k3 (see FAIL above)");
    return;
  }
  if (!preset) {
    r.line("result: this machine can run k3 demo and the tests, but not the released checkpoint:");
    r.line("        running it needs ~10 GB of MemAvailable and ~1.7 TB of disk");
    r.line("next:");
    r.line("  k3 demo");
    return;
  }
  r.line(`result: this machine can run Kimi K3 with --preset ${preset}${r.warnings > 0 ? ` (${r.warnings} warning(s) above)` : ""}`);
  r.line("next:");
  if (!o.modelDir) r.line(`  k3 download ${model} && k3 verify ${model}`);
  if (!trunkMatches) r.line(`  k3 pack-trunk ${model} ${trunk}`);
  // --tok and --trunk always: without them the line would fail (no tokenizer) or hold the trunk resident.
  r.line(`  k3 ${model} --trunk ${trunk} --preset ${preset} --tok ${model} --prompt "Hello" --gen 8`);
}
