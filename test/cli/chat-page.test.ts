/**
 * The chat page of `k3 serve` (src/page/) in a real browser: `dist/k3 serve --demo` (the demo
 * model built into k3), headless Chromium (Debian's package) driven by playwright-core. Three
 * turns stream in and equal the API's own answers to the same messages; Escape stops a reply and
 * the server is free at once; a reload restores the conversations; exports and imports
 * round-trip; hostile model text renders inert; an API key is asked for and kept in
 * sessionStorage only. Screenshots of a conversation with the demo model at desktop and phone
 * width go to the test's temporary directory (and to $K3_SCREENSHOT_DIR).
 *
 * One test runs on the chat fixture model instead (random weights, on a page of its own): Escape
 * needs a reply long enough to be stopped mid-way, and the fixture writes until --max-tokens
 * while the demo's replies end by themselves within a second.
 *
 * Code run in the page is given as strings: this project's TypeScript has no DOM types outside
 * src/page/.
 *
 * The three tests with a page and server of their own (Escape, the key, the prefill's status
 * line) run at the same time, after the first on the shared page (alone: its streaming checks
 * need the browser to paint while a short reply streams in) and before the shared page's others.
 * The shared page's demo server runs at the machine's default thread count (bun test runs dist/k3
 * on one thread), the pace its streaming checks were written against: a reply must take some
 * animation frames to stream in for the page to be seen showing it part by part.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { BrowserContext, Page } from "playwright-core";
import { envValue } from "../../src/env.ts";
import { browserMissing, openBrowser } from "../support/browser.ts";
import { chatModelDir } from "../support/chat-fixture.ts";
import { serve, serveDemo, stopAll, type Served } from "../support/serve.ts";
import { tempDir } from "../support/tmp.ts";

/** The random-weight chat fixture: its replies run to --max-tokens. */
const fixtureDir = chatModelDir();

/** The shared page's server's environment: without bun test's K3_THREADS=1, so one thread per CPU, as for users. */
const paced = { env: { K3_THREADS: undefined } };

if (browserMissing) process.stderr.write(`SKIPPED the chat page's browser tests: ${browserMissing}\n`);

interface StoredMessage {
  role: string;
  content: string | null;
  reasoning_content?: string | null;
}
interface Stored {
  current: string;
  conversations: { id: string; messages: StoredMessage[]; notes: Record<string, { stats?: string; stopped?: boolean }> }[];
}

const post = (s: Served, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${s.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });

/** The API's own answer (not streamed) to the messages, with the settings the page sends. */
async function apiAnswer(s: Served, messages: unknown[], thinking: boolean, maxTokens: number) {
  const r = await post(s, {
    messages, temperature: 0, top_p: 0.95, max_tokens: maxTokens,
    thinking: thinking ? { type: "enabled", effort: "max" } : { type: "disabled" },
  });
  expect(r.status).toBe(200);
  const body = (await r.json()) as { choices: { message: StoredMessage }[] };
  return body.choices[0]!.message;
}

/**
 * Polls an expression in the page until it is true. Not page.waitForFunction, which evaluates
 * strings with eval and so runs into the page's Content-Security-Policy (no 'unsafe-eval').
 */
async function until(page: Page, expression: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`the page never had: ${expression}`);
    await Bun.sleep(10);
  }
}

const stored = async (page: Page) => (await page.evaluate("JSON.parse(localStorage.getItem('k3.chat.v1'))")) as Stored;
const currentMessages = async (page: Page) => {
  const s = await stored(page);
  return s.conversations.find((c) => c.id === s.current)!;
};

/** Waits until the page shows `count` assistant messages and no reply is running. */
const turnDone = (page: Page, count: number) =>
  until(page, `document.querySelectorAll("article.assistant").length === ${count} && document.getElementById("stop").disabled`, 30_000);

