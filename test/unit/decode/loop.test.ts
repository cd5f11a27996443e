import { describe, expect, test } from "bun:test";
import { decode, feed, finishReasons } from "../../../src/decode/loop.ts";
import { argmax, greedy, type Sampler } from "../../../src/decode/sampler.ts";
import type { Forward } from "../../../src/model/sequence.ts";

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
  test("incremental feeds the prompt once, then one token; recompute feeds the whole prefix", async () => {
    const fed: number[][] = [];
    const model = toyModel(fed);
    const incremental = await decode(model, [1, 2], { maxNewTokens: 3, mode: "incremental" });
    expect(fed).toEqual([[1, 2], [3], [6]]);
    fed.length = 0;
    const recompute = await decode(model, [1, 2], { maxNewTokens: 3, mode: "recompute" });
    expect(fed).toEqual([[1, 2], [1, 2, 3], [1, 2, 3, 6]]);
    expect(recompute.generated).toEqual(incremental.generated);
    expect(incremental.generated).toEqual([3, 6, 5]);
    expect(incremental.finish).toBe("length");
    expect(Array.from(incremental.firstLogits!)).toEqual([0, 0, 0, 1, 0, 0, 0]);
  });

  test("the sampler picks every token: the model is asked the same either way", async () => {
    const fed: number[][] = [];
    const lowest: Sampler = { choose: () => 0 };
    const run = await decode(toyModel(fed), [1, 2], { maxNewTokens: 3, mode: "incremental", sampler: lowest });
    expect(run.generated).toEqual([0, 0, 0]);
    expect(fed).toEqual([[1, 2], [0], [0]]);
  });

  test("a stop id ends the run with 'stop' and is kept as the last id", async () => {
    const run = await decode(toyModel(), [1, 2], { maxNewTokens: 10, mode: "incremental", stopIds: new Set([6]) });
    expect(run.generated).toEqual([3, 6]);
    expect(run.finish).toBe("stop");
    expect(run.steps.map((s) => s.token)).toEqual([3, 6]);
  });

  test("onToken can end the run, with the reason it gives", async () => {
    const seen: number[] = [];
    const run = await decode(toyModel(), [1, 2], {
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

describe("the prefill inside decode", () => {
  const ids = [1, 2, 3, 4, 5, 6, 7];

  test("feed's chunks, plus a chunk end at each break; progress before the first chunk and after each", async () => {
    const whole: number[][] = [];
    const logits = feed(toyModel(whole), { seen: [] }, ids, 3);
    expect(whole).toEqual([[1, 2, 3], [4, 5, 6], [7]]);
    const stepped: number[][] = [];
    const progress: number[] = [];
    const run = await decode(toyModel(stepped), ids, { maxNewTokens: 1, mode: "incremental", prefillChunk: 3, onPrefill: (fed) => progress.push(fed) });
    expect(stepped).toEqual(whole);
    expect(progress).toEqual([0, 3, 6, 7]);
    expect(Array.from(run.firstLogits!)).toEqual(Array.from(logits));
    expect(run.promptFed).toBe(7);
    const broken: number[][] = [];
    const at: number[] = [];
    const split = await decode(toyModel(broken), ids, {
      maxNewTokens: 1, mode: "incremental", prefillChunk: 3, prefillBreaks: [0, 5, 7, 9], onPrefill: (fed) => at.push(fed),
    });
    expect(broken).toEqual([[1, 2, 3], [4, 5], [6, 7]]); // chunks count on from a break
    expect(at).toEqual([0, 3, 5, 7]);
    expect(split.generated).toEqual(run.generated); // the toy's answer depends only on the ids seen
  });

  test("cancelled before a chunk: the state holds exactly the chunks fed, nothing is generated", async () => {
    const state = { seen: [] as number[] };
    let chunks = 0;
    const stopped = await decode(toyModel(), ids, {
      maxNewTokens: 5, mode: "incremental", prefillChunk: 3, state, onPrefill: () => chunks++, cancelled: () => chunks > 2,
    });
    expect(stopped.finish).toBe("cancelled");
    expect(stopped.promptFed).toBe(6);
    expect(stopped.generated).toEqual([]);
    expect(state.seen).toEqual([1, 2, 3, 4, 5, 6]);
    const none = await decode(toyModel(), ids, { maxNewTokens: 5, mode: "incremental", cancelled: () => true });
    expect([none.finish, none.promptFed, none.generated.length]).toEqual(["cancelled", 0, 0]);
  });

  test("cancelled between tokens: the tokens so far are kept, the last one never fed", async () => {
    const state = { seen: [] as number[] };
    const tokens: number[] = [];
    const run = await decode(toyModel(), [1, 2], {
      maxNewTokens: 10, mode: "incremental", state, onToken: (t) => { tokens.push(t); }, cancelled: () => tokens.length >= 3,
    });
    expect(run.finish).toBe("cancelled");
    expect(run.generated).toEqual([3, 6, 5]);
    expect(state.seen).toEqual([1, 2, 3, 6]);
    const recomputed: number[] = [];
    const recompute = await decode(toyModel(), [1, 2], {
      maxNewTokens: 10, mode: "recompute", cancelled: () => recomputed.length >= 2, onToken: (t) => { recomputed.push(t); },
    });
    expect([recompute.finish, recompute.generated]).toEqual(["cancelled", [3, 6]]);
  });

  test("the event loop runs between steps: a timer set before decode fires before it ends", async () => {
    let fired = -1;
    const tokens: number[] = [];
    setTimeout(() => { fired = tokens.length; }, 1);
    const busy = (ms: number) => { for (const until = performance.now() + ms; performance.now() < until;); };
    // Each token takes 3 ms, so the timer is due by the first yield after the first token (or
    // already at the one after the prefill, on a machine slow enough to take 1 ms for it); with
    // no yields it would fire only after decode returned, and `fired` would still be -1 here.
    await decode(toyModel(), [1, 2], { maxNewTokens: 4, mode: "incremental", onToken: (t) => { tokens.push(t); busy(3); } });
    expect(fired).toBeGreaterThanOrEqual(0);
    expect(fired).toBeLessThan(4);
  });

  test("bad chunking and an empty prompt are refused", async () => {
    await expect(decode(toyModel(), [], { maxNewTokens: 1, mode: "incremental" })).rejects.toThrow("no ids to feed");
    expect(() => feed(toyModel(), { seen: [] }, ids, 0)).toThrow("chunk size 0");
    await expect(decode(toyModel(), [1], { maxNewTokens: 1, mode: "recompute", state: { seen: [] } })).rejects.toThrow("need incremental decode");
  });
});
