import { describe, expect, test } from "bun:test";
import { autoBudget, budgetRequest, readMemory, resolveBudgets } from "../../../src/plan/budget.ts";
import { positionCeiling } from "../../../src/plan/limits.ts";
import { checkKvFits, checkPlanFits, memoryPlan, recurrentStateBytes, replayRecordBytes, sequencesFitting, type PlanInputs } from "../../../src/plan/memory-plan.ts";
import { releasedConfig } from "../../../tools/checkpoint/released-config.ts";
import { planTrunk } from "../../../src/plan/trunk-plan.ts";
import { K3Error } from "../../../src/errors.ts";
import { tinyConfig } from "../../support/configs.ts";

const released = { trunkBytes: 108.81e9, tablesBytes: 4.7e9 };
const GB = 1e9;

describe("auto budget (runtime.md 2.3 worked examples)", () => {
  test("the reference machine: 239.6 GB available -> trunk 111, cache 115.4", () => {
    const a = autoBudget({ availableBytes: 239.6 * GB, totalBytes: 256 * GB }, released);
    expect(a.reserveBytes / GB).toBeCloseTo(13.192, 3);
    expect(a.trunkBytes / GB).toBeCloseTo(111.0, 6);
    expect(a.cacheBytes / GB).toBeCloseTo(115.4, 1);
  });

  test("a 64 GB machine with 60 GB available: trunk 25.1, cache 0.5", () => {
    const a = autoBudget({ availableBytes: 60 * GB, totalBytes: 64 * GB }, released);
    expect(a.reserveBytes / GB).toBeCloseTo(9.6, 6);
    expect(a.trunkBytes / GB).toBeCloseTo(25.1, 6);
    expect(a.cacheBytes).toBe(0.5 * GB);
  });

  test("too little memory is refused with the numbers", () => {
    expect(() => autoBudget({ availableBytes: 9 * GB, totalBytes: 16 * GB }, released)).toThrow(/below the 3\.0 GB floor/);
  });

  test("auto follows later-wins like every budget option", () => {
    const memory = { availableBytes: 60 * GB, totalBytes: 64 * GB };
    const auto = resolveBudgets(budgetRequest([{ kind: "auto" }, { kind: "cache", bytes: 7 * GB }]), memory, released);
    expect(auto.trunkBytes / GB).toBeCloseTo(25.1, 6);
    expect(auto.cacheBytes).toBe(7 * GB);
    expect(resolveBudgets(budgetRequest([{ kind: "cache", bytes: 7 * GB }, { kind: "auto" }]), memory, released).cacheBytes).toBe(0.5 * GB);
    expect(resolveBudgets(budgetRequest([{ kind: "preset", name: "laptop" }, { kind: "trunk", bytes: 5 * GB }]), memory, released)).toMatchObject({ trunkBytes: 5 * GB, cacheBytes: 1 * GB, preset: "laptop" });
  });

  test("MemAvailable is read from /proc/meminfo text", () => {
    expect(readMemory("MemTotal:       25165824 kB\nMemFree: 1 kB\nMemAvailable:   20000000 kB\n")).toEqual({ availableBytes: 20_480_000_000, totalBytes: 25165824 * 1024 });
    expect(readMemory("MemTotal: 1 kB\n")).toBeUndefined();
  });
});

