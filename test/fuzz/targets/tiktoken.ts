/** tiktoken.model (src/tokenizer/rank-file.ts), read with its tokenizer_config.json by loadTokenizer. */
import { join } from "node:path";
import { loadTokenizer, RANK_FILE } from "../../../src/tokenizer/index.ts";
import { byteTokenizer, chatTokenizer, demoTokenizer, dirWith, read, tokenizerText } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateText } from "../mutate.ts";

interface TokenizerSeed extends Seed {
  dir: string;
}

/** What a loaded tokenizer is: every id's bytes, hashed, and the specials. */
export function tokenizerMeaning(dir: string): string {
  const tokenizer = loadTokenizer(dir);
  const ids = Array.from({ length: tokenizer.vocabSize }, (_, id) => id);
  return `${tokenizer.rankCount} ${Bun.hash.wyhash(tokenizer.decode(ids), 0n)} ${JSON.stringify(tokenizer.specials)}`;
}

export const tiktokenTarget: FuzzTarget<TokenizerSeed> = {
  name: "tiktoken",
  about: "tiktoken.model: parseRankFile through loadTokenizer (base64, ranks, gaps, duplicates)",
  seeds: () => [chatTokenizer, byteTokenizer, demoTokenizer].map((dir) => ({ label: join(dir, RANK_FILE), bytes: read(join(dir, RANK_FILE)), dir })),
  mutate: (input, rng, seeds) => mutateText(input, rng, seeds.map((s) => s.bytes)),
  parse(input, seed, scratch) {
    dirWith(join(scratch, "tok"), seed.dir, RANK_FILE, input);
    return tokenizerMeaning(join(scratch, "tok"));
  },
  command(input, seed, dir) {
    const path = dirWith(join(dir, "tok"), seed.dir, RANK_FILE, input);
    return { args: ["tokenize", "--tok", join(dir, "tok"), "--json"], stdin: tokenizerText, names: [path, join(dir, "tok")] };
  },
};
