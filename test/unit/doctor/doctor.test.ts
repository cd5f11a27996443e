/**
 * The doctor's decisions as pure functions: MemAvailable to preset (runtime.md 11.1's table,
 * every boundary), CPU flags on x86 and ARM, what makes a machine unable to run k3, the tensor
 * classes of `k3 budget`, and the forecast's byte census and arithmetic (src/plan/forecast.ts).
 */
import { describe, expect, test } from "bun:test";
import { cannotRun, presetThresholds, recommendPreset } from "../../../src/doctor/doctor.ts";
import { releaseCensus } from "../../../src/fetch/release-shards.ts";
import { expertReadsInFlight, forecast, tokenCensus, type MeasuredRates } from "../../../src/plan/forecast.ts";
import { cpuFacts, cpuFlags, gibTruncated, memoryFacts } from "../../../src/doctor/machine.ts";
import { classifyTensor, ranges } from "../../../src/doctor/tensor-budget.ts";
import { findPreset } from "../../../src/plan/presets.ts";
import { classifyName } from "../../support/tensor-classes.ts";

const gib = (n: number) => n * 1024 ** 3;

describe("doctor decisions", () => {
  test("MemAvailable picks the preset at each threshold; under 10 GiB none", () => {
    const cases: [number, string | undefined][] = [
      [500, "server"], [192, "server"], [191.99, "workstation"], [96, "workstation"], [95.5, "desktop"],
      [32, "desktop"], [31.9, "laptop"], [10, "laptop"], [9.99, undefined], [2, undefined],
    ];
    for (const [g, preset] of cases) expect(recommendPreset(gib(g))?.preset).toBe(preset);
    for (const t of presetThresholds) expect(findPreset(t.preset)).toBeDefined();
    expect(gibTruncated(233_961_008 * 1024)).toBe(223);
    const facts = memoryFacts("MemTotal:       239308464 kB\nMemFree: 1 kB\nMemAvailable:   233961008 kB\n");
    expect(facts).toEqual({ availableBytes: 233_961_008 * 1024, totalBytes: 239_308_464 * 1024, source: "/proc/meminfo" });
    expect(recommendPreset(facts.availableBytes)?.preset).toBe("server");
  });

  test("CPU flags from x86 and ARM /proc/cpuinfo; a CPU without AVX2 or FMA cannot run the x86-64 build", () => {
    const x86 = "processor\t: 0\nflags\t\t: fpu sse4_2 avx avx2 fma f16c bmi2\n";
    const old = "processor\t: 0\nflags\t\t: fpu sse4_2 avx\n";
    const arm = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes crc32 asimddp sve\n";
    expect([...cpuFlags(x86)]).toContain("avx2");
    expect(cpuFacts(x86, "x64").features).toEqual(["sse4_2", "avx", "avx2", "fma", "f16c", "bmi2"]);
    expect(cannotRun(cpuFacts(x86, "x64"), "linux")).toBeUndefined();
    expect(cannotRun(cpuFacts(old, "x64"), "linux")).toBe("this CPU lacks AVX2 and FMA; k3's x86-64 build needs AVX2 and FMA (x86-64-v3)");
    expect(cpuFacts(arm, "arm64").features).toEqual(["asimd", "asimddp", "sve"]);
    expect(cannotRun(cpuFacts(arm, "arm64"), "linux")).toBeUndefined();
    expect(cannotRun(cpuFacts(undefined, "ia32"), "linux")).toBe("k3 has no kernels for ia32");
    expect(cannotRun(cpuFacts(x86, "x64"), "aix")).toBe("k3 has no build for aix");
  });

});

