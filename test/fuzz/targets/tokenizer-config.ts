/** tokenizer_config.json (src/tokenizer/added-tokens.ts), read with its tiktoken.model by loadTokenizer. */
import { join } from "node:path";
import { CONFIG_FILE } from "../../../src/tokenizer/index.ts";
import { byteTokenizer, chatTokenizer, demoTokenizer, dirWith, read, tokenizerText } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";
import { tokenizerMeaning } from "./tiktoken.ts";

interface TokenizerSeed extends Seed {
  dir: string;
}

export const tokenizerConfigTarget: FuzzTarget<TokenizerSeed> = {
  name: "tokenizer-config",
  about: "tokenizer_config.json: parseAddedTokens through loadTokenizer (ids, duplicates after unescaping)",
  seeds: () => [chatTokenizer, byteTokenizer, demoTokenizer].map((dir) => ({ label: join(dir, CONFIG_FILE), bytes: read(join(dir, CONFIG_FILE)), dir })),
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse(input, seed, scratch) {
    dirWith(join(scratch, "tok"), seed.dir, CONFIG_FILE, input);
    return tokenizerMeaning(join(scratch, "tok"));
  },
  command(input, seed, dir) {
    const path = dirWith(join(dir, "tok"), seed.dir, CONFIG_FILE, input);
    return { args: ["tokenize", "--tok", join(dir, "tok"), "--json"], stdin: tokenizerText, names: [path, join(dir, "tok")] };
  },
};
