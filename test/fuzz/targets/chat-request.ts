/**
 * A chat-completions request (src/chat/request.ts, then the renderer), as `k3 render --request`
 * reads it and `k3 serve` reads a body. Its refusals name the field (`messages[2].role: ...`),
 * not a file, so binary mode asks only for one clean line.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseChatRequest, renderChat } from "../../../src/chat/index.ts";
import { loadTokenizer, type Tokenizer } from "../../../src/tokenizer/index.ts";
import { D_REQUEST, VECTORS } from "../../support/chat-vectors.ts";
import { chatTokenizer, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

let tokenizer: Tokenizer | undefined;

const requests: unknown[] = [
  ...VECTORS.map((v) => v.request),
  D_REQUEST,
  {
    model: "kimi-k3", temperature: 0.7, top_p: 0.9, max_tokens: 64, n: 3, seed: 9, stream: true, stream_options: { include_usage: true },
    tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: { type: "number", minimum: 1.0 } } } } }],
    messages: [{ role: "user", content: [{ type: "text", text: "Hello \u4e16\u754c \u{1F600}" }] }],
    tool_choice: "none", response_format: { type: "json_object" },
  },
];

export const chatRequestTarget: FuzzTarget = {
  name: "chat-request",
  about: "a chat-completions request body: parseChatRequest and renderChat (fields, tools, messages, numbers)",
  seeds: () => requests.map((request, i): Seed => ({ label: `request ${i}`, bytes: utf8(JSON.stringify(request)) })),
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse(input) {
    tokenizer ??= loadTokenizer(chatTokenizer);
    const rendered = renderChat(parseChatRequest(input, { source: "request" }), tokenizer);
    return JSON.stringify({ ids: rendered.ids, text: rendered.text });
  },
  command(input, _seed, dir) {
    const path = join(dir, "request.json");
    writeFileSync(path, input);
    return { args: ["render", "--tok", chatTokenizer, "--request", path], names: [] };
  },
};