/** Records, from inside the page, what the last assistant message showed while it was streaming. */
const recorder = `(() => {
  const seen = { reasoning: [], answer: [], openWhileStreaming: false, thinkingLabel: false };
  window.__k3seen = seen;
  new MutationObserver(() => {
    const all = document.querySelectorAll("article.assistant");
    const a = all[all.length - 1];
    if (!a || a.getAttribute("aria-busy") !== "true") return;
    const r = a.querySelector(".reasoning-text").textContent.length;
    const t = a.querySelector(".answer").textContent.length;
    if (seen.reasoning[seen.reasoning.length - 1] !== r) seen.reasoning.push(r);
    if (seen.answer[seen.answer.length - 1] !== t) seen.answer.push(t);
    if (a.querySelector("details.reasoning").open) seen.openWhileStreaming = true;
    if (a.querySelector("summary").textContent.startsWith("Thinking")) seen.thinkingLabel = true;
  }).observe(document.getElementById("conversation"), { subtree: true, childList: true, characterData: true, attributes: true });
})()`;
interface Seen {
  reasoning: number[];
  answer: number[];
  openWhileStreaming: boolean;
  thinkingLabel: boolean;
}
const seen = async (page: Page) => (await page.evaluate("window.__k3seen")) as Seen;
/**
 * Paces, from inside the page, the first `window.__k3paceEvents` events of each chat reply to one
 * per 40 ms (more than an animation frame), so the page is seen part by part however fast this
 * machine decodes: a short reply at full speed can land within one frame (1 clean-clone run in 4
 * failed so, 2026-12-05). The page's own fetch, stream reader and parser still do all the work;
 * events are split on the SSE blank line, never inside one.
 */
const pacer = `(() => {
  const realFetch = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const response = await realFetch(input, init);
    if (!String(input).endsWith("/v1/chat/completions") || !response.body) return response;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    const encoder = new TextEncoder();
    let pending = "";
    let paced = window.__k3paceEvents ?? 0;
    const body = new ReadableStream({
      async pull(controller) {
        const { done, value } = await reader.read();
        if (done) {
          if (pending) controller.enqueue(encoder.encode(pending));
          controller.close();
          return;
        }
        pending += decoder.decode(value, { stream: true });
        for (let end = pending.indexOf("\\n\\n"); end >= 0; end = pending.indexOf("\\n\\n")) {
          const event = pending.slice(0, end + 2);
          pending = pending.slice(end + 2);
          if (paced > 0) {
            paced--;
            await new Promise((resolve) => setTimeout(resolve, 40));
          }
          controller.enqueue(encoder.encode(event));
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
})()`;
const pacedEvents = 12;

