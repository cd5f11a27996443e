/**
 * Ultra-low-memory mode's arithmetic (runtime.md 2.4), in-process on both fixtures: the
 * streamed tables give the resident tables' bits (embedding rows; logits for one position and
 * for many) whatever the chunk size, including chunks that do not divide the vocabulary; the
 * one-slot recompute state gives the per-layer state's logits for a whole pass, and refuses what
 * it cannot do.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { indexCheckpoint } from "../../../src/checkpoint/safetensors.ts";
import { openEngine } from "../../../src/engine/open.ts";
import { gbToBytes } from "../../../src/units.ts";
import { loadModelTables } from "../../../src/weights/model-tables.ts";
import { openStreamedTables } from "../../../src/weights/streamed-tables.ts";
import { TensorReader } from "../../../src/weights/tensor-reader.ts";
import { bits, f32, freeTestBuffers, rng } from "../../support/kernels.ts";
import { expectation, modelDir, oracleModels } from "../../support/fixtures.ts";
import { k3 } from "../../support/k3.ts";
import { tempDir } from "../../support/tmp.ts";
import { budgetRequest } from "../../../src/plan/budget.ts";

setDefaultTimeout(60_000);
afterAll(() => freeTestBuffers());

for (const name of oracleModels) {
  describe(`${name}: streamed tables = resident tables, bit for bit`, () => {
    const dir = modelDir(name);
    const { config } = loadConfig(join(dir, "config.json"));
    const E = config.hiddenSize;
    const V = config.vocabSize;

    test("embedding rows, and logits of 1 and 7 positions, at chunk sizes of 1, 3 and 37 rows and the default", () => {
      const index = indexCheckpoint(dir);
      const reader = new TensorReader(index);
      const resident = loadModelTables(index, reader, config);
      try {
        const r = rng(5);
        const ids = [0, V - 1, 17, 17, 3, V >> 1, 42];
        const T = ids.length;
        const normed = f32(T * E);
        for (let i = 0; i < normed.a.length; i++) normed.a[i] = r.normal() * 2 ** (r.int(12) - 6);
        const wantEmbed = f32(T * E);
        resident.embed(ids, wantEmbed);
        const wantOne = f32(V);
        const wantAll = f32(T * V);
        resident.project(normed, wantOne, 1);
        resident.project(normed, wantAll, T);
        const rowBytes = E * 2;
        for (const chunkBytes of [rowBytes, 3 * rowBytes + 5, 37 * rowBytes, 4 * 1024 * 1024]) {
          const streamed = openStreamedTables(index, reader, config, chunkBytes);
          try {
            const gotEmbed = f32(T * E);
            streamed.embed(ids, gotEmbed);
            expect(bits(gotEmbed.a)).toEqual(bits(wantEmbed.a));
            const one = f32(V);
            const all = f32(T * V);
            streamed.project(normed, one, 1);
            streamed.project(normed, all, T);
            expect(bits(one.a)).toEqual(bits(wantOne.a));
            expect(bits(all.a)).toEqual(bits(wantAll.a));
            // Every row of the LM head was read, once per projection; each embedding row once per id.
            const headBytes = V * E * 2;
            expect(streamed.stats.lmHeadBytesRead).toBe(2 * headBytes);
            expect(streamed.stats.embeddingBytesRead).toBe(T * E * 2);
            expect(streamed.finalNorm.length).toBe(E);
          } finally {
            streamed.close();
          }
        }
      } finally {
        resident.close();
        reader.close();
      }
    });

    test("one recurrent slot for a whole recompute pass: the per-layer state's logits; a second call and a snapshot are refused", () => {
      const trunk = join(tempDir("ultra"), "trunk");
      expect(k3(["pack-trunk", dir, trunk]).code).toBe(0);
      const prompt = expectation(name).tf.ids.slice(0, 20);
      const open = (budgets: { kind: "ultra" }[], mode: "incremental" | "recompute") => openEngine({
        modelDir: dir, config, layerCount: config.numLayers, positions: 32, prefillChunk: 32,
        budgets: budgetRequest([...budgets, { kind: "cache", bytes: gbToBytes(1) }]), trunkDir: trunk, mode,
      });
      const logitsOf = (budgets: { kind: "ultra" }[], mode: "incremental" | "recompute") => {
        const engine = open(budgets, mode);
        try {
          const state = engine.model.newState();
          expect(state.oneRecurrentSlot).toBe(mode === "recompute" && budgets.length > 0);
          const logits = engine.model.run(state, prompt, "all");
          if (state.oneRecurrentSlot) {
            expect(() => engine.model.run(state, [1])).toThrow(/one pass over its whole sequence/);
            expect(() => state.snapshot()).toThrow(/cannot be snapshot/);
            expect(engine.plan.memory.terms.find((t) => t.name === "recurrent state")!.bytes).toBe(engine.plan.ultra!.recurrentSlotBytes);
          }
          engine.model.release(state);
          return logits;
        } finally {
          engine.close();
        }
      };
      const normal = logitsOf([], "recompute");
      expect(bits(logitsOf([{ kind: "ultra" }], "recompute"))).toEqual(bits(normal));
      expect(bits(logitsOf([{ kind: "ultra" }], "incremental"))).toEqual(bits(normal));
    });
  });
}
