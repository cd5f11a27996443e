/**
 * Hybrid decode's draft model (runtime.md 9.3), in-process on nested14 with its int8 draft
 * trunk: the drafter's proposals and its state after every kind of sync equal a reference run of
 * the draft model fed the same ids (logits and state bit for bit); drafting never reads an
 * expert and leaves the exact model's cache untouched; cache-only routing keeps only resident
 * experts, renormalises them, and with none resident leaves the shared experts alone.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { ModelDrafter } from "../../../src/decode/model-drafter.ts";
import { argmax } from "../../../src/decode/sampler.ts";
import { openEngine, type Engine } from "../../../src/engine/open.ts";
import type { Model } from "../../../src/model/forward.ts";
import type { Forward } from "../../../src/model/sequence.ts";
import type { SequenceState } from "../../../src/model/state.ts";
import { gbToBytes } from "../../../src/units.ts";
import { CacheOnlyExperts } from "../../../src/weights/cache-only-experts.ts";
import type { ExpertCache } from "../../../src/weights/expert-cache.ts";
import { expectation, modelDir } from "../../support/fixtures.ts";
import { k3 } from "../../support/k3.ts";
import { tempDir } from "../../support/tmp.ts";
import { budgetRequest } from "../../../src/plan/budget.ts";

setDefaultTimeout(60_000);

const name = "nested14";
const dir = modelDir(name);
const prompt = expectation(name).tf.ids.slice(0, 12);
const positions = 64;

function openWithDraft(draftTrunk: string, cacheGb: number): Engine {
  const { config } = loadConfig(join(dir, "config.json"));
  return openEngine({
    modelDir: dir, config, layerCount: config.numLayers, positions, prefillChunk: 16,
    budgets: budgetRequest([{ kind: "cache", bytes: gbToBytes(cacheGb) }]), trunkDir: undefined,
    draft: { trunkDir: draftTrunk, budgetBytes: gbToBytes(1) },
  });
}

/** The draft model, recording the logits of every call and the state it ran on. */
function recording(model: Model): Forward<SequenceState> & { calls: { ids: number[]; logits: Float32Array }[]; last?: SequenceState } {
  const r = {
    vocabSize: model.vocabSize,
    calls: [] as { ids: number[]; logits: Float32Array }[],
    last: undefined as SequenceState | undefined,
    newState: () => model.newState(),
    release: (s: SequenceState) => model.release(s),
    run: (s: SequenceState, ids: readonly number[]) => {
      const logits = model.run(s, ids);
      r.calls.push({ ids: [...ids], logits });
      r.last = s;
      return logits;
    },
  };
  return r;
}

/** A fresh draft state fed `ids` in one call: its logits and state are what the drafter's must equal. */
function reference(model: Model, ids: readonly number[], chain: number) {
  const state = model.newState();
  let logits = model.run(state, ids);
  const rows = [logits];
  const drafts: number[] = [];
  for (let i = 0; i < chain; i++) {
    const d = argmax(logits);
    drafts.push(d);
    if (i + 1 < chain) {
      logits = model.run(state, [d]);
      rows.push(logits);
    }
  }
  return { state, rows, drafts };
}

function expectSameState(a: SequenceState, b: SequenceState): void {
  expect(a.position).toBe(b.position);
  const pa = a.parts(a.position);
  const pb = b.parts(b.position);
  expect(pa.length).toBe(pb.length);
  pa.forEach((part, i) => expect(Buffer.from(part.buffer, part.byteOffset, part.byteLength).equals(Buffer.from(pb[i]!.buffer, pb[i]!.byteOffset, pb[i]!.byteLength))).toBe(true));
}

