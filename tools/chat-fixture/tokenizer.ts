/**
 * The synthetic chat tokenizer in test/fixtures/chat-tokenizer/: a tiny byte-level rank table
 * whose `tokenizer_config.json` carries the 16 named K3 special tokens at their released offsets
 * after the ranks (chat.md 1.1: `[BOS]` at rank count + 0, `<|open|>` at + 3, ..., `[PAD]` at
 * + 255). Chat tests render and check structure with it on machines without the released table,
 * and a chat fixture model can use it as its tokenizer.
 *
 *   bun tools/chat-fixture/tokenizer.ts [OUT_DIR]     (default test/fixtures/chat-tokenizer)
 *
 * Ranks: the 256 single bytes (rank = byte value), then every prefix of the XTML words below, in
 * the order listed, so each word encodes to one token the way the released table encodes them.
 * RANK COUNT: 401 (`CHAT_FIXTURE_RANK_COUNT`, checked by test/unit/repo/chat-fixture.test.ts), so
 * the vocabulary is 401 + 256 = 657 ids and a model using this tokenizer needs vocab_size 657.
 * The word list only grows at the end, so the ranks already there keep their ids (the special
 * ids move with the rank count).
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { writeAtomically } from "../../src/fs.ts";
import { modelText, syntheticConfig } from "../../test/fixtures/tokenizer/support.ts";

export const CHAT_FIXTURE_RANK_COUNT = 401;
export const CHAT_FIXTURE_DIR = resolve(import.meta.dir, "../../test/fixtures/chat-tokenizer");

/** Tag names, attribute keys and values, and argument types of chat.md 1.2 and 2.7. */
export const XTML_WORDS: readonly string[] = [
  "message", " role", '="', "system", "user", "assistant", "tool", "think", "response", "tools", "call",
  "argument", "json", " type", " tool", " index", " key", " name", "string", "number", "boolean", "null",
  "object", "array", "thinking", "-effort", "-declare", "-choice", "-format", "Hello", " world",
  "ab", "foo", "bar", "foobar",
];

/** Token bytes in rank order. */
export function chatFixtureRanks(): Uint8Array[] {
  const tokens: Uint8Array[] = Array.from({ length: 256 }, (_, b) => Uint8Array.of(b));
  const seen = new Set<string>(tokens.map((t) => Buffer.from(t).toString("latin1")));
  for (const word of XTML_WORDS) {
    const bytes = new TextEncoder().encode(word);
    for (let end = 2; end <= bytes.length; end++) {
      const key = Buffer.from(bytes.subarray(0, end)).toString("latin1");
      if (seen.has(key)) continue;
      seen.add(key);
      tokens.push(bytes.slice(0, end));
    }
  }
  return tokens;
}

/** The two files' contents. */
export function chatFixtureFiles(): { model: string; config: string } {
  const ranks = chatFixtureRanks();
  return { model: modelText(ranks), config: `${syntheticConfig(ranks.length)}\n` };
}

if (import.meta.main) {
  const out = resolve(process.argv[2] ?? CHAT_FIXTURE_DIR);
  const ranks = chatFixtureRanks();
  if (ranks.length !== CHAT_FIXTURE_RANK_COUNT) {
    throw new Error(`the word list gives ${ranks.length} ranks; update CHAT_FIXTURE_RANK_COUNT and the header (vocab = ranks + 256)`);
  }
  const { model, config } = chatFixtureFiles();
  mkdirSync(out, { recursive: true });
  writeAtomically(join(out, "tiktoken.model"), model, "the chat fixture rank table");
  writeAtomically(join(out, "tokenizer_config.json"), config, "the chat fixture tokenizer config");
  console.log(`${out}: ${ranks.length} ranks + 256 special ids = vocabulary ${ranks.length + 256}`);
}
