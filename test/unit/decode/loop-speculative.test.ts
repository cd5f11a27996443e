/**
 * Speculative decode (runtime.md 9.1-9.2) on a fixture model through the decode loop: whatever
 * the drafts (always right, wrong after a few ids, none), the emitted ids and the logits they
 * were chosen from equal serial decode bit for bit, greedy and seeded, and the state left at the
 * end is the serial one (its state file has the same bytes). The n-gram drafter drafts only
 * what the two most recent occurrences agree on.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Drafter } from "../../../src/decode/drafter.ts";
import { decode } from "../../../src/decode/loop.ts";
import { ngramDrafter } from "../../../src/decode/ngram-drafter.ts";
import { argmax, type Sampler } from "../../../src/decode/sampler.ts";
import { createSampler } from "../../../src/decode/sampling.ts";
import { samplingDefaults } from "../../../src/decode/sampling-options.ts";
import type { Forward } from "../../../src/model/sequence.ts";
import type { SequenceState } from "../../../src/model/state.ts";
import { writeStateFile } from "../../../src/model/state-file.ts";
import { expectation, openFixture } from "../../support/fixtures.ts";
import { tempDir } from "../../support/tmp.ts";

setDefaultTimeout(30_000);

describe("the n-gram drafter (runtime.md 9.1)", () => {
  const propose = (sequence: number[], max = 8) => ngramDrafter.propose(sequence, max);

  test("the continuation of the most recent earlier occurrence of the last 4 ids, up to max, never past the end", () => {
    expect(propose([1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4], 3)).toEqual([5, 6, 7]);
    expect(propose([1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 4], 2)).toEqual([5, 6]);
    // The continuation stops at the current end of the sequence.
    expect(propose([1, 2, 3, 4, 9, 1, 2, 3, 4])).toEqual([9, 1, 2, 3, 4]);
  });

  test("no 4-gram match: 3 ids; none at all: no draft; too short a sequence: no draft", () => {
    expect(propose([7, 2, 3, 4, 5, 8, 2, 3, 4])).toEqual([5, 8, 2, 3, 4]);
    expect(propose([1, 2, 3, 4, 5, 6, 7, 8])).toEqual([]);
    expect(propose([2, 3, 4])).toEqual([]);
  });

  test("two occurrences: only what both continuations agree on, never running into the most recent one", () => {
    // Occurrences of [1,2,3] at 0 and 5 (m2, m1); continuations 7,8,... and 7,9,...: they agree on one id.
    expect(propose([1, 2, 3, 7, 8, 1, 2, 3, 7, 9, 1, 2, 3])).toEqual([7]);
    // Disagreeing at once: nothing is drafted for n = 3, and no 4-gram matches.
    expect(propose([1, 2, 3, 6, 8, 1, 2, 3, 7, 0, 1, 2, 3])).toEqual([]);
    // m2's continuation reaches m1's occurrence after one agreed id: the draft stops there.
    expect(propose([1, 2, 3, 5, 1, 2, 3, 5, 8, 8, 1, 2, 3])).toEqual([5]);
    // A run of one id: every continuation of m2 runs into m1 at once.
    expect(propose([5, 5, 5, 5, 5, 5, 5])).toEqual([]);
  });
});

const name = "nested14";
const prompt = expectation(name).tf.ids.slice(0, 12);
const gen = 24;

/** Greedy or seeded, keeping the logits each choice was made from. */
function recorded(seeded: boolean): Sampler & { rows: Buffer[] } {
  const inner = seeded ? createSampler({ ...samplingDefaults.chat, temperature: 0.8, seed: 11 }) : undefined;
  const rows: Buffer[] = [];
  return {
    rows,
    choose: (logits) => {
      rows.push(Buffer.from(logits.slice().buffer));
      return inner ? inner.choose(logits) : argmax(logits);
    },
    accept: (token) => inner?.accept?.(token),
  };
}