const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe("the draft model as a Drafter", () => {
  let draftTrunk = "";
  let engine: Engine;
  beforeAll(() => {
    const trunk = join(tempDir("drafter"), "trunk");
    draftTrunk = join(tempDir("drafter"), "draft");
    expect(k3(["pack-trunk", dir, trunk]).code).toBe(0);
    expect(k3(["quantize-trunk", trunk, draftTrunk]).code).toBe(0);
    // A cache of top-k + 1 slots: after a prefill most experts are gone, so drafts skip some.
    engine = openWithDraft(draftTrunk, 0);
    engine.model.release((() => {
      const s = engine.model.newState();
      engine.model.run(s, prompt);
      return s;
    })());
  });
  afterAll(() => engine?.close());

  test("propose after sync: each draft step's logits and the state equal a reference run of the draft model", () => {
    const draft = engine.draft!;
    const model = recording(draft.model);
    const drafter = new ModelDrafter(model, { chunk: 5 });
    try {
      drafter.sync(prompt.slice(0, 11));
      const pending = prompt[11] as number;
      model.calls.length = 0;
      const proposed = drafter.propose([...prompt.slice(0, 11), pending], 4);
      expect(proposed.length).toBe(4);
      const ref = reference(draft.model, prompt, 4);
      expect(proposed).toEqual(ref.drafts);
      expect(model.calls.map((c) => c.ids)).toEqual([[pending], ...ref.drafts.slice(0, 3).map((d) => [d])]);
      model.calls.forEach((c, i) => expect(bits(c.logits).equals(bits(ref.rows[i]!))).toBe(true));
      expectSameState(model.last!, ref.state);
      draft.model.release(ref.state);
    } finally {
      drafter.close();
    }
  });

  test("sync after a partial acceptance restores the snapshot and replays; after a full one it feeds the last draft; a step without a draft feeds its id", () => {
    const draft = engine.draft!;
    const model = recording(draft.model);
    const drafter = new ModelDrafter(model, { chunk: 64 });
    try {
      const base = prompt.slice(0, 8);
      drafter.sync(base.slice(0, 7));
      const d = drafter.propose(base, 4);
      // The exact model kept the pending id and d0, then chose something else.
      const other = (d[1]! + 1) % draft.model.vocabSize;
      const kept = [...base, d[0]!, other];
      drafter.sync(kept);
      expect(drafter.stats.restores).toBe(1);
      expect(drafter.fed).toEqual(kept);
      let ref = reference(draft.model, kept, 1);
      expectSameState(model.last!, ref.state);
      expect(bits(model.calls.at(-1)!.logits).equals(bits(ref.rows[0]!))).toBe(true);
      draft.model.release(ref.state);

      // Full acceptance: the exact side fed the pending id and all four drafts.
      const e = drafter.propose([...kept, 7], 4);
      const accepted = [...kept, 7, ...e];
      const fedBefore = drafter.stats.fedIds;
      drafter.sync(accepted);
      expect(drafter.stats.fedIds - fedBefore).toBe(1); // only the last draft id was missing
      expect(drafter.stats.restores).toBe(1);
      ref = reference(draft.model, accepted, 1);
      expectSameState(model.last!, ref.state);
      draft.model.release(ref.state);

      // No draft this step: the exact model fed one id, so does the draft.
      drafter.sync([...accepted, 3]);
      expect(drafter.fed).toEqual([...accepted, 3]);
      ref = reference(draft.model, [...accepted, 3], 1);
      expectSameState(model.last!, ref.state);
      draft.model.release(ref.state);
      expect(drafter.stats.rebuilds).toBe(0);
    } finally {
      drafter.close();
    }
  });

  test("a draft never reads an expert and leaves the exact model's cache as it was; misses are skipped, not dropped", () => {
    const draft = engine.draft!;
    const cache = engine.experts;
    const before = { reads: cache.readsIssued, total: { ...cache.total }, step: { ...cache.step }, resident: cache.residentSlots, drops: cache.drops.length };
    const stats = { ...draft.experts.stats };
    const drafter = new ModelDrafter(draft.model, { chunk: 4 });
    try {
      drafter.sync(prompt);
      for (let i = 0; i < 3; i++) drafter.sync([...drafter.fed, ...drafter.propose([...drafter.fed, 5 + i], 4).slice(0, 2)]);
    } finally {
      drafter.close();
    }
    expect(cache.readsIssued).toBe(before.reads);
    expect(cache.total).toEqual(before.total);
    expect(cache.step).toEqual(before.step);
    expect(cache.residentSlots).toBe(before.resident);
    expect(cache.drops.length).toBe(before.drops);
    const picks = draft.experts.stats.picks - stats.picks;
    const served = draft.experts.stats.served - stats.served;
    expect(picks).toBeGreaterThan(0);
    expect(served).toBeGreaterThan(0);
    expect(draft.experts.stats.skipped - stats.skipped).toBeGreaterThan(0); // the small cache misses some
    expect(served + draft.experts.stats.skipped - stats.skipped).toBe(picks);
  });

  test("with nothing resident the draft runs on the shared experts alone, and still reads nothing", () => {
    const cold = openWithDraft(draftTrunk, 1);
    try {
      const draft = cold.draft!;
      const drafter = new ModelDrafter(draft.model, { chunk: 64 });
      drafter.sync(prompt);
      drafter.close();
      const moeLayers = cold.config.numLayers - cold.config.firstKDenseReplace;
      expect(draft.experts.stats.served).toBe(0);
      expect(draft.experts.stats.sharedOnly).toBe(prompt.length * moeLayers);
      expect(draft.experts.stats.picks).toBe(prompt.length * moeLayers * cold.config.numExpertsPerToken);
      expect(cold.experts.readsIssued).toBe(0);
    } finally {
      cold.close();
    }
  });
});

describe("cache-only routing", () => {
  const residentOnly = (resident: number[]) => ({ peek: (_layer: number, e: number) => (resident.includes(e) ? {} : undefined) }) as unknown as ExpertCache;

  test("keeps the resident picks, renormalised to the whole top-k's sum in f64, one f32 rounding each; others weigh 0", () => {
    const only = new CacheOnlyExperts(residentOnly([3, 9]));
    const routing = { experts: new Int32Array([3, 5, 9, 1, 2, 4]), weights: new Float32Array([0.5, 0.3, 0.2, 0.6, 0.3, 0.1]) };
    const w = Array.from(routing.weights);
    only.restrict(0, routing, 2, 3);
    const all = w[0]! + w[1]! + w[2]!;
    const kept = w[0]! + w[2]!;
    expect(Array.from(routing.weights)).toEqual([Math.fround(w[0]! * (all / kept)), 0, Math.fround(w[2]! * (all / kept)), 0, 0, 0]);
    expect(only.stats).toEqual({ picks: 6, served: 2, skipped: 4, sharedOnly: 1 });
  });

  test("every pick resident: the router's weights untouched", () => {
    const only = new CacheOnlyExperts(residentOnly([1, 2]));
    const routing = { experts: new Int32Array([2, 1]), weights: new Float32Array([0.7, 0.3]) };
    only.restrict(4, routing, 1, 2);
    expect(Array.from(routing.weights)).toEqual([Math.fround(0.7), Math.fround(0.3)]);
  });
});
