/**
 * A state file (src/model/state-file.ts, runtime.md 8): what `--load-state`, `k3 chat`'s /load
 * and `k3 serve`'s parked snapshots read. In process, read into a tiny13 state; through dist/k3,
 * resumed for two tokens. The seed holds five positions and one pending id.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { openEngine, type Engine } from "../../../src/engine/open.ts";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { readStateFile, writeStateFile } from "../../../src/model/state-file.ts";
import type { SequenceState } from "../../../src/model/state.ts";
import { read, runIds, tinyModel } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateBytes } from "../mutate.ts";
import { budgetRequest } from "../../../src/plan/budget.ts";

const positions = 16;
let opened: { engine: Engine; state: SequenceState } | undefined;

/** One tiny13 engine and state for every in-process input (opened on first use). */
function tinyState(): { engine: Engine; state: SequenceState } {
  if (!opened) {
    const { config } = loadConfig(join(tinyModel, "config.json"));
    const engine = openEngine({
      modelDir: tinyModel, config, layerCount: config.numLayers, positions, prefillChunk: 8, budgets: budgetRequest([]), trunkDir: undefined,
    });
    opened = { engine, state: engine.model.newState() };
  }
  return opened;
}

export const stateFileTarget: FuzzTarget = {
  name: "state-file",
  about: "a k3 state file: header, fingerprint, shape, sizes, ids, checksum (readStateFile), then a resumed run",
  seeds: (ctx) => {
    const { engine, state } = tinyState();
    state.reset();
    const ids = [3, 1, 4, 1, 5];
    engine.model.run(state, ids);
    const path = join(ctx.work, "seed.k3st");
    writeStateFile(path, state, [...ids, 9]);
    return [{ label: "tiny13, 5 positions + 1 pending", bytes: read(path) } satisfies Seed];
  },
  mutate: (input, rng) => mutateBytes(input, rng),
  parse(input, _seed, scratch) {
    const path = join(scratch, "in.k3st");
    writeFileSync(path, input);
    const { state } = tinyState();
    const { position, ids } = readStateFile(path, state);
    return `${position} ${ids.join(",")}`;
  },
  command(input, _seed, dir) {
    const path = join(dir, "in.k3st");
    writeFileSync(path, input);
    return { args: [tinyModel, "--load-state", path, "--gen", "2", "--out", "-"], names: [path] };
  },
  output: runIds,
  testCount: 200,
};
