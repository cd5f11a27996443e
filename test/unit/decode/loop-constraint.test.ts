/**
 * A constraint in the decode loop (decode/constraint.ts) on a fixture model: each chosen id is
 * the argmax of the allowed ids of the row (a brute-force serial reference, one id per forward
 * call), forced ids are fed several in one forward call and give the same ids and logits, and the
 * constrained run is the same incremental, recomputed, speculative (any drafts), batched and
 * seeded twice. Without a constraint nothing changes (the loop's other tests).
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { maskOf, type Constraint, type TokenMask } from "../../../src/decode/constraint.ts";
import { decode, type DecodeOptions } from "../../../src/decode/loop.ts";
import { ngramDrafter } from "../../../src/decode/ngram-drafter.ts";
import { createSampler } from "../../../src/decode/sampling.ts";
import { samplingDefaults } from "../../../src/decode/sampling-options.ts";
import { StepBatcher } from "../../../src/decode/step-batch.ts";
import type { Forward } from "../../../src/model/sequence.ts";
import type { SequenceState } from "../../../src/model/state.ts";
import { expectation, openFixture } from "../../support/fixtures.ts";

setDefaultTimeout(60_000);

const name = "nested14";
const prompt = expectation(name).tf.ids.slice(0, 10);
const gen = 30;

/** Steps 3-5, 11-12 and 20-23 are forced (a fixed id each); every other step allows the ids of one residue mod 3. */
const forcedAt = (k: number) => (k >= 3 && k <= 5) || k === 11 || k === 12 || (k >= 20 && k <= 23);
const forcedId = (k: number, V: number) => (k * 37 + 5) % V;
const allowedAt = (k: number, V: number) => Array.from({ length: V }, (_, id) => id).filter((id) => id % 3 === k % 3);

class Scripted implements Constraint {
  k = 0;
  forcedCalls = 0;
  constructor(readonly V: number) {}
  async allowed(): Promise<TokenMask> {
    return maskOf(this.V, forcedAt(this.k) ? [forcedId(this.k, this.V)] : allowedAt(this.k, this.V));
  }
  accept(id: number): void {
    const ok = forcedAt(this.k) ? id === forcedId(this.k, this.V) : id % 3 === this.k % 3;
    if (!ok) throw new Error(`id ${id} is not allowed at step ${this.k}`);
    this.k++;
  }
  async takeForced(limit: number): Promise<number[]> {
    const out: number[] = [];
    while (out.length < limit && forcedAt(this.k)) {
      out.push(forcedId(this.k, this.V));
      this.accept(out[out.length - 1] as number);
    }
    if (out.length > 0) this.forcedCalls++;
    return out;
  }
}

/** The reference: one id per forward call, argmax (lowest id on ties) over the ids allowed at each step. */
function serial(): number[] {
  using engine = openFixture(name, prompt.length + gen + 1);
  const model = engine.model;
  const V = model.vocabSize;
  const state = model.newState();
  let logits = model.run(state, prompt);
  const ids: number[] = [];
  for (let k = 0; k < gen; k++) {
    let id = -1;
    if (forcedAt(k)) id = forcedId(k, V);
    else for (const a of allowedAt(k, V)) if (id < 0 || (logits[a] as number) > (logits[id] as number)) id = a;
    ids.push(id);
    if (k < gen - 1) logits = model.run(state, [id]);
  }
  model.release(state);
  return ids;
}

async function constrained(extra: Partial<DecodeOptions<SequenceState>> = {}) {
  using engine = openFixture(name, prompt.length + gen + 8);
  const constraint = new Scripted(engine.model.vocabSize);
  const calls: number[] = [];
  const inner = engine.model;
  const model: Forward<SequenceState> = {
    vocabSize: inner.vocabSize,
    newState: () => inner.newState(),
    release: (state) => inner.release(state),
    run: (state, ids, outputs, options) => {
      calls.push(ids.length);
      return inner.run(state, ids, outputs, options);
    },
  };
  const result = await decode(model, prompt, { maxNewTokens: gen, mode: "incremental", constraint, prefillChunk: 64, ...extra });
  return { ...result, calls, constraint };
}

