/**
 * Continuous batching through the one decode loop (issue 24): several decodes at once share
 * their forward calls as batched steps (decode/step-batch.ts), and each gives exactly what it
 * gives alone (ids, step-0 logits bit for bit, finish reason, speculation counts), whatever
 * else runs beside it and when it started: greedy, seeded, a stop id, --spec 4's drafts, one
 * cancelled mid-way, one that starts while the others decode; resident, with an expert cache
 * of top-k + 1 slots, and streamed from a packed trunk with one ring slot.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { decode, type DecodeOptions, type DecodeResult } from "../../../src/decode/loop.ts";
import { ngramDrafter } from "../../../src/decode/ngram-drafter.ts";
import { createSampler } from "../../../src/decode/sampling.ts";
import { samplingDefaults } from "../../../src/decode/sampling-options.ts";
import { StepBatcher } from "../../../src/decode/step-batch.ts";
import { openEngine, type Engine } from "../../../src/engine/open.ts";
import type { SequenceState } from "../../../src/model/state.ts";
import { budgetRequest, type BudgetAction } from "../../../src/plan/budget.ts";
import { expectation, modelDir, oracleModels, packedFixtureTrunk } from "../../support/fixtures.ts";

setDefaultTimeout(60_000);

function open(name: string, budgets: BudgetAction[], trunkDir: string | undefined): Engine {
  const dir = modelDir(name);
  const { config } = loadConfig(join(dir, "config.json"));
  return openEngine({ modelDir: dir, config, layerCount: config.numLayers, positions: 96, prefillChunk: 64, budgets: budgetRequest(budgets), trunkDir, speculative: 4 });
}

interface Request {
  label: string;
  prompt: number[];
  options: () => Omit<DecodeOptions<SequenceState>, "batch">;
}

const bits = (logits: Float32Array | undefined) => (logits ? Buffer.from(logits.buffer, logits.byteOffset, logits.byteLength).toString("base64") : "none");
const outcome = (r: DecodeResult) => ({ generated: r.generated, finish: r.finish, promptFed: r.promptFed, first: bits(r.firstLogits), speculation: r.speculation });

for (const name of oracleModels) {
  describe(`${name}: decodes batched together give their solo answers`, () => {
    const want = expectation(name);
    const long = want.long.prompt_ids;
    const seeded = { ...samplingDefaults.run, temperature: 1, topP: 0.9, seed: 5 };
    const requests = (stopId: number, repetitive: number[]): Request[] => [
      { label: "greedy", prompt: long.slice(0, 30), options: () => ({ mode: "incremental", maxNewTokens: 12, prefillChunk: 7 }) },
      { label: "seeded", prompt: long.slice(30, 35), options: () => ({ mode: "incremental", maxNewTokens: 9, sampler: createSampler(seeded) }) },
      { label: "a stop id", prompt: long.slice(0, 30), options: () => ({ mode: "incremental", maxNewTokens: 12, stopIds: new Set([stopId]) }) },
      {
        label: "--spec 4", prompt: repetitive,
        options: () => ({ mode: "incremental", maxNewTokens: 14, speculative: { drafter: ngramDrafter, maxDraft: 4 } }),
      },
      { label: "cancelled after 3 ids", prompt: long.slice(50, 58), options: () => { let n = 0; return { mode: "incremental", maxNewTokens: 12, onToken: () => { n++; }, cancelled: () => n >= 3 }; } },
    ];
    const budgets: [string, () => [BudgetAction[], string | undefined]][] = [
      ["resident", () => [[], undefined]],
      ["a top-k + 1 expert cache", () => [[{ kind: "cache", bytes: 0 }], undefined]],
      ["streamed, one ring slot", () => [[{ kind: "trunk", bytes: 0 }], packedFixtureTrunk(name)]],
    ];
    for (const [label, budget] of budgets) {
      test(label, async () => {
        const [actions, trunkDir] = budget();
        using engine = open(name, actions, trunkDir);
        const model = engine.model;
        // The stop id: the greedy run's fourth id, so "a stop id" ends early. For --spec 4: a
        // prompt, its own greedy continuation and the prompt again, so the drafter proposes.
        const probe = await decode(model, long.slice(0, 30), { mode: "incremental", maxNewTokens: 4 });
        const start = want.prompt_ids;
        const continuation = (await decode(model, start, { mode: "incremental", maxNewTokens: 8 })).generated;
        const list = requests(probe.generated[3] as number, [...start, ...continuation, ...start]);
        const solo = [];
        for (const r of list) solo.push(outcome(await decode(model, r.prompt, r.options())));
        expect(solo[2]!.finish).toBe("stop");
        expect(solo[4]!.finish).toBe("cancelled");
        expect(solo[3]!.speculation!.sweeps).toBeGreaterThan(0); // the drafter did fire

        const batcher = new StepBatcher(model);
        // The first four start together; the last starts once the first has emitted 2 ids.
        const started = Promise.withResolvers<void>();
        const runs: Promise<DecodeResult>[] = list.slice(0, 4).map((r, i) => {
          const options = r.options();
          const onToken = options.onToken;
          return decode(model, r.prompt, {
            ...options, batch: batcher,
            onToken: (token, step) => {
              if (i === 0 && step === 1) started.resolve();
              return onToken?.(token, step);
            },
          });
        });
        runs.push(started.promise.then(() => decode(model, list[4]!.prompt, { ...list[4]!.options(), batch: batcher })));
        const batched = (await Promise.all(runs)).map(outcome);
        for (const [i, r] of list.entries()) expect({ label: r.label, ...batched[i] }).toEqual({ label: r.label, ...solo[i]! });
        expect(batcher.stats.maxSequences).toBeGreaterThanOrEqual(4);
        expect(batcher.members).toBe(0);
      });
    }
  });
}

describe("a batched step that fails", () => {
  test("rejects every call in it, and the batcher goes on", async () => {
    let fail = true;
    const batcher = new StepBatcher<{ id: number }>({
      runBatch: (calls) => {
        if (fail) throw new Error("broken step");
        return calls.map((c) => new Float32Array([c.state.id]));
      },
    });
    const leaveA = batcher.join();
    const leaveB = batcher.join();
    const a = batcher.run({ id: 1 }, [1]);
    const b = batcher.run({ id: 2 }, [1]);
    await expect(a).rejects.toThrow("broken step");
    await expect(b).rejects.toThrow("broken step");
    fail = false;
    const [c, d] = await Promise.all([batcher.run({ id: 3 }, [1]), batcher.run({ id: 4 }, [1])]);
    expect([c[0], d[0]]).toEqual([3, 4]);
    expect(batcher.stats).toMatchObject({ steps: 1, sequences: 2, maxSequences: 2 });
    leaveA();
    leaveA(); // twice is once
    expect(batcher.members).toBe(1);
    // The one left waits on nobody.
    expect((await batcher.run({ id: 5 }, [1]))[0]).toBe(5);
    leaveB();
  });
});
