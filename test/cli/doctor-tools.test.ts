/**
 * `k3 doctor`, `k3 budget` and `k3 devbw` through dist/k3 on the fixture models, a packed
 * trunk, the sparse release (test/support/fake-release.ts) and a partial directory: each prints
 * what runtime.md section 11 says, with figures checked against what the test computes itself.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, existsSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/checkpoint/config.ts";
import { indexCheckpoint } from "../../src/checkpoint/safetensors.ts";
import { ranges } from "../../src/doctor/tensor-budget.ts";
import { presetThresholds, type DoctorFacts } from "../../src/doctor/doctor.ts";
import { releaseShards } from "../../src/fetch/release-shards.ts";
import { classifyName } from "../support/tensor-classes.ts";
import { writeSparseRelease } from "../support/fake-release.ts";
import { modelDir } from "../support/fixtures.ts";
import { pseudoRandomBytes } from "../support/fake-hub.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

// The tests are independent dist/k3 runs and run concurrently; a test's time includes the others'.
setDefaultTimeout(60_000);

/** The preset the spec's thresholds give for the MemAvailable the doctor printed. */
function presetFor(stdout: string): string | undefined {
  const gib = Number(stdout.match(/MemAvailable (\d+) GiB/)?.[1]);
  expect(Number.isInteger(gib)).toBe(true);
  return presetThresholds.find((t) => gib >= t.minGib)?.preset;
}

