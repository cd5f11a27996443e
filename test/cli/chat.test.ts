/** `k3 chat` through dist/k3: one turn for scripts, and a conversation in a real terminal. */
import { afterAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { lstatSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { executablePath } from "../../tools/build.ts";
import { chatModelDir } from "../support/chat-fixture.ts";
import { k3Async } from "../support/k3-async.ts";
import { PtySession } from "../support/pty.ts";
import { fixturesDir, modelDir } from "../support/fixtures.ts";
import { tempDir } from "../support/tmp.ts";

// Some tests take seconds, more on a busy machine (a run starts the gates' child processes early):
// bun's 5 s default is too close to be a limit on anything but the machine.
setDefaultTimeout(60_000);

const dir = chatModelDir();
const chat = (extra: string[]) => ["chat", dir, "--tok", dir, ...extra];

// Independent processes: the one-turn tests run concurrently; the terminal sessions after them one at a time.
describe.concurrent("k3 chat, one turn", () => {
  test("--json prints the OpenAI-style assistant message with usage; the same seed gives the same reply", async () => {
    const run = () => k3Async(chat(["--message", "Hello", "--max-tokens", "10", "--seed", "3", "--json"]));
    const r = await run();
    expect(r.code).toBe(0);
    const message = JSON.parse(r.stdout);
    expect(message.role).toBe("assistant");
    expect(typeof message.reasoning_content).toBe("string");
    expect(["stop", "length", "tool_calls"]).toContain(message.finish_reason);
    expect(message.usage.completion_tokens).toBeGreaterThan(0);
    expect(message.usage.completion_tokens).toBeLessThanOrEqual(10);
    expect(message.usage.total_tokens).toBe(message.usage.prompt_tokens + message.usage.completion_tokens);
    // k3's statistics, as k3 serve reports them: what was fed and reused, and the wall times (which alone may differ run to run).
    expect(message.k3).toMatchObject({ reused_prompt_ids: 0, prefilled_ids: expect.any(Number), reused_from: "none" });
    expect(message.k3.speculation).toBeUndefined();
    const timeless = (stdout: string) => {
      const m = JSON.parse(stdout);
      return { ...m, k3: { ...m.k3, prefill_seconds: 0, decode_seconds: 0 } };
    };
    expect(timeless((await run()).stdout)).toEqual(timeless(r.stdout));
    expect(timeless((await k3Async(chat(["--message", "Hello", "--max-tokens", "10", "--seed", "4", "--json"]))).stdout)).not.toEqual(timeless(r.stdout));
  }, 30_000); // three runs of the binary: bun's 5 s default was seen to expire on a loaded machine

  test("stdin that is not a terminal is one message; the turn's figures go to stderr", async () => {
    const r = await k3Async(chat(["--max-tokens", "6", "--no-think"]), { stdin: "Hi there" });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/turn: prompt \d+ ids \(\d+ fed, 0 reused from the start\)/);
  });

  test("a routed expert that cannot be loaded makes the reply invalid: exit 4", async () => {
    const faults = Array.from({ length: 8 }, (_, e) => `1:${e}`).join(",");
    const r = await k3Async(chat(["--message", "Hello", "--max-tokens", "3", "--json"]), { env: { K3_INJECT_EXPERT_FAULT: faults } });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("EXPERT DROP: layer 1 expert");
    expect(r.stderr).toContain("RUN INVALID: ");
    expect(r.stderr).toContain("the replies are CORRUPT");
  });

  test("mistakes are usage errors naming the flag or the file", async () => {
    const cases: [string[], RegExp][] = [
      [["chat", dir, "--message", "x"], /^k3: chat needs --tok DIR/],
      [chat(["--effort", "medium", "--message", "x"]), /^k3: --effort must be one of low, high, max, got 'medium'\n$/],
      [chat(["--temperature", "9", "--message", "x"]), /^k3: --temperature must be a number from 0 to 2/],
      [chat(["--message", "  "]), /^k3: chat: the message is empty/],
    ];
    for (const [argv, pattern] of cases) {
      const r = await k3Async(argv);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(pattern);
      expect(r.stdout).toBe("");
    }
    // A tokenizer without the K3 control names cannot render chat (the byte-level test tokenizer).
    const bytesOnly = await k3Async(["chat", modelDir("tiny13"), "--tok", join(fixturesDir, "byte-tokenizer"), "--message", "x"]);
    expect(bytesOnly.code).toBe(2);
    expect(bytesOnly.stderr).toMatch(/has no <\|open\|> in tokenizer_config\.json's added_tokens_decoder/);
  });
});

describe("k3 chat in a terminal", () => {
  const sessions: PtySession[] = [];
  afterAll(() => {
    for (const s of sessions) s.kill();
  });

  test("two turns (the second reuses the state), /stats, /save, /reset, Ctrl-C mid-reply, /exit", async () => {
    const transcript = join(tempDir("chat-pty"), "talk.json");
    const pty = new PtySession([executablePath, ...chat(["--max-tokens", "400", "--temperature", "0"])]);
    sessions.push(pty);
    await pty.waitFor(/Kimi K3 chat\./);
    await pty.waitFor(/> $/);
    let mark = pty.screen.length;
    pty.send("Hello\r");
    await pty.waitFor(/\n> $/, mark);
    mark = pty.screen.length;
    pty.send("/stats\r");
    await pty.waitFor(/turn: prompt (\d+) ids \(\1 fed, 0 reused from the start\)[^\n]*finish (stop|length)/, mark);
    mark = pty.screen.length;
    pty.send("Tell me more\r");
    await pty.waitFor(/\n> $/, mark);
    mark = pty.screen.length;
    pty.send("/stats\r");
    const [, promptIds, fed, reused] = await pty.waitFor(/turn: prompt (\d+) ids \((\d+) fed, (\d+) reused from the (?:live|snapshot) state\)/, mark);
    expect(Number(fed) + Number(reused)).toBe(Number(promptIds));
    expect(Number(reused)).toBeGreaterThan(0);
    mark = pty.screen.length;
    pty.send(`/save ${transcript}\r`);
    await pty.waitFor(/\(saved 4 messages to [^\n]*, the state in [^\n]*talk\.json\.k3st: /, mark);
    mark = pty.screen.length;
    pty.send("/reset\r");
    await pty.waitFor(/\(conversation forgotten\)/, mark);
    // Ctrl-C once the reply is streaming: the reply stops, the chat stays. This prompt makes the
    // fixture model (greedy, fixed weights) write about 1,500 tokens, so the reply is still going.
    mark = pty.screen.length;
    pty.send("/set max-tokens 3000\r");
    await pty.waitFor(/\(max-tokens 3000\)/, mark);
    mark = pty.screen.length;
    pty.send("Write a long story\r");
    await pty.waitFor(/Write a long story\n.{20,}/s, mark);
    pty.send("\u0003");
    await pty.waitFor(/\[stopped\]\n> $/, mark);
    mark = pty.screen.length;
    pty.send("/stats\r");
    await pty.waitFor(/turn: prompt (\d+) ids \(\1 fed, 0 reused from the start\)[^\n]*\(cancelled\)/, mark);
    mark = pty.screen.length;
    pty.send(`/load ${transcript}\r`);
    await pty.waitFor(/\(loaded 4 messages from [^\n]* and \d+ positions of state; the next turn feeds only what is new\)/, mark);
    // The state file, not the story the live state held: the saved conversation continues from it.
    mark = pty.screen.length;
    pty.send("/set max-tokens 8\r");
    await pty.waitFor(/\(max-tokens 8\)/, mark);
    mark = pty.screen.length;
    pty.send("And then?\r");
    await pty.waitFor(/\n> $/, mark);
    mark = pty.screen.length;
    pty.send("/stats\r");
    const [, loadedPrompt, loadedFed, loadedReused] = await pty.waitFor(/turn: prompt (\d+) ids \((\d+) fed, (\d+) reused from the live state\)/, mark);
    expect(Number(loadedFed) + Number(loadedReused)).toBe(Number(loadedPrompt));
    // Without the file nothing would be reused: the live state held the story, which shares no message.
    expect(Number(loadedReused)).toBeGreaterThan(0);
    pty.send("/exit\r");
    expect(await pty.exited()).toBe(0);
    const saved = JSON.parse(await Bun.file(transcript).text()) as { role: string }[];
    expect(saved.map((m) => m.role)).toEqual(["user", "assistant", "user", "assistant"]);
  }, 60_000);

  test("a transcript that is not one is refused by /load, and the chat goes on; /save keeps a symlink a link", async () => {
    const dir = tempDir("chat-pty");
    const bad = join(dir, "bad.json");
    writeFileSync(bad, "{\"messages\": 1}");
    const link = join(dir, "saved.json");
    symlinkSync("kept/real.json", link);
    mkdirSync(join(dir, "kept"));
    const pty = new PtySession([executablePath, ...chat(["--max-tokens", "4"])]);
    sessions.push(pty);
    await pty.waitFor(/> $/);
    pty.send(`/load ${bad}\r`);
    await pty.waitFor(/expected a JSON array of messages, each with a "role"/);
    const mark = pty.screen.length;
    pty.send(`/save ${link}\r`);
    await pty.waitFor(/\(saved 0 messages to /, mark);
    pty.send("\u0004"); // Ctrl-D at the prompt leaves
    expect(await pty.exited()).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(JSON.parse(readFileSync(join(dir, "kept", "real.json"), "utf8"))).toEqual([]);
  }, 30_000);

  test("Ctrl-C during the prefill stops it at the next chunk; the next turn goes on from the ids it fed", async () => {
    // Some 450 prompt ids fed one at a time: a prefill long enough to be interrupted.
    const pty = new PtySession([executablePath, ...chat(["--max-tokens", "4", "--temperature", "0", "--prefill-chunk", "1"])]);
    sessions.push(pty);
    await pty.waitFor(/> $/);
    let mark = pty.screen.length;
    pty.send(`${Array.from({ length: 40 }, (_, i) => `word${i % 10} and`).join(" ")}\r`);
    await pty.waitFor(/word9 and\r?\n/, mark);
    await Bun.sleep(150);
    pty.send("\u0003");
    await pty.waitFor(/\[stopped\]\n> $/, mark);
    mark = pty.screen.length;
    pty.send("/stats\r");
    const [, prompt, fed] = await pty.waitFor(/turn: prompt (\d+) ids \((\d+) fed, 0 reused from the start\)[^\n]*\(cancelled\)/, mark);
    expect(Number(fed)).toBeGreaterThan(0);
    expect(Number(fed)).toBeLessThan(Number(prompt));
    mark = pty.screen.length;
    pty.send("Go on\r");
    await pty.waitFor(/\n> $/, mark);
    mark = pty.screen.length;
    pty.send("/stats\r");
    const [, , reused] = await pty.waitFor(/turn: prompt (\d+) ids \(\d+ fed, (\d+) reused from the live state\)/, mark);
    expect(Number(reused)).toBe(Number(fed));
    pty.send("/exit\r");
    expect(await pty.exited()).toBe(0);
  }, 30_000);
});
