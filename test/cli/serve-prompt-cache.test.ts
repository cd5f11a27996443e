/**
 * `--prompt-cache DIR` through dist/k3 serve --demo: two servers in sequence on one directory;
 * the second's first request with the same long system prompt prefills only the new ids
 * (`reused_from: "disk"`) and answers the ids a cold run does; a flipped byte in an entry is
 * discarded with a warning and the answer stays exact; the directory stays under its bound.
 */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { serveDemo, stopAll, type Served } from "../support/serve.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(90_000);
afterAll(stopAll);

// A long system prompt: ~2,000 ids in the demo's vocabulary (the figure).
const system = Array.from({ length: 160 }, (_, i) => `Rule ${i + 1}: answer the question you are asked, briefly and kindly.`).join("\n");

interface Reply {
  choices: { message: { content: string | null } }[];
  usage: { prompt_tokens: number; completion_tokens: number };
  k3: { reused_prompt_ids: number; prefilled_ids: number; reused_from: string };
}

async function ask(s: Served, question: string): Promise<Reply> {
  const r = await fetch(`${s.url}/v1/chat/completions`, {
    method: "POST", headers: { "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "system", content: system }, { role: "user", content: question }], max_tokens: 24, temperature: 0, thinking: { type: "disabled" } }),
  });
  expect(r.status).toBe(200);
  return (await r.json()) as Reply;
}

const entries = (dir: string) => readdirSync(dir).flatMap((d) => readdirSync(join(dir, d)).map((n) => join(dir, d, n)));

// Independent servers on their own directories: the two run side by side.
describe.concurrent("--prompt-cache", () => {
  test("a prefix an Anthropic client marks with cache_control is kept, and the next server reuses it", async () => {
    const dir = tempDir("prompt-cache-marked");
    const doc = system.slice(0, system.length / 2);
    const ask = async (s: Served, question: string) => {
      const r = await fetch(`${s.url}/v1/messages`, {
        method: "POST", headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "kimi-k3", max_tokens: 8, temperature: 0,
          messages: [
            { role: "user", content: [{ type: "text", text: doc, cache_control: { type: "ephemeral" } }] },
            { role: "assistant", content: "I have read it." },
            { role: "user", content: question },
          ],
        }),
      });
      return (await r.json()) as { usage: { input_tokens: number; cache_read_input_tokens: number } };
    };
    const first = await serveDemo(["--prompt-cache", dir]);
    expect((await ask(first, "What is rule 3?")).usage.cache_read_input_tokens).toBe(0);
    expect(await first.stop()).toBe(0);
    const second = await serveDemo(["--prompt-cache", dir]);
    // Another question after the same marked document: the document's state comes from disk.
    expect((await ask(second, "What is rule 7?")).usage.cache_read_input_tokens).toBeGreaterThan(900);
    expect(await second.stop()).toBe(0);
  });

  test("the next server reuses the prefix from disk and answers as a cold run; a damaged entry is discarded; the bound holds", async () => {
    const dir = tempDir("prompt-cache");
    const first = await serveDemo(["--prompt-cache", dir, "--prompt-cache-gb", "0.05"]);
    const cold = await ask(first, "What is 2 plus 3?");
    expect(cold.k3.reused_from).toBe("none");
    expect(await first.stop()).toBe(0);
    expect(entries(dir).length).toBeGreaterThan(0);

    const second = await serveDemo(["--prompt-cache", dir, "--prompt-cache-gb", "0.05"]);
    expect(second.startupLog).toMatch(/prompt cache: \d+ prefix\(es\)/);
    const reused = await ask(second, "What is 2 plus 3?");
    expect(reused.k3.reused_from).toBe("disk");
    expect(reused.k3.prefilled_ids).toBeLessThan(20); // the tail after the messages: the notes and the generation prompt
    expect(reused.choices[0]!.message.content).toBe(cold.choices[0]!.message.content);
    expect(reused.usage.completion_tokens).toBe(cold.usage.completion_tokens);
    // Another conversation with the same system prompt starts from its cached end.
    const other = await ask(second, "Name an animal.");
    expect(other.k3.reused_prompt_ids).toBeGreaterThan(1800);
    expect(await second.stop()).toBe(0);

    // Flip a byte in the payload of every entry: each is refused when read, removed, and the answer is still exact.
    for (const path of entries(dir)) {
      const bytes = readFileSync(path);
      bytes[bytes.length - 5] = (bytes[bytes.length - 5] as number) ^ 0x40;
      writeFileSync(path, bytes);
    }
    const third = await serveDemo(["--prompt-cache", dir, "--prompt-cache-gb", "0.05"]);
    const again = await ask(third, "What is 2 plus 3?");
    expect(again.k3.reused_from).toBe("none");
    expect(again.choices[0]!.message.content).toBe(cold.choices[0]!.message.content);
    expect(await third.stop()).toBe(0);
    const total = entries(dir).reduce((n, p) => n + statSync(p).size, 0);
    expect(total).toBeLessThanOrEqual(0.05e9);
  });
});
