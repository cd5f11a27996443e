/**
 * Model text on a terminal (issue: serve safe by default, item 6): every human-readable output
 * of model text shows C0/C1 controls as visible escapes, so a model cannot drive the terminal;
 * JSON keeps the text as generated. The models here have random weights, so the test first
 * finds, in-process, a seed whose first sampled id is ESC, then runs dist/k3 with it.
 */
import { describe, expect, test } from "bun:test";
import { renderChat } from "../../src/chat/render.ts";
import { parseChatRequest } from "../../src/chat/request.ts";
import { feed } from "../../src/decode/loop.ts";
import { createSampler } from "../../src/decode/sampling.ts";
import { openEngine } from "../../src/engine/open.ts";
import { loadConfig } from "../../src/checkpoint/config.ts";
import { budgetRequest } from "../../src/plan/budget.ts";
import { visibleText } from "../../src/report/visible-text.ts";
import { loadTokenizer } from "../../src/tokenizer/index.ts";
import { chatModelDir } from "../support/chat-fixture.ts";
import { k3 } from "../support/k3.ts";
import { join } from "node:path";

const ESC = "\x1b";
const hot = { temperature: 2, topP: 1, topK: 0, minP: 0, presencePenalty: 0, frequencyPenalty: 0 };

/** The first seed (from 0) whose first id after `prompt` is `wanted`, sampling at temperature 2. */
function seedFor(modelDir: string, prompt: readonly number[], wanted: number): number {
  const { config } = loadConfig(join(modelDir, "config.json"));
  using engine = openEngine({
    modelDir, config, layerCount: config.numLayers, positions: prompt.length + 2, prefillChunk: 64, budgets: budgetRequest([]), trunkDir: undefined,
  });
  const state = engine.model.newState();
  const logits = feed(engine.model, state, prompt, 64);
  engine.model.release(state);
  for (let seed = 0; seed < 100_000; seed++) if (createSampler({ ...hot, seed }).choose(logits) === wanted) return seed;
  throw new Error("no seed in 100,000 samples ESC first");
}

describe("model text on a terminal", () => {
  test("controls but newline and tab become escapes; everything else is kept", () => {
    expect(visibleText("a\x1b[31mb\r\x07\n\tc\x7f\x9b\u00a0é")).toBe("a\\x1b[31mb\\x0d\\x07\n\tc\\x7f\\x9b\u00a0é");
    expect(visibleText("\x00")).toBe("\\x00");
  });

  test("k3 chat: an ESC the model writes shows as \\x1b on the terminal's streams; --json keeps it", () => {
    const dir = chatModelDir();
    const tokenizer = loadTokenizer(dir);
    const request = { messages: [{ role: "user", content: "Hi" }], thinking: { type: "disabled", effort: "max" } };
    const prompt = renderChat(parseChatRequest(request, { source: "transcript" }), tokenizer).ids;
    const [esc] = tokenizer.encode(ESC);
    const seed = seedFor(dir, prompt, esc as number);
    const args = ["chat", dir, "--tok", dir, "--message", "Hi", "--no-think", "--temperature", "2", "--top-p", "1", "--seed", String(seed), "--max-tokens", "1"];
    const shown = k3(args);
    expect(shown.code).toBe(0);
    expect(shown.stdout + shown.stderr).not.toContain(ESC);
    expect(shown.stdout).toContain("\\x1b");
    const json = k3([...args, "--json"]);
    expect(JSON.parse(json.stdout).content).toBe(ESC);
  });

  test("the run command's report shows it escaped; the results JSON keeps it", () => {
    const dir = join(import.meta.dir, "../fixtures/tiny13");
    const tok = join(import.meta.dir, "../fixtures/byte-tokenizer");
    const ids = loadTokenizer(tok).encode("Hi");
    const seed = seedFor(dir, ids, 0x1b);
    const r = k3([dir, "--tok", tok, "--prompt", "Hi", "--gen", "1", "--temperature", "2", "--seed", String(seed), "--out", "-"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).generated_text).toBe(ESC);
    expect(r.stderr).not.toContain(ESC);
    expect(r.stderr).toContain("--- generated text ---\n\\x1b\n");
  });
});
