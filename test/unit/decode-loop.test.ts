import { describe, expect, test } from "bun:test";
import { decode, feed, feedInSteps, finishReasons } from "../../src/decode/loop.ts";
import { argmax, greedy, type Sampler } from "../../src/decode/sampler.ts";
import type { Forward } from "../../src/model/sequence.ts";

/** A toy model whose next token is the sum of everything it has seen, mod 7. */
function toyModel(fed: number[][] = []): Forward<{ seen: number[] }> {
  return {
    vocabSize: 7,
    newState: () => ({ seen: [] }),
    release: () => {},
    run: (state, ids) => {
      fed.push([...ids]);
      state.seen.push(...ids);
      const logits = new Float32Array(7);
      logits[state.seen.reduce((a, b) => a + b, 0) % 7] = 1;
      return logits;
    },
  };
}

describe("greedy choice", () => {
  test("ties go to the lowest id; NaN never wins", () => {
    expect(argmax(new Float32Array([1, 3, 3, 2]))).toBe(1);
    expect(argmax(new Float32Array([NaN, -1, -1]))).toBe(1);
    expect(argmax(new Float32Array([-Infinity, -Infinity]))).toBe(0);
    expect(greedy.choose(new Float32Array([0, 5, 5]))).toBe(1);
  });
});

describe("the decode loop", () => {
  test("incremental feeds the prompt once, then one token; recompute feeds the whole prefix", () => {
    const fed: number[][] = [];
    const model = toyModel(fed);
    const incremental = decode(model, [1, 2], { maxNewTokens: 3, mode: "incremental" });
    expect(fed).toEqual([[1, 2], [3], [6]]);
    fed.length = 0;
    const recompute = decode(model, [1, 2], { maxNewTokens: 3, mode: "recompute" });
    expect(fed).toEqual([[1, 2], [1, 2, 3], [1, 2, 3, 6]]);
    expect(recompute.generated).toEqual(incremental.generated);
    expect(incremental.generated).toEqual([3, 6, 5]);
    expect(incremental.finish).toBe("length");
    expect(Array.from(incremental.firstLogits!)).toEqual([0, 0, 0, 1, 0, 0, 0]);
  });

  test("the sampler picks every token: the model is asked the same either way", () => {
    const fed: number[][] = [];
    const lowest: Sampler = { choose: () => 0 };
    const run = decode(toyModel(fed), [1, 2], { maxNewTokens: 3, mode: "incremental", sampler: lowest });
    expect(run.generated).toEqual([0, 0, 0]);
    expect(fed).toEqual([[1, 2], [0], [0]]);
  });

  test("a stop id ends the run with 'stop' and is kept as the last id", () => {
    const run = decode(toyModel(), [1, 2], { maxNewTokens: 10, mode: "incremental", stopIds: new Set([6]) });
    expect(run.generated).toEqual([3, 6]);
    expect(run.finish).toBe("stop");
    expect(run.steps.map((s) => s.token)).toEqual([3, 6]);
  });

  test("onToken can end the run, with the reason it gives", () => {
    const seen: number[] = [];
    const run = decode(toyModel(), [1, 2], {
      maxNewTokens: 10, mode: "recompute",
      onToken: (token, step) => {
        seen.push(token);
        return step === 1 ? "cancelled" : undefined;
      },
    });
    expect(run.generated).toEqual([3, 6]);
    expect(seen).toEqual([3, 6]);
    expect(run.finish).toBe("cancelled");
    expect(finishReasons).toContain(run.finish);
  });
});

describe("feeding a prompt in steps", () => {
  test("the same chunks as feed, a pause before each; stopping at a pause feeds nothing more", async () => {
    const whole: number[][] = [];
    const stepped: number[][] = [];
    const ids = [1, 2, 3, 4, 5, 6, 7];
    const logits = feed(toyModel(whole), { seen: [] }, ids, 3);
    const pauses: number[] = [];
    const r = await feedInSteps(toyModel(stepped), { seen: [] }, ids, 3, async (done) => (pauses.push(done), true));
    expect(stepped).toEqual(whole);
    expect(whole).toEqual([[1, 2, 3], [4, 5, 6], [7]]);
    expect(r).toEqual({ fed: 7, logits });
    expect(pauses).toEqual([0, 3, 6]);
    const cut: number[][] = [];
    const state = { seen: [] as number[] };
    const stopped = await feedInSteps(toyModel(cut), state, ids, 3, async (done) => done < 6);
    expect(stopped).toEqual({ fed: 6, logits: undefined });
    expect(state.seen).toEqual([1, 2, 3, 4, 5, 6]);
    expect(await feedInSteps(toyModel(), { seen: [] }, ids, undefined, async () => false)).toEqual({ fed: 0, logits: undefined });
    await expect(feedInSteps(toyModel(), { seen: [] }, [], 3, async () => true)).rejects.toThrow("no ids to feed");
    expect(() => feed(toyModel(), { seen: [] }, ids, 0)).toThrow("chunk size 0");
  });
});
