/**
 * Multi-turn reuse (chat.md 5.5) on a fixture model: a turn that reuses the live state or the
 * boundary snapshot emits exactly the ids of a cold run of the same prompt, feeds only the new
 * ids, and a prompt that differs early reuses nothing.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { argmax, greedy, type Sampler } from "../../../src/decode/sampler.ts";
import type { Drafter } from "../../../src/decode/drafter.ts";
import { Conversation, type ConversationOptions, type PrefillProgress, type RenderedPrompt } from "../../../src/session/conversation.ts";
import { conversationOptions } from "../../support/conversation.ts";
import { expectation, openFixture } from "../../support/fixtures.ts";

// Each test opens engines and runs several turns: seconds on a loaded 2-core machine.
setDefaultTimeout(30_000);

const ids = expectation("tiny13").tf.ids; // 32 ids below the vocabulary
const noStop = new Set<number>();

/** A prompt of `history` ids (the messages) followed by `tail` ids (notes, generation prompt). */
const prompt = (history: readonly number[], tail: readonly number[]): RenderedPrompt => ({ ids: [...history, ...tail], historyEnd: history.length });

/** Greedy, keeping the bits of every row of logits it chose from: answers are compared by those, not only by ids. */
function recording(): Sampler & { rows: Buffer[] } {
  const rows: Buffer[] = [];
  return { rows, choose: (logits) => (rows.push(Buffer.from(logits.slice().buffer)), argmax(logits)) };
}

/** The logits of every step of a cold run of `p`. */
async function coldLogits(p: RenderedPrompt, maxNewTokens: number): Promise<Buffer[]> {
  const sampler = recording();
  await cold(p, maxNewTokens, sampler);
  return sampler.rows;
}

async function cold(p: RenderedPrompt, maxNewTokens: number, sampler: Sampler = greedy): Promise<number[]> {
  using engine = openFixture("tiny13", 128);
  const c = new Conversation(engine.model, conversationOptions(engine));
  try {
    return (await c.turn(p, { sampler, maxNewTokens, stopIds: noStop })).generated;
  } finally {
    c.close();
  }
}

