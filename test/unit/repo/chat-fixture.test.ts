/**
 * The synthetic chat tokenizer (test/fixtures/chat-tokenizer, made by
 * tools/chat-fixture/tokenizer.ts): the committed files are what the script writes, its rank
 * count is the documented one, and it carries the K3 control names where the released table does.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { controlIds } from "../../../src/chat/index.ts";
import { CHAT_FIXTURE_DIR, CHAT_FIXTURE_RANK_COUNT, chatFixtureFiles, XTML_WORDS } from "../../../tools/chat-fixture/tokenizer.ts";
import { KIMI_NAMED_SPECIALS } from "../../fixtures/tokenizer/support.ts";
import { chatTok } from "../../support/chat.ts";

test("the committed files are exactly what tools/chat-fixture/tokenizer.ts writes", () => {
  const { model, config } = chatFixtureFiles();
  expect(readFileSync(join(CHAT_FIXTURE_DIR, "tiktoken.model"), "utf8")).toBe(model);
  expect(readFileSync(join(CHAT_FIXTURE_DIR, "tokenizer_config.json"), "utf8")).toBe(config);
});

test("rank count is the documented constant (small, for a fixture model's vocab = ranks + 256)", () => {
  expect(chatTok.rankCount).toBe(CHAT_FIXTURE_RANK_COUNT);
  expect(chatTok.rankCount).toBeLessThanOrEqual(2048);
  expect(chatTok.vocabSize).toBe(CHAT_FIXTURE_RANK_COUNT + 256);
  expect(readFileSync(join(import.meta.dir, "../../../tools/chat-fixture/tokenizer.ts"), "utf8"))
    .toContain(`RANK COUNT: ${CHAT_FIXTURE_RANK_COUNT} `);
});

test("the 16 K3 names sit at their released offsets after the ranks (the same table the tokenizer tests use)", () => {
  for (const { offset, text, special } of KIMI_NAMED_SPECIALS) {
    expect(chatTok.specials[offset]).toEqual({ id: chatTok.rankCount + offset, text, special, listed: true });
  }
  const ids = controlIds(chatTok);
  expect([ids.bos, ids.eos, ids.endOfMessage, ids.open, ids.close, ids.sep].map((id) => id - chatTok.rankCount)).toEqual([0, 1, 2, 3, 4, 5]);
});

test("every XTML word is one token, as in the released table; the single bytes are ranks 0-255", () => {
  for (const word of XTML_WORDS) expect(`${word}: ${chatTok.encode(word, { ordinary: true }).length}`).toBe(`${word}: 1`);
  expect(chatTok.encode("\u00ff", { ordinary: true })).toEqual([0xc3, 0xbf]);
});
