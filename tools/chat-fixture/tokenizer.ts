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
 * RANK COUNT: 401 (`CHAT_FIXTURE_RANK_COUNT`, checked by test/unit/chat-fixture.test.ts), so
 * the vocabulary is 401 + 256 = 657 ids and a model using this tokenizer needs vocab_size 657.
 * The word list only grows at the end, so the ranks already there keep their ids (the special
 * ids move with the rank count).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const CHAT_FIXTURE_RANK_COUNT = 401;
export const CHAT_FIXTURE_DIR = resolve(import.meta.dir, "../../test/fixtures/chat-tokenizer");

/** Tag names, attribute keys and values, and argument types of chat.md 1.2 and 2.7. */
export const XTML_WORDS: readonly string[] = [
  "message", " role", '="', "system", "user", "assistant", "tool", "think", "response", "tools", "call",
  "argument", "json", " type", " tool", " index", " key", " name", "string", "number", "boolean", "null",
  "object", "array", "thinking", "-effort", "-declare", "-choice", "-format", "Hello", " world",
  "ab", "foo", "bar", "foobar",
];

/**
 * The 16 named specials (chat.md 1.1) as offsets from the first special id; the other 240 ids
 * are unnamed and read as `<|reserved_token_<id>|>`.
 */
export const K3_NAMED_SPECIALS: readonly { readonly offset: number; readonly text: string; readonly special: boolean }[] = [
  { offset: 0, text: "[BOS]", special: true },
  { offset: 1, text: "[EOS]", special: true },
  { offset: 2, text: "<|end_of_msg|>", special: true },
  { offset: 3, text: "<|open|>", special: false },
  { offset: 4, text: "<|close|>", special: false },
  { offset: 5, text: "<|sep|>", special: false },
  { offset: 6, text: "[start_header_id]", special: true },
  { offset: 7, text: "[end_header_id]", special: true },
  { offset: 9, text: "[EOT]", special: true },
  { offset: 18, text: "<|media_begin|>", special: true },
  { offset: 19, text: "<|media_content|>", special: true },
  { offset: 20, text: "<|media_end|>", special: true },
  { offset: 21, text: "<|media_pad|>", special: true },
  { offset: 65, text: "<osagent_mode>", special: true },
  { offset: 254, text: "[UNK]", special: true },
  { offset: 255, text: "[PAD]", special: true },
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
  const model = ranks.map((bytes, rank) => `${Buffer.from(bytes).toString("base64")} ${rank}`).join("\n") + "\n";
  const decoder: Record<string, unknown> = {};
  for (const { offset, text, special } of K3_NAMED_SPECIALS) {
    decoder[String(ranks.length + offset)] = { content: text, lstrip: false, normalized: false, rstrip: false, single_word: false, special };
  }
  const config = `${JSON.stringify({ added_tokens_decoder: decoder, bos_token: "[BOS]", eos_token: "[EOS]" }, null, 2)}\n`;
  return { model, config };
}

if (import.meta.main) {
  const out = resolve(process.argv[2] ?? CHAT_FIXTURE_DIR);
  const ranks = chatFixtureRanks();
  if (ranks.length !== CHAT_FIXTURE_RANK_COUNT) {
    throw new Error(`the word list gives ${ranks.length} ranks; update CHAT_FIXTURE_RANK_COUNT and the header (vocab = ranks + 256)`);
  }
  const { model, config } = chatFixtureFiles();
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, "tiktoken.model"), model);
  writeFileSync(join(out, "tokenizer_config.json"), config);
  console.log(`${out}: ${ranks.length} ranks + 256 special ids = vocabulary ${ranks.length + 256}`);
}
