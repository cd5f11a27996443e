/**
 * A state file (src/model/state-file.ts) as `--load-state FILE` reads it: header, fingerprint,
 * shape, sizes against the file, ids, payload, checksum. The seed is tiny13's state after a run.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { readStateFile } from "../../../src/model/state-file.ts";
import { SequenceState } from "../../../src/model/state.ts";
import { executablePath } from "../../../tools/build.ts";
import { promptIds, read, runIds, tinyModel } from "../fixtures.ts";
import type { FuzzContext, FuzzTarget, Seed } from "../harness.ts";
import { mutateBytes } from "../mutate.ts";

/** Positions the in-process state holds: the seed's 12 and room for a grown header to claim more. */
const capacity = 64;
let state: SequenceState | undefined;

function savedState(ctx: FuzzContext): Uint8Array {
  const path = join(ctx.work, "tiny13.k3st");
  if (!existsSync(path)) {
    const r = Bun.spawnSync([executablePath, tinyModel, "--ids", promptIds, "--gen", "3", "--out", join(ctx.work, "state-run.json"), "--save-state", path], { stderr: "pipe" });
    if (r.exitCode !== 0) throw new Error(`saving the seed state failed: ${r.stderr.toString().slice(-400)}`);
  }
  return read(path);
}

export const stateFileTarget: FuzzTarget = {
  name: "state-file",
  about: "a state file: readStateFile (magic, version, fingerprint, shape, sizes, ids, checksum)",
  seeds: (ctx) => [{ label: "tiny13 after 3 tokens", bytes: savedState(ctx) } satisfies Seed],
  mutate: (input, rng) => mutateBytes(input, rng),
  parse(input, _seed, scratch) {
    const path = join(scratch, "state.k3st");
    writeFileSync(path, input);
    state ??= new SequenceState(loadConfig(join(tinyModel, "config.json")).config, 13, capacity);
    state.reset();
    return JSON.stringify(readStateFile(path, state));
  },
  command(input, _seed, dir) {
    const path = join(dir, "state.k3st");
    writeFileSync(path, input);
    return { args: [tinyModel, "--load-state", path, "--gen", "2", "--out", "-"], names: [path] };
  },
  output: runIds,
};
