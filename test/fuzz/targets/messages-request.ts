/**
 * A `POST /v1/messages` body (src/serve/anthropic-request.ts): Anthropic's blocks turned
 * into the one chat request. It reaches k3 only over HTTP, so it is fuzzed in process only.
 */
import { parseMessagesRequest } from "../../../src/serve/anthropic-request.ts";
import { utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

const tool = { name: "get_time", description: "the time", input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } };
const bodies: unknown[] = [
  { model: "kimi-k3", max_tokens: 64, messages: [{ role: "user", content: "Hi" }] },
  {
    max_tokens: 32000, system: [{ type: "text", text: "Be brief.", cache_control: { type: "ephemeral" } }], stream: true, metadata: { user_id: "u" },
    thinking: { type: "adaptive" }, output_config: { effort: "high" }, tools: [tool], tool_choice: { type: "auto" },
    messages: [
      { role: "user", content: [{ type: "text", text: "What time is it?" }, { type: "text", text: "In Rome." }] },
      { role: "assistant", content: [{ type: "thinking", thinking: "I should call it.", signature: "" }, { type: "tool_use", id: "toolu_1", name: "get_time", input: { city: "Rome" } }] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "10:00" }] }] },
      { role: "system", content: "A note." },
    ],
  },
  { max_tokens: 8, thinking: { type: "enabled", budget_tokens: 5000 }, stop_sequences: ["END"], temperature: 0.5, top_k: 5, tool_choice: { type: "tool", name: "get_time" }, tools: [tool], messages: [{ role: "user", content: "x" }] },
];

export const messagesRequestTarget: FuzzTarget = {
  name: "messages-request",
  about: "a /v1/messages body: parseMessagesRequest (blocks, tools, tool_choice, thinking) into parseChatRequest",
  seeds: () => bodies.map((body, i): Seed => ({ label: `body ${i}`, bytes: utf8(JSON.stringify(body)) })),
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse: (input) => JSON.stringify(parseMessagesRequest(input).chat, (_k, v: unknown) => (v instanceof Map ? Object.fromEntries(v) : v)),
};