describe("trunk plan (runtime.md 5.1)", () => {
  const k3Layers = [2.341, ...Array.from({ length: 92 }, (_, i) => ([3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47, 51, 55, 59, 63, 67, 71, 75, 79, 83, 87, 91, 92].includes(i + 1) ? 0.844 : 1.268))].map((g) => g * 1e9);

  test("pinning layer 0 shrinks the slot, which pins more", () => {
    const p = planTrunk(k3Layers, 16e9);
    expect(p.pinned).toBe(10);
    expect(p.ringSlots).toBe(2);
    expect(p.slotBytes).toBe(1.268e9);
    expect(p.bytes).toBeLessThanOrEqual(16e9);
  });

  test("a budget under one slot is raised to one slot and says so; the whole trunk needs no ring", () => {
    const small = planTrunk(k3Layers, 1e9);
    expect(small).toMatchObject({ pinned: 0, ringSlots: 1, raised: true });
    expect(small.twoSlotBudget).toBe(2 * 2.341e9);
    expect(planTrunk(k3Layers, 120e9)).toMatchObject({ pinned: 93, ringSlots: 0 });
  });

  test("one slot: the rest of the budget, up to a second slot, is the ring's room to read ahead", () => {
    const three = planTrunk(k3Layers, 3e9);
    expect(three).toMatchObject({ pinned: 0, ringSlots: 1, slotBytes: 2.341e9, raised: false });
    expect(three.ringBytes).toBe(3e9);
    expect(three.bytes).toBe(3e9);
    expect(planTrunk(k3Layers, 1e9).ringBytes).toBe(2.341e9); // raised: the slot alone
    const two = planTrunk(k3Layers, 16e9);
    expect(two.ringBytes).toBe(2 * two.slotBytes);
    for (let budget = 2.4e9; budget < 4.68e9; budget += 0.11e9) {
      const p = planTrunk(k3Layers, budget);
      expect(p.ringBytes).toBeGreaterThanOrEqual(p.slotBytes);
      expect(p.ringBytes).toBeLessThanOrEqual(2 * p.slotBytes);
    }
  });

  test("the plan never exceeds a budget that holds at least one slot", () => {
    for (let budget = 2.4e9; budget < 115e9; budget += 0.37e9) {
      const p = planTrunk(k3Layers, budget);
      expect(p.bytes).toBeLessThanOrEqual(budget);
    }
  });
});

