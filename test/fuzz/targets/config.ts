/** config.json (src/checkpoint/config.ts), flat and nested, read as `--config FILE`. */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { nestedModel, read, runIds, runTail, tinyModel } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

interface ConfigSeed extends Seed {
  model: string;
}

export const configTarget: FuzzTarget<ConfigSeed> = {
  name: "config",
  about: "config.json: loadConfig (size cap, strict JSON, field types, ceilings, meanings)",
  seeds: () => [tinyModel, nestedModel].map((model) => ({ label: `${model}/config.json`, bytes: read(join(model, "config.json")), model })),
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse(input, _seed, scratch) {
    const path = join(scratch, "config.json");
    writeFileSync(path, input);
    return JSON.stringify(loadConfig(path).config);
  },
  command(input, seed, dir) {
    const path = join(dir, "config.json");
    writeFileSync(path, input);
    // A config that parses can still conflict with the request: then the flag is what is named.
    return { args: [seed.model, "--config", path, ...runTail], names: [path, seed.model, "--ids", "--gen"] };
  },
  output: runIds,
};
