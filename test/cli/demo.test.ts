/**
 * The demo model built into k3 (assets/demo, issue 21), through dist/k3 copied alone into an empty
 * directory with a fresh HOME: `k3 demo`, `k3 chat --demo --json`, and `k3 serve --demo` answered
 * through the official `openai` client. One process per contract, short replies, greedy.
 * Every reply must also read as English: nearly all of its words dictionary words, no markup.
 * The processes are independent, so the tests run concurrently.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { copyFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type OpenAI from "openai";
import pkg from "../../package.json" with { type: "json" };
import { downloadRecordName } from "../../src/fetch/download-record.ts";
import { loadDictionary, wordsOf } from "../../tools/train-demo/words.ts";
import { demoDir } from "../support/demo.ts";
import { k3Async } from "../support/k3-async.ts";
import { openaiClient, readStream } from "../support/openai.ts";
import { serveDemo, stopAll } from "../support/serve.ts";
import { tempDir } from "../support/tmp.ts";

afterAll(stopAll);

const config = JSON.parse(readFileSync(join(demoDir, "config.json"), "utf8")) as { text_config: { num_hidden_layers: number } };
const layers = config.text_config.num_hidden_layers;

const modelLine = `the demo Kimi K3 (${layers} layers, trained here on generated text; see tools/train-demo)`;
const defaultPrompt = "Kimi K3 runs on one machine.";

/** The share of `text`'s words that are dictionary words, and how many words there are. */
function wordShare(text: string): { words: number; share: number } {
  const dictionary = loadDictionary();
  const words = wordsOf(text);
  return { words: words.length, share: words.filter((w) => dictionary.has(w)).length / Math.max(1, words.length) };
}

/** Readable: enough words, nearly all of them dictionary words, and no chat markup left in. */
function expectReadable(text: string, minWords: number): void {
  const { words, share } = wordShare(text);
  expect(words).toBeGreaterThanOrEqual(minWords);
  expect(share).toBeGreaterThanOrEqual(0.9);
  expect(text).not.toContain("<|");
  expect(text).not.toContain("\uFFFD");
}

interface AssistantMessage {
  role: string;
  content: string | null;
  reasoning_content: string | null;
}

