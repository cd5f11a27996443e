/** An expert trace for `k3 sim-cache` (src/weights/expert-trace.ts): int32 (layer, expert) pairs. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { decodeTrace, encodeTrace } from "../../../src/weights/expert-trace.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateBytes } from "../mutate.ts";

/** Six tokens through twelve MoE layers, top-2 of eight experts, in a fixed pattern. */
function tracePairs(): Int32Array {
  const pairs: number[] = [];
  for (let token = 0; token < 6; token++) {
    for (let layer = 1; layer <= 12; layer++) pairs.push(layer, (token * 3 + layer) % 8, layer, (token + 5 * layer) % 8);
  }
  return Int32Array.from(pairs);
}

export const expertTraceTarget: FuzzTarget = {
  name: "expert-trace",
  about: "expert_trace.bin: decodeTrace (whole pairs, id ranges), then the cache simulation",
  seeds: () => [{ label: "six tokens", bytes: encodeTrace(tracePairs()) } satisfies Seed],
  mutate: (input, rng) => mutateBytes(input, rng),
  parse(input) {
    const trace = decodeTrace(input, "expert_trace.bin");
    return `${Bun.hash.wyhash(new Uint8Array(trace.layers.buffer), 0n)} ${Bun.hash.wyhash(new Uint8Array(trace.experts.buffer), 0n)}`;
  },
  command(input, _seed, dir) {
    const path = join(dir, "expert_trace.bin");
    writeFileSync(path, input);
    return { args: ["sim-cache", path], names: [path] };
  },
};
