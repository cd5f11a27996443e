/**
 * Multi-turn chat on the chat fixture model, through the real renderer and parser: turn two fed
 * incrementally gives exactly the ids of a cold run of the same transcript (greedy and seeded),
 * the ids actually fed are reported, and an edited earlier message reuses nothing.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { samplingDefaults, type SamplingOptions } from "../../../src/decode/sampling-options.ts";
import { openEngine, type Engine } from "../../../src/engine/open.ts";
import { ChatSession, type ChatSettings } from "../../../src/session/chat-session.ts";
import { loadTokenizer } from "../../../src/tokenizer/index.ts";
import { gbToBytes } from "../../../src/units.ts";
import { chatModelDir } from "../../support/chat-fixture.ts";
import { conversationOptions } from "../../support/conversation.ts";
import { budgetRequest } from "../../../src/plan/budget.ts";

// Each test opens engines and runs several turns: seconds on a loaded 2-core machine.
setDefaultTimeout(30_000);

const dir = chatModelDir();
const tokenizer = loadTokenizer(dir);
const engines: Engine[] = [];

function open(): Engine {
  const { config } = loadConfig(join(dir, "config.json"));
  const engine = openEngine({
    modelDir: dir, config, layerCount: config.numLayers, positions: 1024, prefillChunk: 64,
    budgets: budgetRequest([{ kind: "cache", bytes: gbToBytes(1) }]), trunkDir: undefined,
  });
  engines.push(engine);
  return engine;
}

afterAll(() => {
  for (const e of engines) e.close();
});

/** A chat session on a fresh engine. */
function openSession(chosen: ChatSettings): ChatSession {
  const engine = open();
  return new ChatSession(engine, tokenizer, chosen, conversationOptions(engine));
}

const settings = (sampling: SamplingOptions): ChatSettings => ({ system: "Be brief.", thinking: true, effort: "max", sampling, maxNewTokens: 12 });
const seeded: SamplingOptions = { ...samplingDefaults.chat, seed: 42 };

for (const [label, sampling] of [["greedy", samplingDefaults.run], ["seeded", seeded]] as const) {
  describe(`a second turn (${label})`, () => {
    test("reuses the carried state, feeds only the new ids, and equals a cold run of the same transcript", async () => {
      const warm = openSession(settings(sampling));
      const one = await warm.send("Hello, who are you?");
      expect(one.turn.reusedFrom).toBe("none");
      expect(one.turn.fedPromptIds).toBe(one.promptIds);
      const two = await warm.send("And what can you do?");
      expect(two.turn.reusedPromptIds).toBeGreaterThan(0);
      expect(two.turn.fedPromptIds).toBe(two.promptIds - two.turn.reusedPromptIds);
      expect(two.turn.fedPromptIds).toBeLessThan(two.promptIds);

      const cold = openSession(settings(sampling));
      cold.load(warm.transcript.slice(0, 3)); // user, assistant, user: the same request turn two made
      const again = await cold.reply();
      expect(again.turn.reusedFrom).toBe("none");
      expect(again.promptIds).toBe(two.promptIds);
      expect(again.generatedIds).toEqual(two.generatedIds);
      warm.close();
      cold.close();
    });
  });
}

describe("what is not an exact prefix is not reused", () => {
  test("an edited earlier message feeds the whole prompt again, with the cold result", async () => {
    const session = openSession(settings(seeded));
    await session.send("Hello, who are you?");
    const edited = [{ role: "user", content: "Hullo, who are you?" }, ...session.transcript.slice(1), { role: "user", content: "Go on." }];
    session.load(edited);
    const turn = await session.reply();
    expect(turn.turn).toMatchObject({ reusedFrom: "none", reusedPromptIds: 0 });
    expect(turn.turn.fedPromptIds).toBe(turn.promptIds);
    const cold = openSession(settings(seeded));
    cold.load(edited);
    expect((await cold.reply()).generatedIds).toEqual(turn.generatedIds);
    session.close();
    cold.close();
  });

  test("a changed effort changes an early note, so nothing is reused", async () => {
    const session = openSession(settings(samplingDefaults.run));
    await session.send("Hi");
    session.settings.effort = "low";
    const turn = await session.send("Again");
    expect(turn.turn.reusedPromptIds).toBe(0);
    session.close();
  });

  test("/reset forgets the transcript and the state", async () => {
    const session = openSession(settings(samplingDefaults.run));
    const first = await session.send("Hi");
    session.reset();
    expect(session.transcript).toEqual([]);
    const again = await session.send("Hi");
    expect(again.turn.reusedFrom).toBe("none");
    expect(again.generatedIds).toEqual(first.generatedIds);
    session.close();
  });
});