/** Runs decode on a fresh engine; returns the ids, the logits chosen from, the speculation counts and the final state's file bytes. */
async function run(seeded: boolean, drafter?: Drafter, stopIds?: ReadonlySet<number>) {
  using engine = openFixture(name, prompt.length + gen + 1);
  const state = engine.model.newState();
  const sampler = recorded(seeded);
  const result = await decode(engine.model, prompt, {
    maxNewTokens: gen, mode: "incremental", sampler, state, stopIds, prefillChunk: 64,
    speculative: drafter && { drafter, maxDraft: 4 },
  });
  const path = join(tempDir("spec"), "end.k3st");
  writeStateFile(path, state, [...prompt, ...result.generated]);
  engine.model.release(state);
  return { ids: result.generated, rows: sampler.rows, speculation: result.speculation, stateBytes: readFileSync(path) };
}

/** Proposes the serial answer's next ids, turned wrong after `rightFor` of them (never wrong: Infinity). */
function oracle(serial: readonly number[], rightFor: number): Drafter {
  return {
    propose: (sequence, max) => {
      const at = sequence.length - prompt.length; // ids emitted so far
      return serial.slice(at, at + max).map((id, i) => (i < rightFor ? id : (id + 1) % 100));
    },
  };
}

for (const seeded of [false, true]) {
  describe(`verification gives serial decode exactly (${seeded ? "seeded" : "greedy"})`, () => {
    let serial: Awaited<ReturnType<typeof run>>;
    beforeAll(async () => { serial = await run(seeded); });

    for (const [label, rightFor, acceptedPerSweep] of [
      ["every draft right: whole sweeps accepted", Infinity, 4],
      ["drafts wrong after 2 ids: restore and replay", 2, 2],
      ["drafts wrong from the first id", 0, 0],
    ] as const) {
      test(label, async () => {
        const spec = await run(seeded, oracle(serial.ids, rightFor));
        expect(spec.ids).toEqual(serial.ids);
        expect(spec.rows).toEqual(serial.rows);
        expect(Buffer.compare(spec.stateBytes, serial.stateBytes)).toBe(0);
        const s = spec.speculation!;
        expect(s.sweeps).toBeGreaterThan(0);
        expect(s.drafted).toBe(4 * s.sweeps);
        expect(s.accepted).toBe(acceptedPerSweep * s.sweeps);
        expect(s.emitted).toBe((acceptedPerSweep + 1) * s.sweeps);
        expect(s.replays).toBe(rightFor === Infinity ? 0 : s.sweeps); // a partial acceptance goes back and replays
      });
    }

    test("every forward (the sweep, its replay) and the drafter's sync fall inside a step, so the step times cover the work", async () => {
      using engine = openFixture(name, prompt.length + gen + 1);
      const model = engine.model;
      let inStep = false;
      const outside: string[] = [];
      const watched: Forward<SequenceState> = {
        vocabSize: model.vocabSize,
        newState: () => model.newState(),
        release: (state) => model.release(state),
        run: (state, ids, outputs) => {
          if (!inStep) outside.push(`forward over ${ids.length} ids`);
          return model.run(state, ids, outputs);
        },
      };
      const wrongAfterTwo = oracle(serial.ids, 2);
      const drafter: Drafter = { propose: wrongAfterTwo.propose, sync: () => { if (!inStep) outside.push("drafter sync"); } };
      const result = await decode(watched, prompt, {
        maxNewTokens: gen, mode: "incremental", sampler: recorded(seeded), prefillChunk: 64, speculative: { drafter, maxDraft: 4 },
        beforeStep: () => { inStep = true; },
        afterStep: () => { inStep = false; },
      });
      expect(result.generated).toEqual(serial.ids);
      expect(outside).toEqual([]);
      expect(result.speculation!.replays).toBeGreaterThan(0);
    });

    test("a partial acceptance replays from the sweep's record: no forward over the kept ids, the serial ids and logits", async () => {
      using engine = openFixture(name, prompt.length + gen + 1);
      const model = engine.model;
      const calls: number[] = [];
      let replays = 0;
      const watched: Forward<SequenceState> = {
        vocabSize: model.vocabSize,
        newState: () => model.newState(),
        release: (state) => model.release(state),
        run: (state, ids, outputs, options) => {
          calls.push(ids.length);
          return model.run(state, ids, outputs, options);
        },
        replay: (state, snapshot, tokens) => {
          replays++;
          model.replay(state, snapshot, tokens);
        },
      };
      const sampler = recorded(seeded);
      const result = await decode(watched, prompt, {
        maxNewTokens: gen, mode: "incremental", sampler, prefillChunk: 64, speculative: { drafter: oracle(serial.ids, 2), maxDraft: 4 },
      });
      const s = result.speculation!;
      expect(result.generated).toEqual(serial.ids);
      expect(sampler.rows).toEqual(serial.rows);
      expect(s.replays).toBe(s.sweeps);
      expect(replays).toBe(s.sweeps);
      // The prefill, each one-id step and each sweep: one forward apiece, none for a replay.
      expect(calls.length).toBe(1 + (gen - 1 - s.emitted) + s.sweeps);
    });

    test("a stop id among accepted drafts ends the run there, with the serial state", async () => {
      const stop = new Set([serial.ids[9] as number]);
      const want = await run(seeded, undefined, stop);
      const spec = await run(seeded, oracle(serial.ids, Infinity), stop);
      expect(spec.ids).toEqual(want.ids);
      expect(spec.ids.at(-1)).toBe(serial.ids[9]);
      expect(Buffer.compare(spec.stateBytes, want.stateBytes)).toBe(0);
    });

    test("the n-gram drafter on this sequence", async () => {
      const spec = await run(seeded, ngramDrafter);
      expect(spec.ids).toEqual(serial.ids);
      expect(spec.rows).toEqual(serial.rows);
    });
  });
}

