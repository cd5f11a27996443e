/**
 * Speculative and hybrid decode under `k3 chat` and `k3 serve` (issue: one generation loop).
 * Both now generate through decode(), so `--spec N` and `--draft-trunk DIR` work there as in the
 * run command: every drafted id is verified, so the answers must equal plain decoding's, greedy
 * and seeded, turn after turn, streamed or not; and the acceptance counts are reported (chat
 * --json and the API: `usage.completion_tokens_details` and `k3.speculation`). The demo model is
 * the subject: its answers are real text, and on these prompts drafts are accepted, so a wrong
 * acceptance or replay would change an answer.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { demoDir } from "../support/demo.ts";
import { k3 } from "../support/k3.ts";
import { k3Async } from "../support/k3-async.ts";
import { openaiClient, readStream } from "../support/openai.ts";
import { serve, stopAll, type Served } from "../support/serve.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(120_000);

let draftTrunk = "";
beforeAll(() => {
  const dir = tempDir("spec-chat-serve");
  draftTrunk = join(dir, "draft");
  for (const args of [["pack-trunk", demoDir, join(dir, "packed")], ["quantize-trunk", join(dir, "packed"), draftTrunk]]) {
    const r = k3(args);
    if (r.code !== 0) throw new Error(`k3 ${args[0]} exited ${r.code}: ${r.stderr}`);
  }
});
afterAll(stopAll);

const story = "Tell me a story about a cat.";
const ways = [["--spec 4", () => ["--spec", "4"]], ["--draft-trunk", () => ["--draft-trunk", draftTrunk]]] as const;

interface ChatJson {
  content: string;
  reasoning_content?: string;
  finish_reason: string;
  usage: { completion_tokens: number; completion_tokens_details?: { accepted_prediction_tokens: number; rejected_prediction_tokens: number } };
  k3: { speculation?: { max_draft: number; sweeps: number; drafted: number; accepted: number } };
}

/** The reported counts agree with each other: OpenAI's names for k3's figures. */
function expectCounts(usage: ChatJson["usage"], speculation: ChatJson["k3"]["speculation"]): void {
  expect(speculation).toBeDefined();
  const s = speculation!;
  expect(s.max_draft).toBe(4);
  expect(s.accepted).toBeGreaterThan(0); // drafts were accepted: the path that emits several ids per sweep ran
  expect(s.accepted).toBeLessThanOrEqual(s.drafted);
  expect(usage.completion_tokens_details).toEqual({ accepted_prediction_tokens: s.accepted, rejected_prediction_tokens: s.drafted - s.accepted });
}

describe("k3 chat --json with speculation gives the plain answers and says how many drafts were accepted", () => {
  const chat = async (sampling: string[], extra: string[]) => {
    const r = await k3Async(["chat", demoDir, "--tok", demoDir, "--json", "--max-tokens", "60", ...sampling, ...extra, "--message", story]);
    expect(r.stderr).not.toContain("Error");
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout) as ChatJson;
  };
  for (const [label, sampling] of [["greedy", ["--temperature", "0"]], ["seeded", ["--seed", "7"]]] as const) {
    test(`${label}: plain, --spec 4 and --draft-trunk`, async () => {
      const [plain, ...speculative] = await Promise.all([chat([...sampling], []), ...ways.map(([, args]) => chat([...sampling], args()))]);
      expect(plain.k3.speculation).toBeUndefined();
      expect(plain.usage.completion_tokens_details).toBeUndefined();
      expect(plain.content.length).toBeGreaterThan(20);
      for (const answer of speculative) {
        expect({ content: answer.content, reasoning: answer.reasoning_content, finish: answer.finish_reason })
          .toEqual({ content: plain.content, reasoning: plain.reasoning_content, finish: plain.finish_reason });
        expect(answer.usage.completion_tokens).toBe(plain.usage.completion_tokens);
        expectCounts(answer.usage, answer.k3.speculation);
      }
    });
  }
});

describe("k3 serve with speculation answers as a plain server does (official openai client)", () => {
  let plain: Served;
  const speculative: Served[] = [];
  beforeAll(async () => {
    const started = await Promise.all([serve(demoDir), ...ways.map(([, args]) => serve(demoDir, args()))]);
    plain = started[0] as Served;
    speculative.push(...started.slice(1));
  });

  /** The same conversation on each server: a greedy turn, a seeded follow-up that reuses it, a streamed seeded turn, a text completion. */
  async function conversation(server: Served) {
    const client = openaiClient(server);
    const first = await client.chat.completions.create({ model: "kimi-k3", messages: [{ role: "user", content: story }], temperature: 0, max_tokens: 48 });
    const firstMessage = first.choices[0]!.message;
    const followUp = await client.chat.completions.create({
      model: "kimi-k3", seed: 7, temperature: 1, max_tokens: 48,
      messages: [{ role: "user", content: story }, { role: "assistant", content: firstMessage.content ?? "" }, { role: "user", content: "Tell me another one." }],
    });
    const streamed = await readStream(await client.chat.completions.create({
      model: "kimi-k3", seed: 11, max_tokens: 48, stream: true, stream_options: { include_usage: true },
      messages: [{ role: "user", content: "Tell me a story about a dog." }],
    }));
    // A counting prompt: the n-gram drafter proposes, and some drafts are accepted only in part (a replay).
    const text = await client.completions.create({ model: "kimi-k3", prompt: "1, 2, 3, 4, 5, 6, 7, 8,", temperature: 0, max_tokens: 48 });
    return { first, followUp, streamed, text };
  }

  const counts = (c: { usage?: unknown; k3?: unknown }) =>
    [(c.usage ?? {}) as ChatJson["usage"], (c.k3 as ChatJson["k3"] | undefined)?.speculation] as const;

  test("greedy and seeded, multi-turn, streamed, and /v1/completions: the same answers, with the acceptance counts", async () => {
    const [want, ...got] = await Promise.all([plain, ...speculative].map(conversation));
    const w = want!;
    expect(counts(w.first as never)[1]).toBeUndefined();
    expect(w.first.choices[0]!.message.content!.length).toBeGreaterThan(20);
    for (const g of got) {
      expect(g.first.choices[0]!.message).toEqual(w.first.choices[0]!.message);
      expect(g.followUp.choices[0]!.message).toEqual(w.followUp.choices[0]!.message);
      expect(g.followUp.usage!.completion_tokens).toBe(w.followUp.usage!.completion_tokens);
      expect({ content: g.streamed.content, reasoning: g.streamed.reasoning, finish: g.streamed.finish })
        .toEqual({ content: w.streamed.content, reasoning: w.streamed.reasoning, finish: w.streamed.finish });
      expect((g.streamed.usage as ChatJson["usage"]).completion_tokens_details).toBeDefined(); // the usage chunk carries the counts too
      expect(g.text.choices[0]!.text).toBe(w.text.choices[0]!.text);
      for (const response of [g.first, g.followUp, g.text] as { usage?: unknown; k3?: unknown }[]) expectCounts(...counts(response));
    }
  });
});
