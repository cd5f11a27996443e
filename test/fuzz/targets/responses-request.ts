/**
 * A `POST /v1/responses` body (src/serve/responses-request.ts): the input items turned
 * into the one chat request. It reaches k3 only over HTTP, so it is fuzzed in process only.
 */
import { parseResponsesRequest } from "../../../src/serve/responses-request.ts";
import { utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

const tool = { type: "function", name: "shell", description: "run a command", parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] }, strict: true };
const bodies: unknown[] = [
  { model: "kimi-k3", input: "Hi", max_output_tokens: 16 },
  {
    instructions: "Be brief.", stream: true, store: false, include: ["reasoning.encrypted_content"], prompt_cache_key: "k", parallel_tool_calls: true,
    reasoning: { effort: "medium", summary: "auto" }, tools: [tool], tool_choice: "auto",
    input: [
      { type: "message", role: "developer", content: [{ type: "input_text", text: "Use tools." }] },
      { role: "user", content: "List files." },
      { type: "reasoning", summary: [{ type: "summary_text", text: "I should run ls." }] },
      { type: "function_call", call_id: "call_1", name: "shell", arguments: "{\"cmd\":\"ls\"}" },
      { type: "function_call_output", call_id: "call_1", output: "a\nb" },
    ],
  },
  { input: "x", text: { format: { type: "json_schema", name: "n", schema: { type: "object", properties: { n: { type: "integer" } } }, strict: true } }, temperature: 0.2, top_p: 0.5, tool_choice: { type: "function", name: "shell" }, tools: [tool] },
];

export const responsesRequestTarget: FuzzTarget = {
  name: "responses-request",
  about: "a /v1/responses body: parseResponsesRequest (input items, tools, reasoning, text.format) into parseChatRequest",
  seeds: () => bodies.map((body, i): Seed => ({ label: `body ${i}`, bytes: utf8(JSON.stringify(body)) })),
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse: (input) => JSON.stringify(parseResponsesRequest(input), (_k, v: unknown) => (v instanceof Map ? Object.fromEntries(v) : v)),
};
