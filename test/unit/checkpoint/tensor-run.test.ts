import { describe, expect, test } from "bun:test";
import type { TensorEntry } from "../../../src/checkpoint/safetensors.ts";
import { placeTensors } from "../../../src/checkpoint/tensor-run.ts";

const entry = (name: string, shard: number, offset: number, nbytes: number): TensorEntry => ({
  name, shard, dtype: "U8", shape: [nbytes], offset, nbytes,
});

describe("placeTensors", () => {
  test("one contiguous run keeps each tensor's offset from the run's start, in any listed order", () => {
    const placed = placeTensors([entry("b", 1, 1010, 30), entry("a", 1, 1000, 10), entry("c", 1, 1040, 5)]);
    expect(placed).toEqual({ run: { shard: 1, start: 1000 }, bytes: 45, offsets: [10, 0, 40] });
  });

  test("a gap means no run: the tensors are packed back to back, 64-byte aligned", () => {
    const placed = placeTensors([entry("a", 0, 0, 10), entry("b", 0, 11, 70), entry("c", 0, 81, 1)]);
    expect(placed).toEqual({ run: undefined, bytes: 256, offsets: [0, 64, 192] });
  });

  test("adjacent bytes of two shards are not one run", () => {
    const placed = placeTensors([entry("a", 0, 0, 64), entry("b", 1, 64, 64)]);
    expect(placed).toEqual({ run: undefined, bytes: 128, offsets: [0, 64] });
  });
});
