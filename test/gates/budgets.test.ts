/**
 * Memory is a dial: the same ids at every budget. For both fixture models and both decode
 * modes: resident; streamed with every layer pinned; streamed with nothing pinned and a single
 * ring slot; one slot with room to read part of each next layer ahead (so reads ahead land beside
 * a layer in use and the rest after it); two slots; and an expert cache of only top-k + 1 slots.
 * The compressed pack (`k3 pack-trunk --compress`) too: every layer pinned as stored, none, a
 * part, and ultra-low-memory mode.
 *
 * The runs are the run command's in this process (test/support/run-in-process.ts), with the
 * safety-checked kernels; the last test of each model runs the smallest budget through dist/k3.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir, oracleModels, packedFixtureTrunk } from "../support/fixtures.ts";
import { k3 } from "../support/k3.ts";
import { runInProcess } from "../support/run-in-process.ts";

interface Placement {
  mode: "resident" | "streamed";
  plan?: { pinned: number; ring_slots: number; raised: boolean; slot_bytes: number; ring_bytes: number };
}

interface Budgeted {
  ids: number[];
  trunk: Placement;
  /** Trunk bytes read ahead of need (streamed runs). */
  ahead: number;
  cache: { slots: number; requested_slots: number; minimum_slots: number };
}

const budgeted = (results: { generated_ids: number[]; plan: { trunk: Placement; expert_cache: Budgeted["cache"] }; trunk_stats?: { ahead_bytes: number } | null }): Budgeted => ({
  ids: results.generated_ids, trunk: results.plan.trunk, cache: results.plan.expert_cache, ahead: results.trunk_stats?.ahead_bytes ?? 0,
});

async function run(args: string[]): Promise<Budgeted> {
  return budgeted((await runInProcess(args)).json);
}

function runBinary(args: string[]): Budgeted {
  const r = k3([...args, "--out", "-"]);
  if (r.code !== 0) throw new Error(`k3 exited ${r.code}: ${r.stderr}`);
  return budgeted(JSON.parse(r.stdout));
}

for (const name of oracleModels) {
  describe(`${name}: ids identical at every budget`, () => {
    const want = expectation(name);
    const dir = modelDir(name);
    let trunk = "";
    let twoSlotsGb = "";
    let partialGb = "";
    let layerCount = 0;
    let compressed = "";
    let partialCompressedGb = "";
    beforeAll(() => {
      trunk = packedFixtureTrunk(name);
      compressed = packedFixtureTrunk(name, true);
      // The decoded slot, two staging pieces and about half the stored layers pinned.
      const stored = (JSON.parse(readFileSync(join(compressed, "trunk.json"), "utf8")) as { layers: { nbytes: number; payload_bytes: number }[] }).layers;
      const half = stored.slice(0, stored.length >> 1).reduce((sum, l) => sum + l.nbytes, 0);
      partialCompressedGb = ((1.1 * Math.max(...stored.map((l) => l.payload_bytes)) + 2.1 * Math.max(...stored.map((l) => l.nbytes)) + half) / 1e9).toFixed(9);
      // Room for two slots of the largest layer but not for the whole trunk.
      const layers = (JSON.parse(readFileSync(join(trunk, "trunk.json"), "utf8")) as { layers: { nbytes: number }[] }).layers;
      layerCount = layers.length;
      twoSlotsGb = ((2.3 * Math.max(...layers.map((l) => l.nbytes))) / 1e9).toFixed(9);
      // One slot and half another: the next layer fits only partly beside the one in use.
      partialGb = ((1.5 * Math.max(...layers.map((l) => l.nbytes))) / 1e9).toFixed(9);
    });
    const base = () => [dir, "--ids", want.prompt_ids.join(","), "--gen", "12"];
    const streamed = (pinned: (p: number) => boolean, slots: number) => (r: Budgeted) =>
      r.trunk.mode === "streamed" && pinned(r.trunk.plan!.pinned) && r.trunk.plan!.ring_slots === slots;
    const minimalCache = (r: Budgeted) => r.cache.requested_slots === 0 && r.cache.slots === r.cache.minimum_slots;
    const budgets: [string, () => string[], (r: Budgeted) => boolean][] = [
      ["resident trunk", () => [], (r) => r.trunk.mode === "resident"],
      ["everything pinned", () => ["--trunk", trunk, "--trunk-gb", "100"], streamed((p) => p === layerCount, 0)],
      ["nothing pinned, a single ring slot", () => ["--trunk", trunk, "--trunk-gb", "0"], (r) => streamed((p) => p === 0, 1)(r) && r.trunk.plan!.raised],
      ["a partial pin and two ring slots with read-ahead", () => ["--trunk", trunk, "--trunk-gb", twoSlotsGb], (r) => streamed((p) => p < layerCount, 2)(r) && r.ahead > 0],
      ["one ring slot and room to read part of each next layer ahead", () => ["--trunk", trunk, "--trunk-gb", partialGb],
        (r) => streamed((p) => p === 0, 1)(r) && r.trunk.plan!.ring_bytes > r.trunk.plan!.slot_bytes && r.ahead > 0]
      ,
      ["an expert cache of top-k + 1 slots", () => ["--cache-gb", "0"], minimalCache],
      ["compressed, everything pinned as stored", () => ["--trunk", compressed, "--trunk-gb", "100"], streamed((p) => p === layerCount, 1)],
      ["compressed, nothing pinned", () => ["--trunk", compressed, "--trunk-gb", "0"], (r) => streamed((p) => p === 0, 1)(r) && r.trunk.plan!.raised && r.ahead > 0],
      ["compressed, a partial pin", () => ["--trunk", compressed, "--trunk-gb", partialCompressedGb], streamed((p) => p > 0 && p < layerCount, 1)],
      ["compressed, ultra-low-memory", () => ["--trunk", compressed, "--ultra-low-memory"], (r) => r.trunk.mode === "streamed"],
      ["streamed, single slot, minimal cache", () => ["--trunk", trunk, "--trunk-gb", "0", "--cache-gb", "0"], (r) => streamed((p) => p === 0, 1)(r) && minimalCache(r)],
    ];
    for (const mode of ["--incremental", "--recompute"]) {
      for (const [label, extra, placed] of budgets) {
        test(`${mode}: ${label}`, async () => {
          const r = await run([...base(), mode, ...extra()]);
          expect(placed(r)).toBe(true);
          expect(r.ids).toEqual(want.generated_ids.slice(0, 12));
        }, 60_000);
      }
    }

    test("through dist/k3: streamed, single slot, minimal cache, both modes", () => {
      const [, extra, placed] = budgets.at(-1)!;
      for (const mode of ["--incremental", "--recompute"]) {
        const r = runBinary([...base(), mode, ...extra()]);
        expect(placed(r)).toBe(true);
        expect(r.ids).toEqual(want.generated_ids.slice(0, 12));
      }
    }, 60_000);
  });
}
