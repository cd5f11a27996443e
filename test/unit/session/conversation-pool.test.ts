/**
 * The choices of one request (`n`, issue 24) on a pool of conversations: one shared prefill,
 * then each choice copies its state and decodes as a row of the same batched steps. Each choice
 * must give exactly what a lone conversation gives with its sampler (the ids, and the bits of
 * every row of logits it chose from), resident and streamed from a packed trunk with one ring
 * slot; a cancelled shared prefill ends every choice and frees them; each request is told its
 * share of the bytes its steps read.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { argmax, type Sampler } from "../../../src/decode/sampler.ts";
import { createSampler } from "../../../src/decode/sampling.ts";
import { choiceSampling, samplingDefaults } from "../../../src/decode/sampling-options.ts";
import { openEngine, type Engine } from "../../../src/engine/open.ts";
import { budgetRequest } from "../../../src/plan/budget.ts";
import { Conversation, type RenderedPrompt, type TurnOptions } from "../../../src/session/conversation.ts";
import { ConversationPool } from "../../../src/session/conversation-pool.ts";
import { conversationOptions } from "../../support/conversation.ts";
import { expectation, modelDir, packedFixtureTrunk } from "../../support/fixtures.ts";

setDefaultTimeout(60_000);

const ids = expectation("tiny13").long.prompt_ids;
const noStop = new Set<number>();

function open(streamed: boolean): Engine {
  const dir = modelDir("tiny13");
  const { config } = loadConfig(join(dir, "config.json"));
  return openEngine({
    modelDir: dir, config, layerCount: config.numLayers, positions: 128, prefillChunk: 16,
    budgets: budgetRequest(streamed ? [{ kind: "trunk", bytes: 0 }] : []), trunkDir: streamed ? packedFixtureTrunk("tiny13") : undefined,
  });
}

/** A sampler that keeps the bits of every row of logits it chose from. */
function recorded(inner: Sampler = { choose: argmax }): Sampler & { rows: string[] } {
  const rows: string[] = [];
  return {
    rows,
    choose: (logits) => (rows.push(Buffer.from(logits.slice().buffer).toString("base64")), inner.choose(logits)),
    accept: inner.accept && ((token) => inner.accept?.(token)),
  };
}

const seeded = { ...samplingDefaults.run, temperature: 1, topP: 0.95, seed: 2 ** 53 - 2 };
/** Choice i of a request: greedy for the first, else sampled with the seed choiceSampling derives for i. */
const samplerOf = (i: number) => recorded(i === 0 ? undefined : createSampler(choiceSampling(seeded, i)));
const prompt: RenderedPrompt = { ids: ids.slice(0, 40), historyEnd: 30 };

const bytesRead = (engine: Engine) => (engine.streamed?.stats.bytesRead ?? 0) + engine.experts.bytesReadEver;

for (const streamed of [false, true]) {
  describe(streamed ? "streamed, one ring slot" : "resident", () => {
    test("n = 3: each choice gives what a lone conversation gives with its sampler, bit for bit", async () => {
      using engine = open(streamed);
      const lone = [];
      for (let i = 0; i < 3; i++) {
        const c = new Conversation(engine.model, conversationOptions(engine));
        const sampler = samplerOf(i);
        const turn = await c.turn(prompt, { sampler, maxNewTokens: 10 + i, stopIds: noStop });
        c.close();
        lone.push({ generated: turn.generated, finish: turn.finish, rows: sampler.rows });
      }
      // The seeded choices differ from each other: the derivation does give each its own stream.
      expect(lone[1]!.generated).not.toEqual(lone[2]!.generated);

      const pool = new ConversationPool(engine.model, 4, { ...conversationOptions(engine), bytesRead: () => bytesRead(engine) });
      const progress: number[] = [];
      const samplers = [0, 1, 2].map(samplerOf);
      const options: TurnOptions[] = samplers.map((sampler, i) => ({ sampler, maxNewTokens: 10 + i, stopIds: noStop, onPrefill: (p) => progress.push(p.fed) }));
      const readBefore = bytesRead(engine);
      const turns = await Promise.all(pool.turns(prompt, options));
      const read = bytesRead(engine) - readBefore;
      const got = turns.map((t, i) => ({ generated: t.generated, finish: t.finish, rows: samplers[i]!.rows }));
      expect(got).toEqual(lone);
      for (const t of turns) expect(t).toMatchObject({ fedPromptIds: prompt.ids.length, reusedPromptIds: 0 });
      // Progress is the request's: the first choice's, to the whole prompt.
      expect(progress.at(-1)).toBe(prompt.ids.length);
      // The choices shared their decode steps: more rows than steps, and the last to end saw them all.
      const batch = turns.map((t) => t.batch!).reduce((a, b) => (b.steps > a.steps ? b : a));
      expect(batch.rows).toBeGreaterThan(batch.steps);
      expect(pool.batchStats.maxSequences).toBe(3);
      if (streamed) {
        expect(read).toBeGreaterThan(0);
        expect(batch.bytesReadShare).toBeCloseTo(read, -2);
      } else {
        expect(batch.bytesReadShare).toBe(0);
      }
      // The same prompt again reuses its messages from a choice's snapshot, as one conversation's second turn does.
      const again = await pool.turn(prompt, { sampler: samplerOf(0), maxNewTokens: 10, stopIds: noStop });
      expect(again.generated).toEqual(lone[0]!.generated);
      expect([again.reusedFrom, again.reusedPromptIds]).toEqual(["snapshot", prompt.historyEnd]);
      pool.close();
    });
  });
}

