/**
 * Memory is a dial: the same ids at every budget. Through dist/k3, for both fixture models and
 * both decode modes: resident; streamed with every layer pinned; streamed with nothing pinned
 * and a single ring slot; and an expert cache of only top-k + 1 slots.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir, oracleModels } from "../support/fixtures.ts";
import { k3 } from "../support/k3.ts";
import { tempDir } from "../support/tmp.ts";

function ids(args: string[]): { ids: number[]; stderr: string } {
  const r = k3([...args, "--out", "-"]);
  if (r.code !== 0) throw new Error(`k3 exited ${r.code}: ${r.stderr}`);
  return { ids: JSON.parse(r.stdout).generated_ids as number[], stderr: r.stderr };
}

for (const name of oracleModels) {
  describe(`${name}: ids identical at every budget`, () => {
    const want = expectation(name);
    const dir = modelDir(name);
    let trunk = "";
    let twoSlotsGb = "";
    beforeAll(() => {
      trunk = join(tempDir("trunk"), "packed");
      const r = k3(["pack-trunk", dir, trunk]);
      expect(r.code).toBe(0);
      // Room for two slots of the largest layer but not for the whole trunk.
      const layers = (JSON.parse(readFileSync(join(trunk, "trunk.json"), "utf8")) as { layers: { nbytes: number }[] }).layers;
      twoSlotsGb = ((2.3 * Math.max(...layers.map((l) => l.nbytes))) / 1e9).toFixed(9);
    });
    const base = () => [dir, "--ids", want.prompt_ids.join(","), "--gen", "12"];
    const budgets: [string, () => string[], RegExp][] = [
      ["resident trunk", () => [], /resident trunk/],
      ["everything pinned", () => ["--trunk", trunk, "--trunk-gb", "100"], /(\d+)\/\1 layers PINNED/],
      ["nothing pinned, a single ring slot", () => ["--trunk", trunk, "--trunk-gb", "0"], /0\/\d+ layers PINNED.*ring 1 x/],
      ["a partial pin and two ring slots with read-ahead", () => ["--trunk", trunk, "--trunk-gb", twoSlotsGb], /\b[0-5]\/1[34] layers PINNED.*ring 2 x/],
      ["an expert cache of top-k + 1 slots", () => ["--cache-gb", "0"], /raised from 0 to the top-k \+ 1 minimum/],
      ["streamed, single slot, minimal cache", () => ["--trunk", trunk, "--trunk-gb", "0", "--cache-gb", "0"], /ring 1 x/],
    ];
    for (const mode of ["--incremental", "--recompute"]) {
      for (const [label, extra, banner] of budgets) {
        test(`${mode}: ${label}`, () => {
          const run = ids([...base(), mode, ...extra()]);
          expect(run.stderr).toMatch(banner);
          expect(run.ids).toEqual(want.generated_ids.slice(0, 12));
        }, 60_000);
      }
    }
  });
}
