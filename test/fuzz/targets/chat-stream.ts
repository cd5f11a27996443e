/**
 * What the chat page reads from `k3 serve` (src/page/api.ts ChatStreamReader over sse.ts, and
 * the progress comments of progress.ts): a streamed reply's SSE text. It reaches k3 only in the
 * browser, so it is fuzzed in process only. Besides the contract (a result, or the page's own
 * refusal, BadStream, mapped to a K3Error here), the text must read the same whatever pieces it
 * arrives in: read whole and in pieces of 1, 5 and 64 characters, any difference is a finding.
 */
import { ApiError, BadStream, ChatStreamReader } from "../../../src/page/api.ts";
import { progressComment } from "../../../src/page/progress.ts";
import { usageError } from "../../../src/errors.ts";
import { utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateText } from "../mutate.ts";

const chunk = (delta: object, finish: string | null = null) =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 1, model: "kimi-k3", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
const usage = `data: ${JSON.stringify({
  id: "chatcmpl-1", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 9, completion_tokens: 4, total_tokens: 13 },
  k3: { reused_prompt_ids: 4, prefilled_ids: 8, reused_from: "snapshot", prefill_seconds: 0.5, decode_seconds: 0.25 },
})}\n\n`;
const prefill = (fed: number) => progressComment({ kind: "prefill", fed, total: 8, seconds: fed / 16, reused: 4, reusedFrom: "snapshot" });

/** Streams as k3 serve writes them: progress, the role, reasoning, content, a tool call in two fragments, the finish, usage, [DONE]. */
const streams = [
  [
    progressComment({ kind: "queue", ahead: 0 }), prefill(0), prefill(4), prefill(8), chunk({ role: "assistant" }), chunk({ reasoning_content: "Let me think." }),
    chunk({ content: "The answer: " }), chunk({ content: "**42**\n\n```\ncode\n```" }), chunk({}, "stop"), usage, "data: [DONE]\n\n",
  ].join(""),
  [
    progressComment({ kind: "queue", ahead: 2 }), prefill(0), prefill(8), chunk({ role: "assistant" }),
    chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":' } }] }),
    chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }), chunk({}, "tool_calls"), usage, "data: [DONE]\n\n",
  ].join("").replaceAll("\n", "\r\n"),
  [prefill(0), chunk({ role: "assistant" }), 'data: {"error":{"message":"the model failed","type":"server_error","code":"internal"}}\n\n', "data: [DONE]\n\n"].join(""),
];

/** Everything the reader told the page, and how the stream ended, read in pieces of `size` characters. */
function reading(text: string, size: number): { log: unknown[]; refused?: string } {
  const log: unknown[] = [];
  const reader = new ChatStreamReader({
    onReasoning: (t) => log.push(["reasoning", t]), onContent: (t) => log.push(["content", t]),
    onToolCalls: (calls) => log.push(["calls", JSON.stringify(calls)]), onFinish: (r) => log.push(["finish", r]),
    onUsage: (u, k3) => log.push(["usage", u, k3 ?? null]), onProgress: (p) => log.push(["progress", p]),
  });
  try {
    for (let at = 0; at < text.length && !reader.done; at += size) reader.push(text.slice(at, at + size));
    log.push(["end", reader.done ? "[DONE]" : "body ended"]);
  } catch (error) {
    if (error instanceof BadStream) return { log, refused: error.message };
    // An error event is a stream that says so: the page shows the server's message.
    if (error instanceof ApiError) log.push(["error", error.message, error.code ?? null]);
    else throw error;
  }
  return { log };
}

export const chatStreamTarget: FuzzTarget = {
  name: "chat-stream",
  about: "the chat page's stream reader: SSE lines and events, k3's progress comments, chunk JSON (src/page/api.ts, sse.ts, progress.ts)",
  seeds: () => streams.map((text, i): Seed => ({ label: `stream ${i}`, bytes: utf8(text) })),
  mutate: (input, rng, seeds) => mutateText(input, rng, seeds.map((s) => s.bytes)),
  parse(input) {
    // The page decodes the body as the browser does: invalid UTF-8 becomes U+FFFD.
    const text = new TextDecoder("utf-8", { fatal: false }).decode(input);
    const whole = reading(text, Math.max(1, text.length));
    const meaning = JSON.stringify(whole);
    for (const size of [1, 5, 64]) {
      const pieces = JSON.stringify(reading(text, size));
      if (pieces !== meaning) throw new Error(`read in pieces of ${size} characters the stream means something else: ${pieces.slice(0, 200)} against ${meaning.slice(0, 200)}`);
    }
    if (whole.refused !== undefined) throw usageError(`stream: ${whole.refused}`);
    return meaning;
  },
};
