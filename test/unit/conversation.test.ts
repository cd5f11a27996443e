/**
 * Multi-turn reuse (chat.md 5.5) on a fixture model: a turn that reuses the live state or the
 * boundary snapshot emits exactly the ids of a cold run of the same prompt, feeds only the new
 * ids, and a prompt that differs early reuses nothing.
 */
import { describe, expect, test } from "bun:test";
import { greedy, type Sampler } from "../../src/decode/sampler.ts";
import { Conversation, type RenderedPrompt } from "../../src/session/conversation.ts";
import { conversationOptions } from "../support/conversation.ts";
import { expectation, openFixture } from "../support/fixtures.ts";

const ids = expectation("tiny13").tf.ids; // 32 ids below the vocabulary
const noStop = new Set<number>();

/** A prompt of `history` ids (the messages) followed by `tail` ids (notes, generation prompt). */
const prompt = (history: readonly number[], tail: readonly number[]): RenderedPrompt => ({ ids: [...history, ...tail], historyEnd: history.length });

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

  test("a turn that cannot fit the context is refused before anything is fed", async () => {
    using engine = openFixture("tiny13", 16);
    const c = new Conversation(engine.model, conversationOptions(engine));
    await expect(c.turn(prompt(system, genPrompt), { sampler: greedy, maxNewTokens: 10, stopIds: noStop })).rejects.toThrow(/the context holds 16/);
    c.close();
  });
});