describe.skipIf(browserMissing !== undefined)("the chat page in headless Chromium", () => {
  let server: Served;
  let fixture: Served;
  let browser: BrowserContext;
  let page: Page;
  const shots = tempDir("screenshots");
  /** Every request the page made, and every console error it logged. */
  const requested: string[] = [];
  const chatBodies: Record<string, unknown>[] = [];
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    [server, fixture, browser] = await Promise.all([serveDemo([], paced), serve(fixtureDir), openBrowser()]);
    page = browser.pages()[0] ?? (await browser.newPage());
    page.on("request", (r) => {
      requested.push(r.url());
      if (r.url().endsWith("/v1/chat/completions")) chatBodies.push(r.postDataJSON() as Record<string, unknown>);
    });
    page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
    page.on("pageerror", (e) => consoleErrors.push(e.message));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await stopAll();
  });

  test("three turns: reasoning and answer stream in and equal the API's answers; the status line has k3's statistics and reuse", async () => {
    await page.goto(`${server.url}/`);
    await until(page, `document.getElementById("model-name").textContent === "kimi-k3"`);
    await page.getByLabel("Temperature").fill("0");
    await page.getByLabel("Max tokens").fill("400");
    expect(await page.getByLabel("Thinking").isChecked()).toBe(true);
    await page.evaluate(pacer);
    await page.evaluate(`window.__k3paceEvents = ${pacedEvents}`);
    await page.evaluate(recorder);

    // Shift+Enter is a new line, Enter sends.
    const box = page.getByLabel("Message");
    await box.click();
    await page.keyboard.type("Tell me a story");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("about a cat");
    expect(await box.inputValue()).toBe("Tell me a story\nabout a cat");
    expect(await page.locator("article").count()).toBe(0);
    await page.keyboard.press("Enter");
    await turnDone(page, 1);

    const first = await currentMessages(page);
    expect(first.messages[0]).toEqual({ role: "user", content: "Tell me a story\nabout a cat" });
    const one = first.messages[1]!;
    expect(one).toEqual(await apiAnswer(server, [first.messages[0]], true, 400));
    expect(one.reasoning_content!.length).toBeGreaterThan(0);
    // The request the page sent: the public streaming API with the settings on the form.
    expect(chatBodies[0]).toMatchObject({ stream: true, stream_options: { include_usage: true }, temperature: 0, top_p: 0.95, max_tokens: 400, thinking: { type: "enabled", effort: "max" } });
    // The reasoning streamed in, folded, under a "Thinking…" label, and stays folded.
    const streamed = await seen(page);
    expect(streamed.reasoning.filter((n) => n > 0 && n < one.reasoning_content!.length).length).toBeGreaterThanOrEqual(2);
    expect(streamed.thinkingLabel).toBe(true);
    expect(streamed.openWhileStreaming).toBe(false);
    const reasoning = page.locator("article.assistant details.reasoning").first();
    const reasoningOpen = `document.querySelector("article.assistant details.reasoning").open`;
    expect(await page.evaluate(reasoningOpen)).toBe(false);
    expect(await reasoning.locator(".reasoning-text").textContent()).toBe(one.reasoning_content!);
    await reasoning.locator("summary").click();
    expect(await page.evaluate(reasoningOpen)).toBe(true);
    expect(await page.locator("#status").textContent()).toMatch(/^prefill \d+ ids in .+, nothing reused · \d+ tokens in .+: [\d.]+ tok\/s, .+\/token · finish (stop|length)$/);

    // Turn two, thinking off: the answer streams in as Markdown.
    await page.getByLabel("Thinking").uncheck();
    await page.evaluate(recorder);
    await box.fill("Go on");
    await page.getByRole("button", { name: "Send" }).click();
    await turnDone(page, 2);
    const second = await currentMessages(page);
    const two = second.messages[3]!;
    expect(two).toEqual(await apiAnswer(server, second.messages.slice(0, 3), false, 400));
    expect(two.content!.length).toBeGreaterThan(0);
    expect(two.reasoning_content).toBeNull();
    const shown = (await page.locator("article.assistant .answer").nth(1).textContent())!.length;
    expect(shown).toBeGreaterThan(0);
    expect((await seen(page)).answer.filter((n) => n > 0 && n < shown).length).toBeGreaterThanOrEqual(2);
    expect(await page.locator("article.assistant").nth(1).locator("details.reasoning").isHidden()).toBe(true);
    await page.evaluate("window.__k3paceEvents = 0");

    // Turn three, thinking still off (a shorter reply): the server reuses the state of turn two,
    // and the page says so.
    await page.getByLabel("Max tokens").fill("40");
    await box.fill("Keep going");
    await page.keyboard.press("Enter");
    await turnDone(page, 3);
    const status = (await page.locator("#status").textContent())!;
    const reused = Number(status.match(/(\d+) ids reused \((live|snapshot)\)/)?.[1]);
    expect(reused).toBeGreaterThan(0);
    const third = await currentMessages(page);
    expect(third.messages[5]).toEqual(await apiAnswer(server, third.messages.slice(0, 5), false, 40));
    expect(third.notes["5"]!.stats).toBe(status);
    expect(await page.locator("article.assistant .turn-stats").nth(2).textContent()).toBe(status);
  }, 60_000);

  test.concurrent("Escape stops a reply mid-way: the page keeps what came, and the server stops at the next token (the fixture model)", async () => {
    const messages = [{ role: "user", content: "Write a long poem" }];
    const started = performance.now();
    const full = await apiAnswer(fixture, messages, true, 1000);
    const fullSeconds = (performance.now() - started) / 1000;
    expect(full.reasoning_content!.length).toBeGreaterThan(500);

    const page = await browser.newPage(); // the fixture's origin: storage of its own
    try {
      await page.goto(`${fixture.url}/`);
      await until(page, `document.getElementById("model-name").textContent === "kimi-k3"`);
      expect(await page.locator("article").count()).toBe(0);
      await page.getByLabel("Temperature").fill("0");
      await page.getByLabel("Thinking").check();
      await page.getByLabel("Max tokens").fill("1000");
      await page.getByLabel("Message").fill("Write a long poem");
      await page.keyboard.press("Enter");
      await until(page, `(document.querySelector("article.assistant .reasoning-text")?.textContent.length ?? 0) > 0`, 20_000);
      await page.keyboard.press("Escape");
      await turnDone(page, 1);
      const stoppedAt = performance.now();
      // A reply the server would still be generating would hold this one up behind it.
      const next = await post(fixture, { messages: [{ role: "user", content: "Hi" }], max_tokens: 1, temperature: 0 });
      expect(next.status).toBe(200);
      const waitedSeconds = (performance.now() - stoppedAt) / 1000;
      expect(waitedSeconds).toBeLessThan(fullSeconds / 3);

      const c = await currentMessages(page);
      const partial = c.messages[1]!.reasoning_content!;
      expect(partial.length).toBeGreaterThan(0);
      expect(partial.length).toBeLessThan(full.reasoning_content!.length);
      expect(full.reasoning_content!.startsWith(partial)).toBe(true);
      expect(c.notes["1"]!.stopped).toBe(true);
      expect(await page.locator("#status").textContent()).toStartWith("Stopped after");
      expect(await page.locator("article.assistant .answer").textContent()).toBe("(stopped while thinking)");
      expect(await page.getByRole("button", { name: "Stop" }).isDisabled()).toBe(true);
    } finally {
      await page.close();
    }
  }, 60_000);

  test.concurrent("the page and its assets load without the key (from dist/k3 alone); the page asks for it and keeps it in sessionStorage only", async () => {
    // A copy of the executable in an empty directory: the page comes from inside it.
    const s = await serveDemo(["--api-key", "sekret"], { isolated: true }); // alone: the default thread count
    const page = await browser.newPage(); // another origin (port), another tab: storage of its own
    try {
      const html = await fetch(`${s.url}/`);
      expect(html.status).toBe(200);
      const assets = [...(await html.text()).matchAll(/(?:src|href)="(\/[^"]+)"/g)].map((m) => m[1] as string);
      expect(assets.length).toBeGreaterThanOrEqual(2);
      for (const asset of assets) expect((await fetch(`${s.url}${asset}`)).status).toBe(200);
      expect((await fetch(`${s.url}/v1/models`)).status).toBe(401);

      await page.goto(`${s.url}/`);
      await page.waitForSelector("#key-dialog[open]");
      await page.locator("input#api-key").fill("wrong");
      await page.getByRole("button", { name: "Use key" }).click();
      await until(page, `document.getElementById("key-dialog").open && document.getElementById("key-reason").textContent.includes("refused")`);
      await page.locator("input#api-key").fill("sekret");
      await page.locator("input#api-key").press("Enter"); // Enter uses the key (a cancel would leave the model unnamed)
      await until(page, `document.getElementById("model-name").textContent === "kimi-k3"`);
      await page.getByLabel("Max tokens").fill("4");
      await page.getByLabel("Message").fill("Hello");
      await page.keyboard.press("Enter");
      await turnDone(page, 1);
      expect(await page.locator("#status").textContent()).toStartWith("prefill");
      expect(await page.evaluate("sessionStorage.getItem('k3.apiKey')")).toBe("sekret");
      expect(await page.evaluate("JSON.stringify({ ...localStorage })")).not.toContain("sekret");
      // A reload in the same tab keeps the key; no question asked.
      await page.reload();
      await until(page, `document.getElementById("model-name").textContent === "kimi-k3"`);
      expect(await page.evaluate(`document.getElementById("key-dialog").open`)).toBe(false);
    } finally {
      await page.close();
      expect(await s.stop()).toBe(0);
    }
  }, 60_000);

  test.concurrent("the status line shows the prefill as it runs: ids fed of the ids to feed, chunk by chunk, then the reply's phases", async () => {
    // Prompts fed 4 ids at a time, and a message of some 450 ids (the demo tokenizer makes three
    // of each "wordN and"): about 130 progress comments.
    const s = await serveDemo(["--prefill-chunk", "4"]);
    const page = await browser.newPage();
    try {
      await page.goto(`${s.url}/`);
      await until(page, `document.getElementById("model-name").textContent === "kimi-k3"`);
      // Every text the status line is given, as it is given (a later one in the same task does not hide it).
      await page.evaluate(`(() => {
        const texts = [];
        window.__k3status = texts;
        const line = document.querySelector(".status-line");
        new MutationObserver((records) => {
          for (const r of records) {
            if (r.type === "characterData") texts.push(r.target.data);
            for (const node of r.addedNodes) texts.push(node.textContent);
          }
        }).observe(line, { subtree: true, childList: true, characterData: true });
      })()`);
      await page.getByLabel("Max tokens").fill("4");
      await page.getByLabel("Message").fill(Array.from({ length: 150 }, (_, i) => `word${i % 10} and`).join(" "));
      await page.keyboard.press("Enter");
      await turnDone(page, 1);
      const texts = (await page.evaluate("window.__k3status")) as string[];
      const prefill = texts.flatMap((t) => {
        const m = /^Prefill: (\d+) \/ (\d+) ids \((\d+)%\), .+ · Esc stops$/.exec(t);
        return m ? [{ fed: Number(m[1]), total: Number(m[2]), percent: Number(m[3]) }] : [];
      });
      const final = (await page.locator("#status").textContent())!;
      const prefilled = Number(/^prefill (\d+) ids in /.exec(final)?.[1]);
      expect(prefilled).toBeGreaterThan(400);
      // Shown while it ran: many steps, in order, against the total k3's statistics give at the end.
      const fed = [...new Set(prefill.map((p) => p.fed))];
      expect(fed.length).toBeGreaterThan(5);
      expect(fed).toEqual([...fed].sort((a, b) => a - b));
      expect(prefill.every((p) => p.total === prefilled && p.percent === Math.floor((100 * p.fed) / p.total))).toBe(true);
      expect(fed.at(-1)!).toBeGreaterThan(prefilled / 2);
      // The phases in order: waiting, the prefill, the reply (4 ids, all of them reasoning), the statistics.
      const phases = texts.filter((t) => ["Waiting", "Prefill", "Thinking", "Answering"].includes(t));
      expect(phases.slice(0, 3)).toEqual(["Waiting", "Prefill", "Thinking"]);
      // The line reads once: the phase word is for screen readers while the ticker, which starts with it, is shown.
      expect(await page.evaluate(`document.getElementById("status").className`)).toBe("");
      expect(texts.indexOf(final)).toBeGreaterThan(texts.findLastIndex((t) => t.startsWith("Prefill: ")));
    } finally {
      await page.close();
      expect(await s.stop()).toBe(0);
    }
  }, 60_000);

  test.concurrent("a conversation that outgrows the context: the page says so, drops the oldest turn, and the message then goes through", async () => {
    // A 256-position context: "Hello" fits, and so does 140 times "cat " alone, but not after it.
    const s = await serveDemo(["--ctx", "256"]);
    const page = await browser.newPage();
    try {
      await page.goto(`${s.url}/`);
      await until(page, `document.getElementById("model-name").textContent === "kimi-k3"`);
      await page.getByLabel("Max tokens").fill("4");
      await page.getByLabel("Message").fill("Hello");
      await page.keyboard.press("Enter");
      await turnDone(page, 1);
      expect(await page.locator("#overflow").isVisible()).toBe(false);
      const big = "cat ".repeat(140).trim();
      await page.getByLabel("Message").fill(big);
      await page.keyboard.press("Enter");
      await until(page, `!document.getElementById("overflow").hidden`, 30_000);
      expect(await page.locator("#status").textContent()).toContain("context holds 256");
      expect(await page.getByLabel("Message").inputValue()).toBe(big); // the message is back in the box
      expect((await currentMessages(page)).messages.map((m) => m.role)).toEqual(["user", "assistant"]);
      await page.getByRole("button", { name: "Drop the oldest turn" }).click();
      expect((await currentMessages(page)).messages.length).toBe(0);
      expect(await page.locator("#overflow").isVisible()).toBe(false);
      await page.keyboard.press("Enter");
      await turnDone(page, 1);
      expect((await currentMessages(page)).messages.map((m) => [m.role, m.role === "user" ? m.content : ""])).toEqual([["user", big], ["assistant", ""]]);
      expect(await page.locator("#overflow").isVisible()).toBe(false);
      // A message that does not fit even alone: nothing to drop, and a new conversation is offered.
      await page.getByRole("button", { name: "New chat" }).click();
      await page.getByLabel("Message").fill("cat ".repeat(400).trim());
      await page.keyboard.press("Enter");
      await until(page, `!document.getElementById("overflow").hidden`, 30_000);
      expect(await page.getByRole("button", { name: "Drop the oldest turn" }).isDisabled()).toBe(true);
      expect(await page.getByRole("button", { name: "Start a new conversation" }).isEnabled()).toBe(true);
    } finally {
      await page.close();
      expect(await s.stop()).toBe(0);
    }
  }, 60_000);

  test("a reload restores every conversation; export writes the messages the API takes", async () => {
    // A second conversation beside the story.
    await page.getByRole("button", { name: "New chat" }).click();
    expect(await page.locator("article").count()).toBe(0);
    await page.getByLabel("Thinking").check();
    await page.getByLabel("Max tokens").fill("1000");
    await page.getByLabel("Message").fill("What do plants need to grow?");
    await page.keyboard.press("Enter");
    await turnDone(page, 1);
    const before = await stored(page);
    expect(before.conversations).toHaveLength(2);
    const plants = await page.locator("article").allTextContents();
    await page.reload();
    await until(page, `document.getElementById("model-name").textContent === "kimi-k3"`);
    expect(await page.locator("article").allTextContents()).toEqual(plants);
    expect(await page.locator("#history option").allTextContents()).toEqual(["What do plants need to grow?", "Tell me a story"]);
    await page.selectOption("#history", { label: "Tell me a story" });
    const story = before.conversations.find((c) => c.messages[0]?.content?.startsWith("Tell me a story"))!;
    expect(await page.locator("article").count()).toBe(story.messages.length);
    expect(await page.locator("article.assistant .reasoning-text").first().textContent()).toBe(story.messages[1]!.reasoning_content!);
    expect(await page.getByLabel("Max tokens").inputValue()).toBe("1000"); // settings persist too

    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export" }).click()]);
    const exported = JSON.parse(readFileSync((await download.path())!, "utf8"));
    expect(exported).toEqual(story.messages); // what the API took in turn three, plus its answer
  }, 60_000);

  test("imported hostile text renders inert; a bad file is refused with the field named", async () => {
    const hostile = [
      { role: "user", content: "<script>window.__k3pwned = 'user'</script><img src=x onerror=\"window.__k3pwned = 'user img'\">" },
      {
        role: "assistant",
        reasoning_content: "<img src=x onerror=\"window.__k3pwned = 'reasoning'\"><script>window.__k3pwned = 'reasoning script'</script>",
        content: [
          "Before <script>window.__k3pwned = 'script'</script> after.",
          "",
          "<img src=x onerror=\"window.__k3pwned = 'img'\">",
          "",
          "[a link](javascript:window.__k3pwned='link') and ![an image](https://example.invalid/x.png)",
          "",
          "**bold** and `<b>inline</b>`",
          "",
          "```html",
          "<script>alert(1)</script>",
          "```",
        ].join("\n"),
      },
    ];
    await page.setInputFiles("#import", { name: "hostile.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify(hostile)) });
    await until(page, `document.querySelectorAll("article").length === 2`);
    await page.locator("article.assistant summary").click(); // the reasoning, unfolded, is inert too
    await Bun.sleep(300); // an onerror handler would have run by now
    expect(await page.evaluate("typeof window.__k3pwned")).toBe("undefined");
    const conversation = page.locator("#conversation");
    expect(await conversation.locator("script, img, iframe, [onerror]").count()).toBe(0);
    const answer = page.locator("article.assistant .answer");
    const text = (await answer.textContent())!;
    expect(text).toContain("<script>window.__k3pwned = 'script'</script>"); // shown as text
    expect(text).toContain("<img src=x onerror=");
    expect(await answer.locator("strong").textContent()).toBe("bold");
    expect(await answer.locator("pre code").textContent()).toBe("<script>alert(1)</script>\n");
    expect(await answer.locator(":not(pre) > code").textContent()).toBe("<b>inline</b>");
    const hrefs = (await page.evaluate(`[...document.querySelectorAll("article.assistant .answer a")].map((a) => a.getAttribute("href"))`)) as (string | null)[];
    expect(hrefs).toHaveLength(2);
    expect(hrefs).not.toContain("javascript:window.__k3pwned='link'");
    expect(hrefs.every((h) => h === null || h.startsWith("https:"))).toBe(true);
    expect(await page.locator("article.user .text").textContent()).toBe(hostile[0]!.content as string);
    expect(await page.locator("article.assistant .reasoning-text").textContent()).toBe(hostile[1]!.reasoning_content as string);

    await page.setInputFiles("#import", { name: "bad.json", mimeType: "application/json", buffer: Buffer.from(JSON.stringify([{ role: "user", content: "x" }, { role: "robot", content: "y" }])) });
    await until(page, `document.getElementById("status").textContent.startsWith("Import of bad.json failed")`);
    expect(await page.locator("#status").textContent()).toBe("Import of bad.json failed: messages[1].role: expected one of system, user, assistant, tool");
    expect(await page.locator("article").count()).toBe(2); // the conversation shown is unchanged
  }, 60_000);

  test("screenshots at desktop and phone width; nothing was fetched from anywhere but the server", async () => {
    // A conversation with the demo model, as a first-time user would have it: two turns, thinking on.
    await page.getByRole("button", { name: "New chat" }).click();
    await page.getByLabel("Temperature").fill("0");
    await page.getByLabel("Thinking").check();
    await page.getByLabel("Max tokens").fill("300");
    await page.getByLabel("Message").fill("Tell me a story about a cat.");
    await page.keyboard.press("Enter");
    await turnDone(page, 1);
    await page.getByLabel("Message").fill("What do plants need to grow?");
    await page.keyboard.press("Enter");
    await turnDone(page, 2);
    // QUALITY: once assets/demo is trained, both answers are readable text (see test/cli/demo.test.ts).
    await page.setViewportSize({ width: 1280, height: 960 });
    await page.locator("article.assistant summary").first().click();
    await page.evaluate(`document.getElementById("conversation").scrollTop = 0`);
    const desktop = join(shots, "chat-page.png");
    await page.screenshot({ path: desktop });

    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await until(page, `document.getElementById("model-name").textContent === "kimi-k3"`);
    expect(await page.evaluate(`document.getElementById("settings").open`)).toBe(false); // folded away on a phone
    expect(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")).toBe(true);
    const send = (await page.getByRole("button", { name: "Send" }).boundingBox())!;
    expect(send.x + send.width).toBeLessThanOrEqual(390);
    expect(send.y + send.height).toBeLessThanOrEqual(844);
    const phone = join(shots, "chat-page-phone.png");
    await page.screenshot({ path: phone });
    process.stderr.write(`chat page screenshots: ${desktop} ${phone}\n`);
    const copyTo = envValue("K3_SCREENSHOT_DIR");
    if (copyTo) for (const shot of [desktop, phone]) copyFileSync(shot, join(copyTo, shot.slice(shots.length + 1)));

    const outside = requested.filter((url) => !url.startsWith(`${server.url}/`) && !url.startsWith("blob:") && !url.startsWith("data:"));
    expect(outside).toEqual([]);
    expect(consoleErrors).toEqual([]);
  }, 60_000);
});

