import { describe, expect, test } from "bun:test";
import { argmax, decode, type Forward } from "../../src/decode/greedy.ts";

describe("greedy choice", () => {
  test("ties go to the lowest id; NaN never wins", () => {
    expect(argmax(new Float32Array([1, 3, 3, 2]))).toBe(1);
    expect(argmax(new Float32Array([NaN, -1, -1]))).toBe(1);
    expect(argmax(new Float32Array([-Infinity, -Infinity]))).toBe(0);
  });

  test("incremental feeds the prompt once, then one token; recompute feeds the whole prefix", () => {
    const fed: number[][] = [];
    // A toy model whose next token is the sum of everything it has seen, mod 7.
    const model: Forward<{ seen: number[] }> = {
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
    const incremental = decode(model, [1, 2], 3, "incremental");
    expect(fed).toEqual([[1, 2], [3], [6]]);
    fed.length = 0;
    const recompute = decode(model, [1, 2], 3, "recompute");
    expect(fed).toEqual([[1, 2], [1, 2, 3], [1, 2, 3, 6]]);
    expect(recompute.generated).toEqual(incremental.generated);
    expect(incremental.generated).toEqual([3, 6, 5]);
    expect(Array.from(incremental.firstLogits!)).toEqual([0, 0, 0, 1, 0, 0, 0]);
  });
});