describe("a conversation reuses exact prefixes only", () => {
  const system = ids.slice(0, 8);
  const genPrompt = ids.slice(28, 31);

  test("turn two from the live state: same ids as cold, only the new ids fed", async () => {
    using engine = openFixture("tiny13", 128);
    const c = new Conversation(engine.model, conversationOptions(engine));
    const first = prompt(system, genPrompt);
    const one = await c.turn(first, { sampler: greedy, maxNewTokens: 5, stopIds: noStop });
    expect(one).toMatchObject({ reusedFrom: "none", reusedPromptIds: 0, fedPromptIds: first.ids.length });
    // The echo: the first prompt, the reply but its last id (never fed), then a new message.
    const history = [...first.ids, ...one.generated.slice(0, -1), ...ids.slice(10, 14)];
    const second = prompt(history, genPrompt);
    const two = await c.turn(second, { sampler: greedy, maxNewTokens: 6, stopIds: noStop });
    expect(two.reusedFrom).toBe("live");
    expect(two.reusedPromptIds).toBe(first.ids.length + one.generated.length - 1);
    expect(two.fedPromptIds).toBe(second.ids.length - two.reusedPromptIds);
    c.close();
    expect(two.generated).toEqual(await cold(second, 6));
  });

  test("turn two from the boundary snapshot when the reply is not echoed as generated", async () => {
    using engine = openFixture("tiny13", 128);
    const c = new Conversation(engine.model, conversationOptions(engine));
    const first = prompt(system, genPrompt);
    await c.turn(first, { sampler: greedy, maxNewTokens: 4, stopIds: noStop });
    // The client re-rendered the reply differently: only the messages before it are shared.
    const history = [...system, ...ids.slice(15, 20)];
    const second = prompt(history, genPrompt);
    const two = await c.turn(second, { sampler: greedy, maxNewTokens: 6, stopIds: noStop });
    expect(two).toMatchObject({ reusedFrom: "snapshot", reusedPromptIds: system.length, fedPromptIds: second.ids.length - system.length });
    c.close();
    expect(two.generated).toEqual(await cold(second, 6));
  });

  test("an edited earlier message reuses nothing, and the result is still the cold one", async () => {
    using engine = openFixture("tiny13", 128);
    const c = new Conversation(engine.model, conversationOptions(engine));
    await c.turn(prompt(system, genPrompt), { sampler: greedy, maxNewTokens: 4, stopIds: noStop });
    const edited = [...system];
    edited[2] = (edited[2] as number) + 1;
    const second = prompt([...edited, ...ids.slice(15, 20)], genPrompt);
    const two = await c.turn(second, { sampler: greedy, maxNewTokens: 6, stopIds: noStop });
    expect(two).toMatchObject({ reusedFrom: "none", reusedPromptIds: 0, fedPromptIds: second.ids.length });
    c.close();
    expect(two.generated).toEqual(await cold(second, 6));
  });

  test("a stop id ends the reply and is never fed: the next turn reuses up to the id before it", async () => {
    using engine = openFixture("tiny13", 128);
    const c = new Conversation(engine.model, conversationOptions(engine));
    const first = prompt(system, genPrompt);
    const probe = await cold(first, 3);
    const stop = new Set([probe[2] as number]);
    const one = await c.turn(first, { sampler: greedy, maxNewTokens: 10, stopIds: stop });
    expect(one.finish).toBe("stop");
    expect(one.generated).toEqual(probe);
    const second = prompt([...first.ids, ...probe.slice(0, 2), ...ids.slice(3, 6)], genPrompt);
    const two = await c.turn(second, { sampler: greedy, maxNewTokens: 4, stopIds: noStop });
    expect(two.reusedPromptIds).toBe(first.ids.length + 2);
    c.close();
    expect(two.generated).toEqual(await cold(second, 4));
  });

  test("cancelling between tokens ends the reply as cancelled", async () => {
    using engine = openFixture("tiny13", 128);
    const c = new Conversation(engine.model, conversationOptions(engine));
    let seen = 0;
    const r = await c.turn(prompt(system, genPrompt), {
      sampler: greedy, maxNewTokens: 10, stopIds: noStop, onToken: () => { seen++; }, cancelled: () => seen >= 3,
    });
    expect(r).toMatchObject({ finish: "cancelled" });
    expect(r.generated).toHaveLength(3);
    c.close();
  });

  test("the prefill reports its progress before the first chunk and after each, and yields between them", async () => {
    using engine = openFixture("tiny13", 128);
    const c = new Conversation(engine.model, { ...conversationOptions(engine), chunk: 3 });
    const first = prompt(system, genPrompt);
    const reports: PrefillProgress[] = [];
    let timers = 0;
    const ticking = setInterval(() => timers++, 0);
    const seenTimers: number[] = [];
    const one = await c.turn(first, { sampler: greedy, maxNewTokens: 2, stopIds: noStop, onPrefill: (p) => { reports.push(p); seenTimers.push(timers); } });
    clearInterval(ticking);
    // Chunks of 3 from the start, split at the end of the messages (8): 0-3, 3-6, 6-8, then 8-11.
    expect(reports.map((p) => p.fed)).toEqual([0, 3, 6, 8, 11]);
    expect(reports.every((p) => p.total === first.ids.length && p.reused === 0 && p.reusedFrom === "none")).toBe(true);
    expect(reports.map((p) => p.seconds)).toEqual(reports.map((p) => p.seconds).sort((a, b) => a - b));
    expect(one.fedPromptIds).toBe(reports.at(-1)!.total);
    // The event loop ran between chunks: a timer fired while the prefill went on.
    expect(seenTimers.at(-1)!).toBeGreaterThan(seenTimers[0]!);
    const second = prompt([...first.ids, ...one.generated.slice(0, -1), ...ids.slice(10, 14)], genPrompt);
    const again: PrefillProgress[] = [];
    const two = await c.turn(second, { sampler: greedy, maxNewTokens: 2, stopIds: noStop, onPrefill: (p) => again.push(p) });
    expect(again.map((p) => [p.fed, p.total, p.reused, p.reusedFrom])).toEqual([[0, 7, 12, "live"], [3, 7, 12, "live"], [4, 7, 12, "live"], [7, 7, 12, "live"]]);
    // From the 12 reused ids: 12-15, 15-16 (the messages end), 16-19.
    expect(two.reusedPromptIds).toBe(12);
    c.close();
  });

  test("cancelled during the prefill: nothing generated, the state holds exactly the ids it fed, and the next turns equal cold runs bit for bit", async () => {
    using engine = openFixture("tiny13", 128);
    const c = new Conversation(engine.model, { ...conversationOptions(engine), chunk: 3 });
    const first = prompt(system, genPrompt);
    let fed = 0;
    const stopAt = (at: number) => ({ onPrefill: (p: PrefillProgress) => { fed = p.fed; }, cancelled: () => fed >= at });
    // Stopped before the chunk at 6, inside the messages: no snapshot was taken.
    const cut = await c.turn(first, { sampler: greedy, maxNewTokens: 5, stopIds: noStop, ...stopAt(6) });
    expect(cut).toMatchObject({ generated: [], finish: "cancelled", fedPromptIds: 6, reusedPromptIds: 0 });
    expect(c.snapshotIds).toEqual([]);
    // The retry goes on from the 6 ids the state holds, and its every row of logits is the cold one.
    const sampler = recording();
    const retry = await c.turn(first, { sampler, maxNewTokens: 5, stopIds: noStop });
    expect(retry).toMatchObject({ reusedFrom: "live", reusedPromptIds: 6, fedPromptIds: first.ids.length - 6 });
    expect(sampler.rows).toEqual(await coldLogits(first, 5));
    // Another conversation stopped at the end of its messages: snapshot (a) is there, and the prompt's end is not.
    const other = prompt([ids[9] as number, ...system.slice(1)], genPrompt);
    const atEnd = await c.turn(other, { sampler: greedy, maxNewTokens: 5, stopIds: noStop, ...stopAt(8) });
    expect(atEnd).toMatchObject({ finish: "cancelled", fedPromptIds: 8 });
    expect(c.snapshotIds[0]).toEqual(other.ids.slice(0, 8));
    // A cancel before the first chunk feeds nothing and leaves the state as it was.
    const none = await c.turn(other, { sampler: greedy, maxNewTokens: 5, stopIds: noStop, cancelled: () => true });
    expect(none).toMatchObject({ finish: "cancelled", fedPromptIds: 0, reusedPromptIds: 8, reusedFrom: "live" });
    const next = prompt([...other.ids.slice(0, 8), ...ids.slice(15, 20)], genPrompt);
    const nextSampler = recording();
    const after = await c.turn(next, { sampler: nextSampler, maxNewTokens: 5, stopIds: noStop });
    expect(after).toMatchObject({ reusedFrom: "live", reusedPromptIds: 8 });
    // And back to the first conversation, whose states the second one displaced.
    const backSampler = recording();
    await c.turn(first, { sampler: backSampler, maxNewTokens: 5, stopIds: noStop });
    c.close();
    expect(nextSampler.rows).toEqual(await coldLogits(next, 5));
    expect(backSampler.rows).toEqual(await coldLogits(first, 5));
  });

  test("speculative turns: drafts right, then wrong, across three turns reusing the live state and a snapshot, equal plain turns bit for bit", async () => {
    const turns = [
      prompt(system, genPrompt),
      (previous: number[][]) => prompt([...system, ...genPrompt, ...(previous[0] as number[]).slice(0, -1), ...ids.slice(10, 14)], genPrompt),
      (previous: number[][]) => prompt([...system, ...genPrompt, ...ids.slice(14, 17)], genPrompt), // not the echo: a snapshot is reused
    ] as const;
    const play = async (speculative: ConversationOptions["speculative"]) => {
      using engine = openFixture("tiny13", 128);
      const c = new Conversation(engine.model, { ...conversationOptions(engine), ...(speculative && { speculative }) });
      const generated: number[][] = [];
      const results = [];
      const sampler = recording();
      for (const make of turns) {
        const p = typeof make === "function" ? make(generated) : make;
        const r = await c.turn(p, { sampler, maxNewTokens: 12, stopIds: noStop });
        generated.push(r.generated);
        results.push({ ...r, full: [...p.ids, ...r.generated] });
      }
      c.close();
      return { results, rows: sampler.rows };
    };
    const plain = await play(undefined);
    // An oracle that knows each plain reply: the next 2 ids right, then a wrong one (a partial acceptance and its replay).
    const oracle: Drafter = {
      propose: (sequence, max) => {
        const full = plain.results.find((r) => sequence.every((id, i) => r.full[i] === id))?.full;
        if (!full || full.length <= sequence.length) return [];
        const next = full.slice(sequence.length, sequence.length + Math.min(2, max));
        return next.length === max ? next : [...next, ((full[sequence.length + next.length] ?? 0) + 1) % 64];
      },
    };
    const spec = await play({ drafter: oracle, maxDraft: 4 });
    expect(spec.rows).toEqual(plain.rows);
    expect(spec.results.map((r) => [r.generated, r.reusedFrom, r.reusedPromptIds])).toEqual(plain.results.map((r) => [r.generated, r.reusedFrom, r.reusedPromptIds]));
    expect(plain.results.map((r) => r.reusedFrom)).toEqual(["none", "live", "snapshot"]);
    for (const r of spec.results) {
      expect(r.speculation!.sweeps).toBeGreaterThan(0);
      expect(r.speculation!.accepted).toBe(2 * r.speculation!.sweeps);
      expect(r.speculation!.replays).toBe(r.speculation!.sweeps);
    }
    expect(plain.results.every((r) => r.speculation === undefined)).toBe(true);
  });

  test("a turn that cannot fit the context is refused before anything is fed", async () => {
    using engine = openFixture("tiny13", 16);
    const c = new Conversation(engine.model, conversationOptions(engine));
    await expect(c.turn(prompt(system, genPrompt), { sampler: greedy, maxNewTokens: 10, stopIds: noStop })).rejects.toThrow(/^--max-tokens: 10 more ids do not fit: the prompt takes 11 of the 16 positions the context holds \(raise --ctx/);
    c.close();
  });
});

describe("snapshots: taken at (a), (b), (c), bounded, parked whole, refused when damaged", () => {
  const systemA = ids.slice(0, 8);
  const systemB = [ids[9] as number, ...ids.slice(1, 8)]; // differs at position 0
  const genPrompt = ids.slice(28, 31);
  const first = prompt(systemA, genPrompt);
  const other = prompt(systemB, genPrompt);

  test("the end of the messages, the end of the prompt, the last id fed; the stop id is in none", async () => {
    using engine = openFixture("tiny13", 128);
    const c = new Conversation(engine.model, conversationOptions(engine));
    const probe = await cold(first, 3);
    const one = await c.turn(first, { sampler: greedy, maxNewTokens: 10, stopIds: new Set([probe[2] as number]) });
    expect(one.finish).toBe("stop");
    expect(c.snapshotIds).toEqual([[...first.ids, ...probe.slice(0, 2)], first.ids, systemA]);
    expect(one.snapshots).toMatchObject({ inRam: 3, parked: 0 });
    c.close();
  });

  test("RAM stays within its budget: the least useful are parked (the reply end first, the prompt end last) and read back exactly", async () => {
    using engine = openFixture("tiny13", 128);
    const probe = new Conversation(engine.model, conversationOptions(engine));
    const snapshotBytes = (await probe.turn(first, { sampler: greedy, maxNewTokens: 2, stopIds: noStop })).snapshots!.ramBytes / 3;
    probe.close();
    const options = conversationOptions(engine, { ramBytes: snapshotBytes });
    const c = new Conversation(engine.model, options);
    const one = await c.turn(first, { sampler: greedy, maxNewTokens: 5, stopIds: noStop });
    expect(one.snapshots).toMatchObject({ inRam: 1, parked: 2, ramBytes: snapshotBytes, parkedWrites: 2 });
    // A request that continues after the whole first prompt: its snapshot stayed in RAM.
    const afterPrompt = prompt([...first.ids, ...ids.slice(15, 20)], genPrompt);
    const two = await c.turn(afterPrompt, { sampler: greedy, maxNewTokens: 6, stopIds: noStop });
    expect(two).toMatchObject({ reusedFrom: "snapshot", reusedPromptIds: first.ids.length });
    // The client re-rendered the reply: only the first messages are shared; that snapshot was parked, and is read back.
    const reRendered = prompt([...systemA, ...ids.slice(15, 20)], genPrompt);
    const sampler = recording();
    const three = await c.turn(reRendered, { sampler, maxNewTokens: 6, stopIds: noStop });
    expect(three).toMatchObject({ reusedFrom: "parked", reusedPromptIds: systemA.length });
    expect(three.snapshots!.ramBytes).toBeLessThanOrEqual(snapshotBytes);
    expect(options.warnings).toEqual([]);
    c.close();
    expect(sampler.rows).toEqual(await coldLogits(reRendered, 6));
  });

  for (const [label, budget, from] of [
    ["in RAM, parked when the other conversation rewrites their rows", { ramBytes: 1e9 }, "parked"],
    ["all parked (--snapshot-gb 0)", { ramBytes: 0 }, "parked"],
    ["with no disk to park on: dropped, and nothing is reused", { diskBytes: 0 }, "none"],
  ] as const) {
    test(`two conversations interleaved, snapshots ${label}: every answer equals a cold run`, async () => {
      using engine = openFixture("tiny13", 128);
      const options = conversationOptions(engine, budget);
      const c = new Conversation(engine.model, options);
      const a1 = await c.turn(first, { sampler: greedy, maxNewTokens: 5, stopIds: noStop });
      const b1 = await c.turn(other, { sampler: greedy, maxNewTokens: 5, stopIds: noStop });
      expect(b1.reusedFrom).toBe("none");
      // Conversation A's next request echoes its reply (the last id was never fed) and adds a message.
      const a2prompt = prompt([...first.ids, ...a1.generated.slice(0, -1), ...ids.slice(10, 14)], genPrompt);
      const a2sampler = recording();
      const a2 = await c.turn(a2prompt, { sampler: a2sampler, maxNewTokens: 6, stopIds: noStop });
      expect(a2.reusedFrom).toBe(from);
      expect(a2.reusedPromptIds).toBe(from === "none" ? 0 : first.ids.length + a1.generated.length - 1);
      expect(a2.fedPromptIds).toBe(a2prompt.ids.length - a2.reusedPromptIds);
      // And back to B, whose snapshots A's turn displaced in turn.
      const b2prompt = prompt([...other.ids, ...b1.generated.slice(0, -1), ...ids.slice(20, 23)], genPrompt);
      const b2sampler = recording();
      const b2 = await c.turn(b2prompt, { sampler: b2sampler, maxNewTokens: 6, stopIds: noStop });
      expect(b2.reusedFrom).toBe(from);
      expect(options.warnings).toEqual([]);
      c.close();
      // Bit for bit: ids alone would miss a wrong MLA row that does not flip an argmax.
      expect(a2sampler.rows).toEqual(await coldLogits(a2prompt, 6));
      expect(b2sampler.rows).toEqual(await coldLogits(b2prompt, 6));
    });
  }

  test("a damaged parked snapshot is refused with a warning, and the answer is still the cold one", async () => {
    using engine = openFixture("tiny13", 128);
    const options = conversationOptions(engine, { ramBytes: 0 });
    const c = new Conversation(engine.model, options);
    const a1 = await c.turn(first, { sampler: greedy, maxNewTokens: 5, stopIds: noStop });
    await c.turn(other, { sampler: greedy, maxNewTokens: 5, stopIds: noStop });
    const [dir] = readdirSync(options.snapshots.parent);
    const files = readdirSync(join(options.snapshots.parent, dir as string));
    expect(files.length).toBeGreaterThanOrEqual(6);
    for (const f of files) {
      const path = join(options.snapshots.parent, dir as string, f);
      const bytes = readFileSync(path);
      bytes[bytes.length - 5] = (bytes[bytes.length - 5] as number) ^ 0x40;
      writeFileSync(path, bytes);
    }
    const a2prompt = prompt([...first.ids, ...a1.generated.slice(0, -1), ...ids.slice(10, 14)], genPrompt);
    const a2 = await c.turn(a2prompt, { sampler: greedy, maxNewTokens: 6, stopIds: noStop });
    expect(a2.reusedFrom).toBe("none");
    expect(options.warnings.length).toBeGreaterThan(0);
    expect(options.warnings[0]).toMatch(/^a parked snapshot was refused and dropped; the prompt is prefilled instead \(.*the checksum does not match/);
    c.close();
    expect(readdirSync(options.snapshots.parent)).toEqual([]); // closing removes the parked files
    expect(a2.generated).toEqual(await cold(a2prompt, 6));
  });
});
