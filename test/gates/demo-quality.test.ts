/**
 * Does the demo model speak? Measured on the held-out prompts of test/fixtures/demo (the data
 * generator's held-out stream, never trained on), greedy, in-process:
 * - text: of the words k3 generates after each of the 24 text prompts (48 ids, or up to [EOS]),
 *   at least 95% are dictionary words (the word-list package, with the data generator's own
 *   definition of a word and its four extra words: tools/train-demo/words.ts);
 * - chat: of the 24 held-out chat requests, rendered as the server renders them, at least 90% get
 *   a reply that the reply parser reads as structured: the reasoning (thinking on) and either a
 *   non-empty answer ended by a stop id (finish "stop"), or, where tools are declared, a complete
 *   tool call (finish "tool_calls").
 * The shares are printed, so a regression shows before it fails.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { finishReason } from "../../src/chat/finish.ts";
import { parseReply } from "../../src/chat/reply-message.ts";
import { parseChatRequest } from "../../src/chat/request.ts";
import { controlIds, stopIds } from "../../src/chat/specials.ts";
import { loadConfig } from "../../src/checkpoint/config.ts";
import { generate } from "../../src/engine/generate.ts";
import { openEngine } from "../../src/engine/open.ts";
import { loadTokenizer } from "../../src/tokenizer/index.ts";
import { gbToBytes } from "../../src/units.ts";
import { loadDictionary, wordsOf } from "../../tools/train-demo/words.ts";
import { fixturesDir } from "../support/fixtures.ts";
import { demoDir } from "../support/demo.ts";

interface QualityCase {
  kind: "text" | "chat";
  text?: string;
  request?: unknown;
  prompt_ids: number[];
}
const cases = (JSON.parse(readFileSync(join(fixturesDir, "demo", "expected.json"), "utf8")) as { cases: QualityCase[] }).cases;
const TEXT_IDS = 48;
const REPLY_IDS = 320;

function openDemo() {
  const { config } = loadConfig(join(demoDir, "config.json"));
  const longest = Math.max(...cases.map((c) => c.prompt_ids.length));
  return openEngine({
    modelDir: demoDir, config, layerCount: config.numLayers, positions: longest + REPLY_IDS + 1, prefillChunk: 64,
    budgets: [{ kind: "cache", bytes: gbToBytes(1) }], trunkDir: undefined,
  });
}

test("text: at least 95% of the words generated after 24 held-out prompts are dictionary words", () => {
  using engine = openDemo();
  const tokenizer = loadTokenizer(demoDir);
  const eos = new Set([controlIds(tokenizer).eos]);
  const dictionary = loadDictionary();
  let words = 0;
  let known = 0;
  const unknown = new Map<string, number>();
  const texts = cases.filter((c) => c.kind === "text");
  expect(texts.length).toBeGreaterThanOrEqual(20);
  for (const c of texts) {
    const result = generate(engine, c.prompt_ids, { maxNewTokens: TEXT_IDS, mode: "incremental", stopIds: eos, tokenizer });
    for (const word of wordsOf(result.generatedText ?? "")) {
      words++;
      if (dictionary.has(word)) known++;
      else unknown.set(word, (unknown.get(word) ?? 0) + 1);
    }
  }
  const share = known / words;
  console.log(`demo text: ${known} of ${words} generated words are dictionary words (${(share * 100).toFixed(1)}%); others: ${[...unknown].map(([w, n]) => `${w} x${n}`).join(", ") || "none"}`);
  expect(words).toBeGreaterThan(texts.length * 20);
  expect(share).toBeGreaterThanOrEqual(0.95);
}, 60_000);

test("chat: at least 90% of 24 held-out requests get a structured reply (reasoning, and an answer or a tool call)", () => {
  using engine = openDemo();
  const tokenizer = loadTokenizer(demoDir);
  const stops = stopIds(controlIds(tokenizer));
  const chats = cases.filter((c) => c.kind === "chat");
  expect(chats.length).toBeGreaterThanOrEqual(20);
  const failures: string[] = [];
  for (const [i, c] of chats.entries()) {
    const request = parseChatRequest(c.request, { source: `chat case ${i}` });
    const result = generate(engine, c.prompt_ids, { maxNewTokens: REPLY_IDS, mode: "incremental", stopIds: stops });
    const { message } = parseReply(tokenizer, result.generatedIds, { thinking: request.thinking });
    const finish = finishReason(result.finishReason, (message.tool_calls?.length ?? 0) > 0);
    const reasoned = !request.thinking || (message.reasoning_content ?? "").trim().length > 0;
    const answered = finish === "stop" && (message.content ?? "").trim().length > 0;
    const called = finish === "tool_calls" && request.tools.length > 0;
    if (!(reasoned && (answered || called))) failures.push(`case ${i} (${finish}): ${JSON.stringify(message).slice(0, 200)}`);
  }
  const share = (chats.length - failures.length) / chats.length;
  console.log(`demo chat: ${chats.length - failures.length} of ${chats.length} replies structured (${(share * 100).toFixed(0)}%)${failures.length ? `; not: ${failures.join(" | ")}` : ""}`);
  expect(share).toBeGreaterThanOrEqual(0.9);
}, 120_000);