describe("replaying a recorded sweep (Model.replay, runtime.md 9.2)", () => {
  const sweep = expectation(name).tf.ids.slice(12, 17);
  const bytesOf = (state: SequenceState, ids: readonly number[]) => {
    const path = join(tempDir("replay"), "state.k3st");
    writeStateFile(path, state, ids);
    return readFileSync(path);
  };

  test("every prefix of a sweep, replayed onto the snapshot before it, is the state feeding that prefix leaves, bit for bit", () => {
    using engine = openFixture(name, prompt.length + sweep.length + 2);
    const model = engine.model;
    for (let n = 1; n <= sweep.length; n++) {
      const fed = model.newState();
      const replayed = model.newState();
      try {
        model.run(fed, prompt);
        model.run(fed, sweep.slice(0, n));
        model.run(replayed, prompt);
        const snapshot = replayed.snapshot();
        model.run(replayed, sweep, "all", { replayable: true });
        model.replay(replayed, snapshot, n);
        snapshot.free();
        expect(replayed.position).toBe(prompt.length + n);
        const ids = [...prompt, ...sweep.slice(0, n)];
        expect(Buffer.compare(bytesOf(replayed, ids), bytesOf(fed, ids))).toBe(0);
        // ... and it goes on the same: the next id's logits are the same bits.
        expect(model.run(replayed, [5])).toEqual(model.run(fed, [5]));
      } finally {
        model.release(fed);
        model.release(replayed);
      }
    }
  });

  test("without a record from the snapshot's position, replay refuses instead of guessing", () => {
    using engine = openFixture(name, prompt.length + 2 * sweep.length + 2);
    const model = engine.model;
    const state = model.newState();
    try {
      model.run(state, prompt);
      const snapshot = state.snapshot();
      expect(() => model.replay(state, snapshot, 1)).toThrow(/recorded nothing/);
      model.run(state, sweep, "all"); // not replayable
      expect(() => model.replay(state, snapshot, 1)).toThrow(/recorded nothing/);
      state.restore(snapshot);
      model.run(state, sweep, "all", { replayable: true });
      expect(() => model.replay(state, snapshot, sweep.length + 1)).toThrow(/recorded 5 from/);
      model.run(state, [3]); // the state moved on: the record is stale
      expect(() => model.replay(state, snapshot, 2)).toThrow(/recorded nothing/);
      const later = state.snapshot();
      model.run(state, sweep, "all", { replayable: true });
      expect(() => model.replay(state, snapshot, 2)).toThrow(/recorded 5 from/); // a snapshot from before the record
      later.free();
      snapshot.free();
    } finally {
      model.release(state);
    }
  });
});