describe("a pool's requests", () => {
  test("two requests at once: each is told its share of the bytes read, and the shares add up to what was read", async () => {
    using engine = open(true);
    const pool = new ConversationPool(engine.model, 3, { ...conversationOptions(engine), bytesRead: () => bytesRead(engine) });
    const readBefore = bytesRead(engine);
    const one = pool.turns(prompt, [0, 1].map((i) => ({ sampler: samplerOf(i), maxNewTokens: 6, stopIds: noStop })));
    const other = pool.turn({ ids: ids.slice(50, 60), historyEnd: 10 }, { sampler: samplerOf(0), maxNewTokens: 12, stopIds: noStop });
    const [a, b] = await Promise.all([Promise.all(one), other]);
    const read = bytesRead(engine) - readBefore;
    const shareA = Math.max(...a.map((t) => t.batch!.bytesReadShare));
    const shareB = b.batch!.bytesReadShare;
    expect(shareA).toBeGreaterThan(0);
    expect(shareB).toBeGreaterThan(0);
    expect(shareA + shareB).toBeCloseTo(read, -2);
    pool.close();
  });

  test("a shared prefill cancelled: every choice ends cancelled, nothing generated, and the pool is free again", async () => {
    using engine = open(false);
    const pool = new ConversationPool(engine.model, 2, conversationOptions(engine));
    let chunks = 0;
    const options: TurnOptions[] = [0, 1].map((i) => ({
      sampler: samplerOf(i), maxNewTokens: 8, stopIds: noStop,
      onPrefill: () => void chunks++,
      cancelled: () => chunks >= 2,
    }));
    const turns = await Promise.all(pool.turns(prompt, options));
    expect(turns.map((t) => [t.finish, t.generated.length])).toEqual([["cancelled", 0], ["cancelled", 0]]);
    // Both conversations are free: a request of two choices is taken, and gives the lone answers.
    const lone = new Conversation(engine.model, conversationOptions(engine));
    const want = (await lone.turn(prompt, { sampler: samplerOf(0), maxNewTokens: 5, stopIds: noStop })).generated;
    lone.close();
    const after = await Promise.all(pool.turns(prompt, [0, 0].map((i) => ({ sampler: samplerOf(i), maxNewTokens: 5, stopIds: noStop }))));
    expect(after.map((t) => t.generated)).toEqual([want, want]);
    pool.close();
  });

  test("more choices than free conversations are refused, and the pool is unchanged", async () => {
    using engine = open(false);
    const pool = new ConversationPool(engine.model, 2, conversationOptions(engine));
    const options = [0, 1, 2].map((i) => ({ sampler: samplerOf(i), maxNewTokens: 2, stopIds: noStop }));
    expect(() => pool.turns(prompt, options)).toThrow("3 choices, and 2 of 2 conversations are free");
    expect((await Promise.all(pool.turns(prompt, options.slice(0, 2)))).map((t) => t.generated.length)).toEqual([2, 2]);
    pool.close();
  });
});
