/**
 * `k3 render` through dist/k3: the chat.md 2.11 vectors id for id on the released table (skipped,
 * saying so, when it is absent), the output shape on the synthetic chat tokenizer, and every
 * refusal: exit 2, one line on stderr, nothing on stdout. The runs are independent processes, so
 * the tests run concurrently.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { REFUSALS } from "../support/chat-refusals.ts";
import { VECTORS } from "../support/chat-vectors.ts";
import { CHAT_TOK_DIR, KIMI_DIR, render, WITH_KIMI } from "../support/chat.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

// A test's time includes waiting for the others' processes: the 5 s default is too close.
setDefaultTimeout(60_000);

const bodyOf = (request: unknown): string => (typeof request === "string" ? request : JSON.stringify(request));

describe.concurrent("k3 render: the chat.md 2.11 vectors", () => {
  for (const vector of VECTORS) {
    test.skipIf(KIMI_DIR === undefined)(`${vector.name}${WITH_KIMI}`, async () => {
      const r = await k3Async(["render", "--tok", KIMI_DIR as string], { stdin: bodyOf(vector.request) });
      expect(r.stderr).toBe("");
      expect(r.code).toBe(0);
      const out = JSON.parse(r.stdout);
      expect(out.ids).toEqual([...vector.ids]);
      expect(out.prompt_tokens).toBe(vector.promptTokens);
      if (vector.text !== undefined) expect(out.text).toBe(vector.text);
    });
  }
});

describe.concurrent("k3 render: output", () => {
  const request = {
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }],
    messages: [{ role: "user", content: "Hello \u4e16\u754c \u{1F600}" }],
    tool_choice: "none",
  };

  test("one JSON line {ids, text, prompt_tokens}, the same as the library renders; --request FILE equals stdin", async () => {
    const file = join(tempDir("render"), "request.json");
    writeFileSync(file, JSON.stringify(request));
    const fromFile = await k3Async(["render", "--tok", CHAT_TOK_DIR, "--request", file]);
    const fromStdin = await k3Async(["render", "--tok", CHAT_TOK_DIR], { stdin: JSON.stringify(request) });
    expect([fromFile.code, fromFile.stderr]).toEqual([0, ""]);
    expect(fromFile.stdout).toBe(fromStdin.stdout);
    expect(fromFile.stdout.endsWith("}\n") && fromFile.stdout.split("\n").length).toBe(2);
    const out = JSON.parse(fromFile.stdout);
    expect(Object.keys(out)).toEqual(["ids", "text", "prompt_tokens"]);
    const expected = render(request);
    expect(out).toEqual({ ids: expected.ids, text: expected.text, prompt_tokens: expected.promptTokens });
  });

  test("--developer-as-system renders the message and says so on stderr", async () => {
    const r = await k3Async(["render", "--tok", CHAT_TOK_DIR, "--developer-as-system"], { stdin: JSON.stringify({ messages: [{ role: "developer", content: "x" }] }) });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('messages[0].role: "developer" rendered as "system"');
    expect(JSON.parse(r.stdout).text).toStartWith('<|open|>message role="system" type="thinking-effort"');
  });

  test("usage: --help, a missing --tok (exit 2), an unreadable request file (exit 1)", async () => {
    const help = await k3Async(["render", "--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("USAGE k3 render [OPTIONS]");
    expect(help.stdout).toContain("--request=<FILE>");
    expect((await k3Async(["--help"])).stdout).toContain("render");
    const noTok = await k3Async(["render"], { stdin: "{}" });
    expect([noTok.code, noTok.stdout]).toEqual([2, ""]);
    expect(noTok.stderr).toBe("k3: render needs --tok DIR: a directory holding tiktoken.model and tokenizer_config.json (normally the model directory)\n");
    const missing = await k3Async(["render", "--tok", CHAT_TOK_DIR, "--request", "/nonexistent/r.json"]);
    expect([missing.code, missing.stdout, missing.stderr]).toEqual([1, "", "k3: /nonexistent/r.json: cannot read the request (ENOENT)\n"]);
  });

  test("a syntax error names the request file and line:column", async () => {
    const file = join(tempDir("render-bad"), "bad.json");
    writeFileSync(file, '{\n  "messages": [\n    {"role": "user" "content": "x"}\n  ]\n}\n');
    const r = await k3Async(["render", "--tok", CHAT_TOK_DIR, "--request", file]);
    expect([r.code, r.stdout]).toEqual([2, ""]);
    expect(r.stderr).toBe(`k3: ${file}:3:21: expected ',' or '}' in an object, found "\\""\n`);
  });
});

describe.concurrent("k3 render: every refusal exits 2 with one line on stderr and nothing on stdout", () => {
  for (const { name, request, message } of REFUSALS) {
    test(name, async () => {
      const r = await k3Async(["render", "--tok", CHAT_TOK_DIR], { stdin: bodyOf(request) });
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      const prefix = message.startsWith("request:") ? `k3: request (stdin)${message.slice("request".length)}` : `k3: ${message}`;
      expect(r.stderr).toStartWith(prefix);
      expect(r.stderr.indexOf("\n")).toBe(r.stderr.length - 1);
    });
  }

  test("bytes that are not UTF-8", async () => {
    const r = await k3Async(["render", "--tok", CHAT_TOK_DIR], { stdin: Uint8Array.from([0x7b, 0xff, 0x7d]) });
    expect([r.code, r.stdout, r.stderr]).toEqual([2, "", "k3: request (stdin):1: not valid UTF-8 (byte 0xff at offset 1)\n"]);
  });
});