describe.concurrent("k3 doctor", () => {
  const tiny = modelDir("tiny13");
  const trunk = join(tempDir("doctor-trunk"), "trunk");
  const packing = k3Async(["pack-trunk", tiny, trunk]);

  test("on a fixture model with its packed trunk: CPU, memory and preset, storage, disk at two depths, model, trunk, the next command", async () => {
    const packed = await packing;
    expect(packed.code).toBe(0);
    const run = await k3Async(["doctor", tiny, "--trunk", trunk]);
    expect(run.code).toBe(0);
    const out = run.stdout;
    expect(out).toContain(`core(s) available`);
    expect(out).toContain(`${availableParallelism()} core(s) available`);
    expect(out).toMatch(/features : .*avx2.*fma/);
    expect(out).toMatch(/kernels  : (v4|v3|neon|scalar) \([^)]+\); this machine runs [\w, ]+ \(K3_ISA forces one\)\n/);
    expect(out).toMatch(/memory   : MemTotal \d+ GiB, MemAvailable \d+ GiB \(\/proc\/meminfo\)/);
    const preset = presetFor(out);
    if (preset) {
      expect(out).toContain(`preset   : ${preset} (`);
      expect(out).toContain(`reference: ${preset}: ${presetThresholds.find((t) => t.preset === preset)!.expectation} (v1.0.0 anchors`);
    } else {
      expect(out).toContain("below the ~8.2 GB floor");
    }
    expect(out).toMatch(/storage  : [\d.]+ [KMGT]?B free at /);
    // The checkpoint is not the release's, so the whole 1.56 TB is still needed; the trunk is not.
    expect(out).toContain("more is needed here: 1.56 TB of the 1.56 TB checkpoint\n");
    expect(out).toMatch(new RegExp(`disk     : ${tiny}/model-00001-of-00001.safetensors: 16 random reads of \\d+ bytes .* per depth, (O_DIRECT|buffered): QD1 [\\d.]+ MB/s, QD4 [\\d.]+ MB/s, QD8 [\\d.]+ MB/s, QD16 [\\d.]+ MB/s`));
    expect(out).toMatch(new RegExp(`k3's trunk reads on ${trunk}/trunk.bin: the whole file in one read \\(smaller than k3's 64 MiB chunk\\), [\\d.]+ MB: [\\d.]+ MB/s`));
    expect(out).toMatch(/speed    : \d+ thread\(s\): memory read [\d.]+ GB\/s, f64 FMA peak [\d.]+ GFLOP\/s; k3's kernels at one token: bf16 [\d.]+ GB\/s of weights, MXFP4 [\d.]+ G weights\/s/);
    expect(out).toContain(`forecast : per decode token, for the checkpoint in ${tiny}, from the rates measured above`);
    if (preset) expect(out).toMatch(new RegExp(`--preset ${preset}: expect [\\d.]+ s/token \\([\\d.]+-[\\d.]+\\), bound by `));
    expect(out).toMatch(/codec    : pack-trunk --compress: decodes [\d.]+ GB\/s on 1 thread, [\d.]+ GB\/s on \d+ \(normal bf16 stored in (6\d|7[0-4])\.\d%\), against the disk's \d+ MB\/s: (it pays|one core decodes slower)/);
    expect(out).toContain(`model    : ${tiny}: 1 shard(s)`);
    expect(out).toContain("WARN model: 1 shard(s); the release has 96");
    expect(out).toContain("WARN model: 1 of 1 shard(s) are not release shards at their published size");
    expect(out).toContain("WARN model: tiktoken.model is missing");
    expect(out).toContain(`trunk    : ${trunk}: matches the checkpoint (13 layers, `);
    if (preset) {
      expect(out).toContain(`result: this machine can run Kimi K3 with --preset ${preset}`);
      expect(out).not.toContain("k3 pack-trunk");
      expect(out).toContain(`  k3 ${tiny} --trunk ${trunk} --preset ${preset} --tok ${tiny} --prompt "Hello" --gen 8\n`);
    }
  });

  test("--json: one object whose kernel variant is the one --version reports, under K3_ISA too; a forecast row for the budgets given", async () => {
    const variantOf = (version: string) => version.match(/^kernels: (\w+) \(/m)?.[1];
    const runnable = (await k3Async(["--version"])).stdout.match(/this machine runs ([\w, ]+) \(/)?.[1]?.split(", ") ?? [];
    expect(runnable.length).toBeGreaterThan(0);
    // One forced variant besides the default: v3 where the CPU has it (the scalar kernels' rate probe alone takes seconds).
    const forced = runnable.includes("v3") ? "v3" : "scalar";
    const runs = await Promise.all([undefined, forced].map(async (isa) => {
      const env = { K3_ISA: isa };
      return { isa, runs: await Promise.all([k3Async(["--version"], { env }), k3Async(["doctor", tiny, "--cache-gb", "0.5", "--no-disk", "--json"], { env })]) };
    }));
    for (const { isa, runs: [version, doctor] } of runs) {
      expect(doctor.code).toBe(0);
      const facts = JSON.parse(doctor.stdout) as DoctorFacts;
      expect(facts.kernels?.selected).toBe(variantOf(version.stdout) as string);
      if (isa) expect(facts.kernels?.selected).toBe(isa);
      expect(facts.kernels?.runnable).toEqual(runnable);
      expect(facts.disk).toBeNull();
      expect(facts.speed!.bf16_gb_per_second).toBeGreaterThan(0);
      // --cache-gb alone leaves the trunk resident, as a run would; it needs no disk rate when every expert fits.
      const rows = facts.forecast!.rows;
      expect(rows.map((r) => [r.label, r.trunk, r.cache_gb])).toEqual([["resident trunk, --cache-gb 0.5", "resident", 0.5]]);
      expect(rows[0]!.trunk_disk_bytes).toBe(0);
      expect(rows[0]!.expert_hit_share).toBe(1);
      expect(rows[0]!.seconds_per_token.expected).toBeGreaterThan(0);
      expect(facts.forecast!.model).toBe(`the checkpoint in ${tiny}`);
    }
  });

  test("--json with a trunk budget streams it; without a model directory the forecast uses the release's sizes", async () => {
    const cwd = tempDir("doctor-json-release");
    const run = await k3Async(["doctor", "--preset", "laptop", "--json"], { cwd });
    expect(run.code).toBe(0);
    const facts = JSON.parse(run.stdout) as DoctorFacts;
    expect(readdirSync(cwd)).toEqual([]);
    expect(facts.forecast!.model).toBe("the released Kimi K3 (model.md 3.8 sizes)");
    const row = facts.forecast!.rows[0]!;
    expect([row.label, row.trunk, row.trunk_gb, row.cache_gb, row.layers, row.expert_picks]).toEqual(["--preset laptop (--trunk-gb 3 --cache-gb 1)", "streamed", 3, 1, 93, 1472]);
    expect(row.trunk_disk_bytes).toBeGreaterThan(100e9);
    // The disk was measured, so each term has its figure and the range brackets the expectation.
    expect(facts.disk!.trunk_reads.chunk_bytes).toBe(64 << 20);
    expect(facts.disk!.trunk_reads.depth).toBe(4);
    expect(facts.disk!.expert_reads.depths.map((d) => d.depth)).toEqual([1, 4, 8, 16]);
    expect(row.expert_disk_rate?.used).toBe("one-expert reads at QD8");
    const t = row.seconds_per_token;
    expect(t.low!).toBeLessThanOrEqual(t.expected!);
    expect(t.expected!).toBeLessThanOrEqual(t.high!);
    const trunkDisk = row.trunk_disk_bytes / (facts.disk!.trunk_reads.mb_per_second * 1e6);
    expect(row.seconds.trunk_disk!).toBeCloseTo(trunkDisk, 9);
    const inRam = Math.max(row.seconds.kernels, row.seconds.memory_floor, row.seconds.compute_floor);
    expect(t.expected!).toBeCloseTo(Math.max(trunkDisk, inRam) + row.seconds.expert_disk!, 6);
    expect(row.binds).toBe(trunkDisk >= inRam && trunkDisk >= row.seconds.expert_disk! ? "trunk reads from disk" : inRam >= row.seconds.expert_disk! ? "the kernels in RAM" : "expert reads from disk");
    expect(facts.reference.source).toContain("v1.0.0 anchors");
  });

  test("a trunk packed from another model does not match, and the next command packs one", async () => {
    const other = join(tempDir("doctor-other"), "trunk");
    expect((await k3Async(["pack-trunk", modelDir("nested14"), other])).code).toBe(0);
    const run = await k3Async(["doctor", tiny, "--trunk", other, "--no-disk"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/WARN trunk: .*; pack it again with k3 pack-trunk/);
    if (presetFor(run.stdout)) expect(run.stdout).toContain(`  k3 pack-trunk ${tiny} ${other}\n`);
    expect(run.stdout).toContain("disk     : not measured (--no-disk)");
  });

  test("without a model directory: the disk is measured on a probe file that is removed; the next commands start with a download", async () => {
    const cwd = tempDir("doctor-empty");
    const run = await k3Async(["doctor"], { cwd });
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/disk     : a 268.44 MB probe file \(removed\): 16 random reads of 17547264 bytes \(one expert\) per depth/);
    expect(readdirSync(cwd)).toEqual([]);
    if (presetFor(run.stdout)) {
      expect(run.stdout).toContain("  k3 download <model_dir> && k3 verify <model_dir>\n");
      expect(run.stdout).toContain("  k3 pack-trunk <model_dir> ~/k3trunk\n");
      expect(run.stdout).toContain('--trunk ~/k3trunk --preset');
      expect(run.stdout).toContain('--tok <model_dir> --prompt "Hello" --gen 8');
    }
  });

  test("on the release's layout: 96 shards at their published sizes, storage needing only the trunk", async () => {
    const dir = writeSparseRelease("doctor-release");
    for (const f of ["tiktoken.model", "tokenizer_config.json"]) copyFileSync(join(modelDir("chat-tokenizer"), f), join(dir, f));
    const run = await k3Async(["doctor", dir, "--no-disk"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`model    : ${dir}: 96 shard(s)`);
    expect(run.stdout).toContain("all 96 shard(s) match the release table's sizes");
    expect(run.stdout).toContain("present: config.json, tiktoken.model, tokenizer_config.json");
    expect(run.stdout).not.toContain("WARN model");
    expect(run.stdout).not.toContain("of the 1.56 TB checkpoint");
    if (!/storage  : [\d.]+ TB free/.test(run.stdout)) expect(run.stdout).toContain("109.00 GB more is needed here: a packed trunk (~109 GB)\n");
  });
});

describe.concurrent("k3 budget", () => {
  test("classes, dtypes, resident against streamable and the layer map of nested14, from the headers", async () => {
    const dir = modelDir("nested14");
    const index = indexCheckpoint(dir);
    let routed = 0;
    let packedBytes = 0;
    let total = 0;
    for (const name of index.names()) {
      const t = index.get(name)!;
      total += t.nbytes;
      if (classifyName(name) === "routed_expert") {
        routed += t.nbytes;
        if (name.endsWith(".weight_packed")) packedBytes += t.nbytes;
      }
    }
    const run = await k3Async(["budget", dir]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`2 shard(s) read, headers only; ${index.tensorCount} tensors`);
    expect(run.stdout).toMatch(new RegExp(`routed experts +\\d+ +${routed} `));
    expect(run.stdout).toContain((routed / (2 * packedBytes)).toFixed(5));
    expect(run.stdout).toContain("bytes/parameter measured (MXFP4 predicts 0.53125)");
    expect(run.stdout).toMatch(/resident {3}: .*\n {2}streamable : /);
    // The layer map the tensors imply is the one config.json states.
    const { config } = loadConfig(join(dir, "config.json"));
    const mla = config.fullAttnLayers.map((oneBased) => oneBased - 1);
    expect(run.stdout).toContain(`layer map  : ${config.numLayers} layers seen (0-based)`);
    expect(run.stdout).toContain(`MLA      : ${mla.length} layers: ${ranges(mla)}\n`);
    expect(run.stdout).toContain(`KDA      : ${config.numLayers - mla.length} layers`);
    expect(run.stdout).toContain(`dense    : ${config.firstKDenseReplace} layers: 0-${config.firstKDenseReplace - 1}\n`);
    expect(run.stdout).toContain(`MoE      : ${config.numLayers - config.firstKDenseReplace} layers: ${config.firstKDenseReplace}-${config.numLayers - 1}; ${config.numExperts} experts per layer`);
    expect(run.stdout).toMatch(/ {4}8 GB: +\d+ experts/);
    // Bytes a token at the presets, plain against compressed (tiny: everything pins, so the experts are all).
    expect(run.stdout).toContain(`per token from disk (trunk not pinned + the misses of ${config.numExpertsPerToken} x ${config.numLayers - config.firstKDenseReplace} routed experts, `);
    expect(run.stdout).toContain(`seconds on this machine: k3 doctor ${dir} --preset <name>`);
    for (const preset of ["laptop", "desktop", "workstation"]) {
      expect(run.stdout).toMatch(new RegExp(`    ${preset} +\\(--trunk-gb [\\d.]+\\): plain 0 B \\(${config.numLayers} layers pinned, trunk 0 B, experts 100\\.0% cached\\); compressed 0 B \\(${config.numLayers} pinned, trunk 0 B\\): 1\\.00x`));
    }
    expect(run.stdout).toContain(`${index.tensorCount} tensors, ${(total / 1e6).toFixed(2)} MB`);
  });

  test("a partial download (K3_MODEL_DIR): vision tensors unused, a broken shard skipped and named", async () => {
    const dir = writeSparseRelease("budget-partial");
    for (const n of [10, 20, 30]) rmSync(join(dir, releaseShards[n - 1]!.name));
    writeFileSync(join(dir, releaseShards[40]!.name), "broken");
    const run = await k3Async(["budget"], { env: { K3_MODEL_DIR: dir } });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("92 shard(s) read, headers only");
    expect(run.stdout).toContain(`skipped ${releaseShards[40]!.name}: not a valid safetensors shard`);
    expect(run.stdout).toMatch(/vision \(unused\) +2 +16384 /);
    // The fake release fills each shard with one padding tensor of no known class: unused too.
    expect(run.stdout).toMatch(/other \(unused\) +92 /);
    expect(run.stdout).toMatch(/unused {5}: [\d.]+ TB/);
  });

  test("no directory is a usage error", async () => {
    const run = await k3Async(["budget"], { env: { K3_MODEL_DIR: "" } });
    expect(run.code).toBe(2);
    expect(run.stderr).toContain("budget needs <model_dir> (or K3_MODEL_DIR)");
  });
});

describe.concurrent("k3 devbw", () => {
  test("reports QD1, QD4 and QD16 for each file, in the spec's line format", async () => {
    const dir = tempDir("devbw", "/var/tmp");
    const big = join(dir, "probe.bin");
    writeFileSync(big, pseudoRandomBytes(40 * 1024 * 1024, 5));
    const run = await k3Async(["devbw", big, modelDir("tiny13") + "/model-00001-of-00001.safetensors", "--reads", "8"]);
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`${big}: 8 random reads of 17547264 bytes (one expert) per depth`);
    for (const depth of ["QD1 ", "QD4 ", "QD16"]) {
      expect(run.stdout).toMatch(new RegExp(`^  ${big} +${depth} +[\\d.]+ MB/s$`, "m"));
    }
    expect(run.stdout).toContain("the file is smaller than one expert's 17547264");
    expect(run.stdout.match(/MB\/s$/gm)?.length).toBe(6);
    expect((await k3Async(["devbw"])).code).toBe(2);
    const missing = await k3Async(["devbw", join(dir, "nope")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`${join(dir, "nope")}: cannot open (ENOENT)`);
    expect(existsSync(big)).toBe(true);
  });
});