describe("a constraint in the decode loop", () => {
  const reference = serial();

  test("greedy: every id is the argmax of the allowed ids; forced ids go in with the pending id, in one call", async () => {
    const r = await constrained();
    expect(r.generated).toEqual(reference);
    expect(r.forcedIds).toBe(9);
    // The prefill, then one call per chosen id, the three forced runs each riding with the id before them.
    expect(r.calls.filter((n) => n > 1 && n < prompt.length)).toEqual([4, 3, 5]);
    expect(r.constraint.forcedCalls).toBe(3);
  });

  test("recomputed from scratch each step: the same ids", async () => {
    const r = await constrained({ mode: "recompute" });
    expect(r.generated).toEqual(reference);
  });

  test("with speculative drafts (whatever they propose): the same ids", async () => {
    const r = await constrained({ speculative: { drafter: ngramDrafter, maxDraft: 4 } });
    expect(r.generated).toEqual(reference);
    const wrong = await constrained({ speculative: { drafter: { propose: (_s, max) => Array.from({ length: max }, (_, i) => i) }, maxDraft: 3 } });
    expect(wrong.generated).toEqual(reference);
    expect(wrong.speculation!.sweeps).toBeGreaterThan(0);
  });

  test("batched with another constrained sequence: each the ids it gets alone", async () => {
    using engine = openFixture(name, prompt.length + gen + 8);
    const batcher = new StepBatcher(engine.model);
    const run = () => decode(engine.model, prompt, {
      maxNewTokens: gen, mode: "incremental", constraint: new Scripted(engine.model.vocabSize), prefillChunk: 64, state: engine.model.newState(), batch: batcher,
    });
    const [a, b] = await Promise.all([run(), run()]);
    expect(a!.generated).toEqual(reference);
    expect(b!.generated).toEqual(reference);
    expect(batcher.stats.maxSequences).toBe(2);
  });

  test("seeded sampling under the mask: only allowed ids, the same ids for the same seed, fewer draws than ids", async () => {
    const sampling = { ...samplingDefaults.chat, temperature: 1, topP: 1, seed: 5 };
    const one = await constrained({ sampler: createSampler(sampling) });
    const two = await constrained({ sampler: createSampler(sampling) });
    // Scripted.accept throws on a disallowed id: a run that ends chose allowed ids only.
    expect(one.generated).toEqual(two.generated);
    expect(one.generated.length).toBe(gen);
    expect(one.forcedIds).toBe(9);
  });

  test("the budget ends inside a forced run: the run is cut, the state keeps the loop's invariant", async () => {
    const r = await constrained({ maxNewTokens: 5 });
    expect(r.generated).toEqual(reference.slice(0, 5));
    expect(r.finish).toBe("length");
  });

  test("a constraint that allows nothing is an error, not a silent id", async () => {
    using engine = openFixture(name, prompt.length + 4);
    const none: Constraint = { allowed: async () => maskOf(engine.model.vocabSize, []), accept: () => {}, takeForced: async () => [] };
    await expect(decode(engine.model, prompt, { maxNewTokens: 2, mode: "incremental", constraint: none })).rejects.toThrow(/allows no id/);
  });
});

describe("the state a constrained run leaves", () => {
  test("holds the prompt and every id but the last, as an unconstrained run's does: the next logits equal a fresh state's", async () => {
    using engine = openFixture(name, prompt.length + gen + 8);
    const model = engine.model;
    for (const maxNewTokens of [gen, 5, 12]) {
      const state = model.newState();
      const r = await decode(model, prompt, { maxNewTokens, mode: "incremental", constraint: new Scripted(model.vocabSize), prefillChunk: 64, state });
      expect(state.position).toBe(prompt.length + r.generated.length - 1);
      const last = r.generated[r.generated.length - 1] as number;
      const carried = model.run(state, [last]).slice();
      const fresh = model.newState();
      const want = model.run(fresh, [...prompt, ...r.generated]);
      expect(Buffer.from(carried.buffer).equals(Buffer.from(want.buffer))).toBe(true);
      model.release(state);
      model.release(fresh);
    }
  });
});