describe("memory plan", () => {
  test("sums its terms and refuses past 95% of MemAvailable with both numbers", () => {
    const plan = memoryPlan({
      config: tinyConfig(), layerCount: 13, positions: 100, callTokens: 10,
      trunk: { mode: "resident", bytes: 5e9 }, tablesBytes: 1e9, expertCacheBytes: 2e9, baselineBytes: 5e7,
    });
    expect(plan.totalBytes).toBe(plan.terms.reduce((s, t) => s + t.bytes, 0));
    expect(() => checkPlanFits(plan, 10e9)).not.toThrow();
    expect(() => checkPlanFits(plan, 8e9)).toThrow(K3Error);
    expect(() => checkPlanFits(plan, 8e9)).toThrow(/REFUSING TO START: the plan needs 8\.\d\d GB but only 8\.00 GB is available/);
    expect(() => checkPlanFits(plan, undefined)).not.toThrow();
  });

  test("the KV preflight refuses a request whose MLA cache alone exceeds 90% of MemAvailable (exit 2)", () => {
    const plan = memoryPlan({
      config: tinyConfig(), layerCount: 13, positions: 36_864, callTokens: 10,
      trunk: { mode: "resident", bytes: 1 }, tablesBytes: 1, expertCacheBytes: 1, baselineBytes: 1,
    });
    const kv = plan.terms.find((t) => t.name === "KV cache")!.bytes;
    // The latent cache: 4 MLA layers x (32 latent + 8 rope) floats x 4 bytes per position.
    expect(kv).toBe(4 * 36_864 * (32 + 8) * 4);
    expect(plan.kvBytesPerPosition).toBe(4 * 40 * 4);
    expect(() => checkKvFits(plan, kv / 0.9 + 1, 36_864)).not.toThrow();
    try {
      checkKvFits(plan, kv, 36_864);
      throw new Error("accepted");
    } catch (error) {
      expect((error as K3Error).exitCode).toBe(2);
      // The ceiling is the whole plan's: here the rest of it (32 MB of runtime growth) leaves no room.
      expect((error as K3Error).message).toMatch(/^REFUSING: the KV cache needs 23\.59 MB for 36864 positions \(640 B per position\) .*; at most 0 positions fit;/);
    }
  });

  test("--parallel N: N recurrent states and KV caches, each sequence's positions; the most N that fits is found", () => {
    const inputs: PlanInputs = {
      config: releasedConfig, layerCount: 93, positions: 8192, callTokens: 64,
      trunk: { mode: "streamed", bytes: 16e9 }, tablesBytes: 4.7e9, expertCacheBytes: 10e9, baselineBytes: 1e8,
    };
    const one = memoryPlan(inputs);
    const four = memoryPlan({ ...inputs, sequences: 4, callTokens: 4 * 64 });
    const term = (p: ReturnType<typeof memoryPlan>, name: string) => p.terms.find((t) => t.name.startsWith(name))!;
    expect(term(four, "KV cache")).toEqual({ name: "KV cache (4 sequences)", bytes: 4 * term(one, "KV cache").bytes });
    expect(term(four, "recurrent state")).toEqual({ name: "recurrent state (4 sequences)", bytes: 4 * recurrentStateBytes(releasedConfig, 93) });
    expect(term(four, "buffers").bytes).toBeGreaterThan(term(one, "buffers").bytes); // activations for 4 chunks in one step
    expect(four.kvBytesPerPosition).toBe(4 * one.kvBytesPerPosition);
    // With MemAvailable between the plans for 2 and 3 sequences, 2 is the most that fits.
    const at = (n: number) => memoryPlan({ ...inputs, sequences: n, callTokens: n * 64 }).totalBytes / 0.95;
    const available = (at(2) + at(3)) / 2;
    expect(sequencesFitting({ ...inputs, sequences: 4, callTokens: 4 * 64 }, available)).toBe(2);
    expect(sequencesFitting({ ...inputs, sequences: 4, callTokens: 4 * 64 }, at(4) + 1)).toBe(4);
    expect(sequencesFitting({ ...inputs, sequences: 4, callTokens: 4 * 64 }, at(1) - 1)).toBe(0);
  });

  test("the released config: the latent cache is 58 GB at 2^20 positions (2.48 TB expanded), 7.25 GB at 131,072", () => {
    const plan = (positions: number) => memoryPlan({
      config: releasedConfig, layerCount: 93, positions, callTokens: 8,
      trunk: { mode: "streamed", bytes: 16e9 }, tablesBytes: 4.7e9, expertCacheBytes: 10e9, baselineBytes: 1e8,
    });
    const kvOf = (p: ReturnType<typeof plan>) => p.terms.find((t) => t.name === "KV cache")!.bytes;
    // 24 MLA layers x (512 latent + 64 rope) floats x 4 B: 55,296 B per position (chat.md 5.1).
    expect(plan(1).kvBytesPerPosition).toBe(24 * 576 * 4);
    expect(plan(1).kvBytesPerPosition).toBe(55_296);
    const long = plan(1_048_576);
    expect(kvOf(long)).toBe(24 * 576 * 4 * 1_048_576);
    expect(kvOf(long) / GB).toBeCloseTo(57.98, 2);
    const expanded = 24 * (96 * (128 + 128) + 64) * 4 * 1_048_576; // the former layout, runtime.md 1.6
    expect(expanded / 1e12).toBeCloseTo(2.48, 2);
    expect(expanded / kvOf(long)).toBeCloseTo(42.78, 2);
    expect(kvOf(plan(131_072))).toBe(7_247_757_312);
    expect(kvOf(plan(131_072)) / GB).toBeCloseTo(7.25, 2);
    // The attention scratch (one f32 score per head and position) is planned too: 384 B per position.
    expect(long.bytesPerPosition).toBe(55_296 + 4 * 96);
    expect(long.contextLength).toBe(1_048_576);
    expect(() => checkKvFits(long, 100 * GB, 1_048_576)).not.toThrow();
    expect(() => checkPlanFits(long, 100 * GB)).not.toThrow();
  });

  test("multi-turn snapshots are a term of the plan; one snapshot of the released model is 464.6 MB (chat.md 5.1)", () => {
    // 69 KDA layers x (96 heads x 128 x 128 + 3 x 12,288 x 3 conv floats) x 4 B.
    expect(recurrentStateBytes(releasedConfig, 93)).toBe(69 * (6_291_456 + 442_368));
    expect(recurrentStateBytes(releasedConfig, 93)).toBe(464_633_856);
    const inputs = {
      config: releasedConfig, layerCount: 93, positions: 8192, callTokens: 64,
      trunk: { mode: "streamed" as const, bytes: 16e9 }, tablesBytes: 4.7e9, expertCacheBytes: 10e9, baselineBytes: 1e8,
    };
    const without = memoryPlan(inputs);
    const with3 = memoryPlan({ ...inputs, snapshotBytes: 3 * 464_633_856 });
    expect(without.terms.some((t) => t.name === "state snapshots")).toBe(false);
    expect(with3.terms.find((t) => t.name === "state snapshots")?.bytes).toBe(1_393_901_568);
    expect(with3.totalBytes - without.totalBytes).toBe(1_393_901_568);
  });

  test("speculative decode is a term: the snapshot before each sweep and the sweep's replay record (101.9 MB released for --spec 4)", () => {
    // 69 KDA layers x 5 positions x (6 x 12,288 + 96 heads) floats x 4 B.
    expect(replayRecordBytes(releasedConfig, 93, 5)).toBe(101_877_120);
    const inputs = {
      config: releasedConfig, layerCount: 93, positions: 8192, callTokens: 64,
      trunk: { mode: "streamed" as const, bytes: 16e9 }, tablesBytes: 4.7e9, expertCacheBytes: 10e9, baselineBytes: 1e8,
    };
    const without = memoryPlan(inputs);
    const spec4 = memoryPlan({ ...inputs, sweepTokens: 5 });
    expect(without.terms.some((t) => t.name === "speculation")).toBe(false);
    expect(spec4.terms.find((t) => t.name === "speculation")?.bytes).toBe(464_633_856 + 101_877_120);
    expect(spec4.totalBytes - without.totalBytes).toBe(464_633_856 + 101_877_120);
  });

  test("the request ceiling: the context length, then what the plan fits", () => {
    const config = { ...tinyConfig(), maxPositionEmbeddings: 4096 };
    const plan = (positions: number) => memoryPlan({
      config, layerCount: 13, positions, callTokens: 10,
      trunk: { mode: "resident", bytes: 5e6 }, tablesBytes: 1e6, expertCacheBytes: 1e6, baselineBytes: 1e6,
    });
    expect(positionCeiling(plan(100), undefined)).toBe(4096);
    expect(positionCeiling(plan(100), 1e12)).toBe(4096);
    expect(() => checkKvFits(plan(4096), 1e12, 4096)).not.toThrow();
    try {
      checkKvFits(plan(4097), 1e12, 4097);
      throw new Error("accepted");
    } catch (error) {
      expect((error as K3Error).exitCode).toBe(2);
      expect((error as K3Error).message).toBe(
        "REFUSING: 4097 positions (prompt + generated + 1, or the chat context) exceed the model's context length of 4096 " +
          "(max_position_embeddings); at most 4096 positions fit; ask for fewer tokens or a shorter prompt",
      );
    }
    expect(() => checkKvFits(plan(4097), undefined, 4097)).toThrow(/context length of 4096/);
    // With little memory the plan decides: the ceiling passes both checks and one more fails one.
    const available = plan(0).totalBytes / 0.95 + 1000 * plan(0).bytesPerPosition;
    const ceiling = positionCeiling(plan(100), available);
    expect(ceiling).toBeGreaterThan(900);
    expect(ceiling).toBeLessThan(1001);
    expect(positionCeiling(plan(ceiling), available)).toBe(ceiling); // the same whatever was asked
    expect(() => checkKvFits(plan(ceiling), available, ceiling)).not.toThrow();
    expect(() => checkPlanFits(plan(ceiling), available)).not.toThrow();
    expect(() => checkPlanFits(plan(ceiling + 1), available)).toThrow(/REFUSING TO START/);
  });
});
