/**
 * A batched step (`Model.runBatch`, issue 24): several sequences' rows through one read of each
 * layer give every sequence the logits it gets alone, bit for bit, whatever else is in the
 * batch, when it arrived, and in which row position: on both fixture models, resident, with an
 * expert cache of top-k + 1 slots (a batch's union of experts loaded in waves) and streamed from
 * a packed trunk with one ring slot. The states the batch leaves go on as the solo ones do.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { argmax } from "../../../src/decode/sampler.ts";
import { openEngine, type Engine } from "../../../src/engine/open.ts";
import type { BatchedCall } from "../../../src/model/sequence.ts";
import type { SequenceState } from "../../../src/model/state.ts";
import { budgetRequest, type BudgetAction } from "../../../src/plan/budget.ts";
import { expectation, modelDir, oracleModels, packedFixtureTrunk } from "../../support/fixtures.ts";

setDefaultTimeout(60_000);

/** A call of one sequence: ids fed, and whether every row's logits are wanted. */
interface Call {
  seq: number;
  ids: number[];
  all?: boolean;
}

/**
 * The schedule: sequence 0 arrives first and decodes while 1 and 2 arrive; 2's prompt comes in
 * two chunks, one beside the others' decode rows; 1 verifies three ids at once ("all" rows);
 * the row order changes from step to step. `next` marks a decode id: the greedy id of the
 * sequence's last logits, filled in when the solo run makes them.
 */
const next = -1;
function schedule(prompts: number[][]): Call[][] {
  const [p0, p1, p2] = prompts as [number[], number[], number[]];
  return [
    [{ seq: 0, ids: p0 }],
    [{ seq: 0, ids: [next] }, { seq: 1, ids: p1 }],
    [{ seq: 1, ids: [next] }, { seq: 2, ids: p2.slice(0, 7) }, { seq: 0, ids: [next] }],
    [{ seq: 2, ids: p2.slice(7) }, { seq: 0, ids: [next] }, { seq: 1, ids: [next, 5, 9], all: true }],
    [{ seq: 0, ids: [next] }, { seq: 2, ids: [next] }, { seq: 1, ids: [next] }],
    [{ seq: 2, ids: [next] }],
  ];
}

function open(name: string, budgets: BudgetAction[], trunkDir: string | undefined): Engine {
  const dir = modelDir(name);
  const { config } = loadConfig(join(dir, "config.json"));
  return openEngine({ modelDir: dir, config, layerCount: config.numLayers, positions: 64, prefillChunk: 32, budgets: budgetRequest(budgets), trunkDir });
}

/** Bytes of logits, to compare bit for bit (a NaN equals itself, -0 differs from +0). */
const bits = (logits: Float32Array) => Buffer.from(logits.buffer, logits.byteOffset, logits.byteLength);

for (const name of oracleModels) {
  describe(`${name}: a batched step gives each sequence its solo logits`, () => {
    const want = expectation(name);
    const long = want.long.prompt_ids;
    const prompts = [long.slice(0, 9), long.slice(20, 25), long.slice(40, 52)];
    const budgets: [string, () => [BudgetAction[], string | undefined]][] = [
      ["resident", () => [[], undefined]],
      ["a top-k + 1 expert cache", () => [[{ kind: "cache", bytes: 0 }], undefined]],
      ["streamed, one ring slot", () => [[{ kind: "trunk", bytes: 0 }], packedFixtureTrunk(name)]],
    ];
    for (const [label, budget] of budgets) {
      test(label, () => {
        const [actions, trunkDir] = budget();
        using engine = open(name, actions, trunkDir);
        const model = engine.model;
        const steps = schedule(prompts);
        // Solo: each sequence's calls in order, alone; the decode ids filled in from its logits.
        const solo: Buffer[][] = steps.map((step) => step.map(() => Buffer.alloc(0)));
        const lastLogits = new Map<number, Float32Array>();
        const soloStates: SequenceState[] = prompts.map(() => model.newState());
        const calls = steps.flatMap((step, s) => step.map((call, i) => ({ call, s, i })));
        for (const seq of [0, 1, 2]) {
          for (const { call, s, i } of calls.filter((c) => c.call.seq === seq)) {
            call.ids = call.ids.map((id) => (id === next ? argmax(lastLogits.get(seq)!.subarray(-model.vocabSize)) : id));
            const logits = model.run(soloStates[seq]!, call.ids, call.all ? "all" : "last");
            solo[s]![i] = Buffer.from(bits(logits));
            lastLogits.set(seq, logits);
          }
        }
        // Batched: the same calls, step by step, each step's sequences together.
        const states: SequenceState[] = prompts.map(() => model.newState());
        for (const [s, step] of steps.entries()) {
          const batch: BatchedCall<SequenceState>[] = step.map((call) => ({ state: states[call.seq]!, ids: call.ids, outputs: call.all ? "all" : "last" }));
          const logits = model.runBatch(batch);
          expect(logits).toHaveLength(step.length);
          for (const [i, call] of step.entries()) {
            expect(`step ${s} seq ${call.seq}: ${Buffer.compare(bits(logits[i]!), solo[s]![i]!)}`).toBe(`step ${s} seq ${call.seq}: 0`);
          }
        }
        // The states the batch left go on as the solo ones do.
        for (const seq of [0, 1, 2]) {
          expect(states[seq]!.position).toBe(soloStates[seq]!.position);
          const id = argmax(lastLogits.get(seq)!.subarray(-model.vocabSize));
          expect(Buffer.compare(bits(model.run(states[seq]!, [id])), bits(model.run(soloStates[seq]!, [id])))).toBe(0);
        }
        for (const state of [...states, ...soloStates]) model.release(state);
      });
    }

    test("a batch is refused when it names a sequence twice, or holds an empty step", () => {
      using engine = open(name, [], undefined);
      const model = engine.model;
      const state = model.newState();
      expect(() => model.runBatch([{ state, ids: [1] }, { state, ids: [2] }])).toThrow("one step per sequence");
      expect(() => model.runBatch([{ state, ids: [] }])).toThrow("a step of no ids");
      expect(() => model.runBatch([])).toThrow("a batch of no sequences");
      expect(state.position).toBe(0);
      model.release(state);
    });
  });
}