describe("forecast", () => {
  const released = releaseCensus();
  const gb = 1e9;

  test("the released census is model.md's: 108.81 GB of trunk, 1,472 expert reads of 25.83 GB, about 135 GB a token with nothing cached", () => {
    const c = tokenCensus(released, { label: "nothing pinned", trunkBytes: 0, cacheBytes: 0 });
    expect(c.layers).toBe(93);
    expect(c.trunkDiskBytes).toBe(108_811_877_376);
    expect(c.expertPicks).toBe(1472);
    expect(c.expertDiskBytes).toBe(1472 * 17_547_264);
    expect((c.trunkDiskBytes + c.expertDiskBytes) / gb).toBeCloseTo(134.64, 2);
    expect(c.expertHitShare).toBe(0);
    // Resident: nothing of the trunk from disk; the kernels still read all of it and the LM head.
    const resident = tokenCensus(released, { label: "resident", trunkBytes: undefined, cacheBytes: 64 * gb });
    expect(resident.trunkDiskBytes).toBe(0);
    expect(resident.pinnedLayers).toBe(93);
    expect(resident.ramBytes).toBe(108_811_877_376 + 163_840 * 7168 * 2 + 1472 * 17_547_264);
    // 64 GB holds 3,647 of the 82,432 experts: 4.4% of the picks under even routing.
    expect(resident.cacheSlots).toBe(3647);
    expect(resident.expertHitShare).toBeCloseTo(3647 / 82_432, 12);
  });

  test("a trunk budget pins the prefix the engine's planner pins, and only the rest is read", () => {
    const layer0 = 2_341_213_184;
    const c = tokenCensus(released, { label: "3 GB", trunkBytes: 3 * gb, cacheBytes: gb });
    expect(c.pinnedLayers).toBeGreaterThanOrEqual(0);
    expect(c.trunkDiskBytes).toBe(released.trunkLayers.slice(c.pinnedLayers).reduce((a, l) => a + l.bytes, 0));
    const all = tokenCensus(released, { label: "all", trunkBytes: 200 * gb, cacheBytes: gb });
    expect(all.pinnedLayers).toBe(93);
    expect(all.trunkDiskBytes).toBe(0);
    expect(released.trunkLayers[0]!.bytes).toBe(layer0);
  });

  test("seconds: disk terms over the measured rates; the trunk overlaps the kernels, expert reads add; the range brackets the figure", () => {
    const rates: MeasuredRates = {
      trunkDiskBytesPerSecond: 1.2 * gb, expertDiskBytesPerSecond: 1.0 * gb, bf16BytesPerSecond: 30 * gb, mxfp4BytesPerSecond: 6 * gb,
      memoryBytesPerSecond: 40 * gb, multiplyAddsPerSecond: 50 * gb,
    };
    const budget = { label: "laptop", trunkBytes: 3 * gb, cacheBytes: gb };
    const f = forecast(released, budget, rates);
    const c = f.census;
    expect(f.trunkDiskSeconds).toBeCloseTo(c.trunkDiskBytes / (1.2 * gb), 9);
    expect(f.expertDiskSeconds).toBeCloseTo(c.expertDiskBytes / gb, 9);
    expect(f.kernelSeconds).toBeCloseTo(c.bf16Bytes / (30 * gb) + c.mxfp4Bytes / (6 * gb), 9);
    const inRam = Math.max(f.kernelSeconds, f.memoryFloorSeconds, f.computeFloorSeconds);
    expect(f.expectedSeconds).toBeCloseTo(Math.max(f.trunkDiskSeconds!, inRam) + f.expertDiskSeconds!, 9);
    // The arithmetic: at ~1.2 GB/s the laptop preset is near 110 s/token, not 27.
    expect(f.expectedSeconds!).toBeGreaterThan(100);
    expect(f.expectedSeconds!).toBeLessThan(125);
    expect(f.binds).toBe("trunk reads from disk");
    expect(f.lowSeconds!).toBeLessThanOrEqual(f.expectedSeconds!);
    expect(f.highSeconds!).toBeGreaterThanOrEqual(f.expectedSeconds!);
    // A resident trunk with every expert cached needs no disk rate, and the kernels bind.
    const cached = forecast(released, { label: "all", trunkBytes: undefined, cacheBytes: 2e15 }, { ...rates, trunkDiskBytesPerSecond: undefined, expertDiskBytesPerSecond: undefined });
    expect(cached.expectedSeconds).toBeCloseTo(inRam, 9);
    expect(cached.binds).toBe("the kernels in RAM");
    // Without the disk measured, a budget that reads the disk has no figure rather than a wrong one.
    const unmeasured = forecast(released, budget, { ...rates, trunkDiskBytesPerSecond: undefined });
    expect(unmeasured.expectedSeconds).toBeUndefined();
    expect(unmeasured.binds).toBeUndefined();
    expect(expertReadsInFlight(released, c)).toBe(16);
  });
});

describe("budget classes", () => {
  test("agree with the residency classes of model.md 3.7 and name every resident kind", () => {
    const names: [string, string][] = [
      ["language_model.model.layers.3.block_sparse_moe.experts.17.w1.weight_packed", "routed experts"],
      ["language_model.model.layers.3.block_sparse_moe.shared_experts.down_proj.weight", "shared experts"],
      ["language_model.model.layers.3.block_sparse_moe.routed_expert_down_proj.weight", "latent MoE projections"],
      ["language_model.model.layers.3.block_sparse_moe.routed_expert_norm.weight", "latent MoE projections"],
      ["language_model.model.layers.3.block_sparse_moe.gate.e_score_correction_bias", "router"],
      ["language_model.model.layers.3.self_attn.q_a_proj.weight", "attention"],
      ["language_model.model.layers.3.self_attention_res_proj.weight", "attention residuals"],
      ["language_model.model.layers.3.mlp_res_norm.weight", "attention residuals"],
      ["language_model.model.output_attn_res_norm.weight", "attention residuals"],
      ["language_model.model.layers.0.mlp.gate_proj.weight", "dense MLP"],
      ["language_model.model.layers.3.input_layernorm.weight", "norms"],
      ["language_model.model.norm.weight", "norms"],
      ["language_model.model.embed_tokens.weight", "embedding"],
      ["language_model.lm_head.weight", "lm_head"],
      ["vision_tower.blocks.0.attn.qkv.weight", "vision (unused)"],
      ["mm_projector.proj.0.weight", "vision (unused)"],
    ];
    for (const [name, cls] of names) {
      expect(classifyTensor(name)).toBe(cls as ReturnType<typeof classifyTensor>);
      expect(classifyTensor(name) === "routed experts").toBe(classifyName(name) === "routed_expert");
    }
    expect(ranges([0, 2, 3, 4, 7, 9, 10])).toBe("0, 2-4, 7, 9-10");
    expect(ranges([])).toBe("");
  });
});