describe.concurrent("the demo model from dist/k3 alone", () => {
  test("k3 demo prints the default prompt and its continuation; a stale cached file of the same size is rewritten", async () => {
    const home = tempDir("home");
    const cache = join(home, ".cache", "k3", `demo-${pkg.version}`);
    // An older demo with the same shapes left in the cache: its bytes differ, so it is replaced.
    const shard = "model-00010-of-000010.safetensors";
    mkdirSync(cache, { recursive: true });
    writeFileSync(join(cache, shard), Buffer.alloc(statSync(join(demoDir, shard)).size));

    const r = await k3Async(["demo"], { isolated: true, env: { HOME: home } });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`demo: ${modelLine}, from ${cache}\n`);
    expect(r.stderr).toContain("--- generated text ---");
    expect(r.stdout.startsWith(defaultPrompt)).toBe(true);
    expect(r.stdout.endsWith("\n")).toBe(true);
    const continuation = r.stdout.slice(defaultPrompt.length, -1);
    expect(continuation.length).toBeGreaterThan(0);
    // The cache holds every embedded file, byte for byte (the index is not needed by the engine).
    const shipped = readdirSync(demoDir).filter((name) => name !== "model.safetensors.index.json").sort();
    expect(readdirSync(cache).sort()).toEqual(shipped);
    for (const name of shipped) expect(readFileSync(join(cache, name)).equals(readFileSync(join(demoDir, name)))).toBe(true);
    // The continuation of the default prompt reads as English (48 ids: some 30 words).
    expectReadable(continuation, 20);
  }, 30_000);

  test("k3 chat --demo --message --json: one turn with no <model_dir> and no --tok; --ctx and --prefill-chunk still apply", async () => {
    const r = await k3Async(
      ["chat", "--demo", "--message", "Tell me a story about a cat.", "--json", "--temperature", "0", "--max-tokens", "200", "--ctx", "1024", "--prefill-chunk", "16"],
      { isolated: true, env: { HOME: tempDir("home") } },
    );
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(`k3 chat: ${modelLine}, from `);
    expect(r.stderr).toContain(`, ${layers} layers, context 1024 positions`);
    const message = JSON.parse(r.stdout) as AssistantMessage & { finish_reason: string; usage: { prompt_tokens: number; completion_tokens: number; total_tokens: number } };
    expect(message.role).toBe("assistant");
    expect(typeof message.reasoning_content).toBe("string"); // thinking is on by default
    expect(message.content === null || typeof message.content === "string").toBe(true);
    expect(["stop", "length", "tool_calls"]).toContain(message.finish_reason);
    expect(message.usage.completion_tokens).toBeGreaterThan(0);
    expect(message.usage.completion_tokens).toBeLessThanOrEqual(200);
    expect(message.usage.total_tokens).toBe(message.usage.prompt_tokens + message.usage.completion_tokens);
    // The reply ends by itself, with a reasoning and an answer that both read as English.
    expect(message.finish_reason).toBe("stop");
    expectReadable(message.reasoning_content!, 5);
    expectReadable(message.content!, 10);
  }, 30_000);

  test("--demo with a <model_dir> or --tok is a usage error naming them", async () => {
    const withDir = await k3Async(["chat", "--demo", demoDir, "--message", "x"]);
    expect(withDir.code).toBe(2);
    expect(withDir.stderr).toBe("k3: chat: --demo is the model directory and the tokenizer: give no <model_dir> with it\n");
    const withTok = await k3Async(["serve", "--demo", "--tok", demoDir]);
    expect(withTok.code).toBe(2);
    expect(withTok.stderr).toBe("k3: serve: --demo is the model directory and the tokenizer: give no --tok with it\n");
  });

  test("the demo as a model directory: k3 verify --hash passes on its record; a state file resumes it exactly", async () => {
    // The files as `k3 download` would leave them, with the record it writes (git oid = sha1 of the blob).
    const dir = join(tempDir("demo-model"), "demo");
    mkdirSync(dir);
    const files = readdirSync(demoDir).sort().map((path) => {
      copyFileSync(join(demoDir, path), join(dir, path));
      const bytes = readFileSync(join(dir, path));
      const sha256 = createHash("sha256").update(bytes).digest("hex");
      const gitOid = createHash("sha1").update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
      return { path, size: bytes.length, git_oid: gitOid, lfs_sha256: path.endsWith(".safetensors") ? sha256 : null, sha256, verified_at: "" };
    });
    const commit = "d".repeat(40);
    const record = { format: "k3-download", version: 1, repo: "k3/demo", revision: "main", commit, endpoint: "", include: [], exclude: [], excluded: [], files, updated_at: "" };
    writeFileSync(join(dir, downloadRecordName), JSON.stringify(record));
    const verified = await k3Async(["verify", dir, "--hash"]);
    expect(verified.stdout).toContain(`  hashes : ${files.length} of ${files.length} files match`);
    expect(verified.stdout).toContain(`  RESULT : checksum-verified snapshot at ${commit}`);
    expect(verified.code).toBe(0);

    const json = async (args: string[]) => {
      const r = await k3Async([dir, "--tok", dir, ...args, "--out", "-"]);
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout) as { generated_ids: number[]; full_ids: number[] };
    };
    const prompt = ["--prompt", defaultPrompt];
    const whole = await json([...prompt, "--gen", "24"]);
    const state = join(tempDir("demo-state"), "demo.k3st");
    expect((await json([...prompt, "--gen", "10", "--save-state", state])).generated_ids).toEqual(whole.generated_ids.slice(0, 10));
    const resumed = await json(["--load-state", state, "--gen", "14"]);
    expect(resumed.generated_ids).toEqual(whole.generated_ids.slice(10));
    expect(resumed.full_ids).toEqual(whole.full_ids);
  }, 30_000);

  test("k3 serve --demo answers the openai client: non-streamed, the same streamed, and a second turn", async () => {
    const s = await serveDemo(["--ctx", "2048"], { isolated: true });
    const client = openaiClient(s);
    expect((await client.models.list()).data.map((m) => m.id)).toEqual(["kimi-k3"]);
    const question = { role: "user" as const, content: "What do plants need to grow?" };
    const request = { model: "kimi-k3", messages: [question], max_tokens: 128, temperature: 0 };

    const whole = await client.chat.completions.create(request);
    const message = whole.choices[0]!.message as unknown as AssistantMessage;
    expect(message.role).toBe("assistant");
    expect(typeof message.reasoning_content).toBe("string");
    expect(["stop", "length", "tool_calls"]).toContain(whole.choices[0]!.finish_reason);
    expect(whole.usage!.completion_tokens).toBeLessThanOrEqual(128);

    const streamed = async (messages: OpenAI.ChatCompletionMessageParam[], maxTokens = request.max_tokens) =>
      readStream(await client.chat.completions.create({ ...request, messages, max_tokens: maxTokens, stream: true, stream_options: { include_usage: true } }));
    const again = await streamed([question]);
    expect(again).toEqual({ content: message.content ?? "", reasoning: message.reasoning_content ?? "", finish: whole.choices[0]!.finish_reason, usage: whole.usage });

    // A second turn on the first: the history goes back in, as a client sends it.
    const second = await streamed([question, { role: "assistant", content: message.content ?? "" }, { role: "user", content: "Tell me a story about a dog." }], 256);
    expect(["stop", "length", "tool_calls"]).toContain(second.finish ?? "none");
    // Both turns end by themselves, each with a reasoning and an answer that read as English.
    expect(whole.choices[0]!.finish_reason).toBe("stop");
    expectReadable(message.reasoning_content!, 5);
    expectReadable(message.content!, 3);
    expect(second.finish).toBe("stop");
    expectReadable(second.reasoning, 5);
    expectReadable(second.content, 10);
    expect(await s.stop()).toBe(0);
  }, 60_000);
});
