/** `k3 demo` ships the oracle-proven tiny13 checkpoint: the assets must be the fixture's bytes. */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { modelDir } from "../support/fixtures.ts";

test("assets/demo holds tiny13's config and shard, byte for byte", () => {
  const assets = resolve(import.meta.dir, "../../assets/demo");
  for (const name of ["config.json", "model-00001-of-00001.safetensors"]) {
    const shipped = readFileSync(join(assets, name));
    expect(Buffer.compare(shipped, readFileSync(join(modelDir("tiny13"), name)))).toBe(0);
  }
});
