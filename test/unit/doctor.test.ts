/**
 * The doctor's decisions as pure functions: MemAvailable to preset (runtime.md 11.1's table,
 * every boundary), CPU flags on x86 and ARM, what makes a machine unable to run k3, the tensor
 * classes of `k3 budget`, and the kernel-variant hook.
 */
import { describe, expect, test } from "bun:test";
import { cannotRun, presetThresholds, recommendPreset } from "../../src/ops/doctor.ts";
import { kernelVariantName } from "../../src/ops/kernel-variant.ts";
import { cpuFacts, cpuFlags, gibTruncated, memoryFacts } from "../../src/ops/machine.ts";
import { classifyTensor, ranges } from "../../src/ops/tensor-budget.ts";
import { findPreset } from "../../src/plan/presets.ts";
import { classifyName } from "../support/tensor-classes.ts";

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

  test("the kernel-variant hook names one variant per build target", () => {
    expect(kernelVariantName("x64")).toContain("x86-64-v3");
    expect(kernelVariantName("arm64")).toContain("AArch64");
    expect(kernelVariantName("riscv64")).toContain("no kernels");
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
