/**
 * A `POST /v1/completions` body (src/serve/text-completion.ts). It reaches k3 only over HTTP,
 * so it is fuzzed in process only.
 */
import { parseTextRequest } from "../../../src/serve/text-completion.ts";
import { loadTokenizer, type Tokenizer } from "../../../src/tokenizer/index.ts";
import { chatTokenizer, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

let tokenizer: Tokenizer | undefined;

const bodies: unknown[] = [
  { model: "kimi-k3", prompt: "Once upon a time<|end_of_msg|>", max_tokens: 8 },
  { prompt: "Hello", temperature: 0.7, top_p: 0.9, top_k: 40, min_p: 0.05, seed: 3, stop: ["\n", "END"], stream: true, stream_options: { include_usage: true } },
  { prompt: "x", presence_penalty: 0.5, frequency_penalty: -0.5, n: 1, logprobs: null, stop: "." },
  { prompt: "y", n: 4, seed: 9007199254740990, temperature: 1 },
];

export const completionRequestTarget: FuzzTarget = {
  name: "completion-request",
  about: "a /v1/completions body: parseTextRequest (prompt, stop, sampling knobs, max_tokens against the context)",
  seeds: () => bodies.map((body, i): Seed => ({ label: `body ${i}`, bytes: utf8(JSON.stringify(body)) })),
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse(input) {
    tokenizer ??= loadTokenizer(chatTokenizer);
    return JSON.stringify(parseTextRequest(input, tokenizer, 4096));
  },
};
