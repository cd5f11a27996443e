/**
 * Requests k3 must refuse (chat.md 2.3, 2.5, 2.6, 2.10, 4.2), each with the start of its
 * one-line message: the field path, then the reason. Shared by the unit test (the K3Error) and
 * the CLI test (exit 2, that line on stderr, nothing on stdout).
 */

export interface Refusal {
  readonly name: string;
  /** Data (sent as JSON) or the body text itself. */
  readonly request: unknown;
  /** The message starts with this. */
  readonly message: string;
}

const user = { role: "user", content: "hi" };
const fn = (name: string, extra: Record<string, unknown> = {}) => ({ type: "function", function: { name, parameters: { type: "object" }, ...extra } });
const withUser = (fields: Record<string, unknown>) => ({ messages: [user], ...fields });
const assistantCall = (fnBody: unknown) => ({
  messages: [user, { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: fnBody }] }],
});

export const REFUSALS: readonly Refusal[] = [
  // The body.
  { name: "not JSON", request: '{"messages": [', message: "request:1:14: an array opened here is not closed" },
  { name: "trailing garbage", request: '{"messages": []} x', message: 'request:1:18: unexpected "x" after the JSON value' },
  { name: "a trailing comma", request: '{"messages": [{"role": "user", "content": "hi"},]}', message: "request:1:49: expected a JSON value" },
  { name: "not an object", request: "[1, 2]", message: "request: expected a JSON object, got an array" },
  { name: "a lone surrogate", request: '{"messages": [{"role": "user", "content": "\\ud800"}]}', message: "request:1:44: \\ud800 is a lone surrogate" },
  { name: "an integer beyond Python's digit limit", request: `{"messages": [${JSON.stringify(user)}], "seed": ${"9".repeat(4301)}}`, message: "request:1:" },
  { name: "messages missing", request: {}, message: "messages: missing" },
  { name: "messages empty", request: { messages: [] }, message: "messages: is empty" },
  { name: "messages not an array", request: { messages: "hi" }, message: "messages: expected an array, got a string" },
  { name: "a message not an object", request: { messages: [user, 3] }, message: "messages[1]: expected a message object, got a number" },
  // Roles.
  { name: "the developer role", request: { messages: [user, { role: "developer", content: "be terse" }] }, message: 'messages[1].role: "developer" is not one of "system", "user", "assistant", "tool"' },
  { name: "the legacy function role", request: { messages: [{ role: "function", content: "x" }] }, message: 'messages[0].role: "function" is not one of' },
  { name: "a role missing", request: { messages: [{ content: "x" }] }, message: "messages[0].role: missing" },
  { name: "a role not a string", request: { messages: [{ role: 1, content: "x" }] }, message: "messages[0].role: expected a string, got a number" },
  // Content.
  { name: "an image part", request: { messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }, message: 'messages[0].content[0].type: "image_url" parts are not supported (k3 is a text-only engine)' },
  { name: "an audio part", request: { messages: [{ role: "user", content: [{ type: "text", text: "a" }, { type: "input_audio" }] }] }, message: 'messages[0].content[1].type: "input_audio" parts are not supported' },
  { name: "an unknown part type", request: { messages: [{ role: "user", content: [{ type: "emoji" }] }] }, message: 'messages[0].content[0].type: "emoji" is not a known content part type' },
  { name: "a text part without text", request: { messages: [{ role: "user", content: [{ type: "text" }] }] }, message: "messages[0].content[0].text: missing" },
  { name: "content a number", request: { messages: [{ role: "user", content: 5 }] }, message: "messages[0].content: expected a string, a list of text parts or null, got a number" },
  // Prefill.
  { name: "partial prefill", request: { messages: [user, { role: "assistant", content: "The answer is", partial: true }] }, message: "messages[1].partial: assistant prefill is not supported" },
  { name: "continue_final_message", request: withUser({ continue_final_message: true }), message: "continue_final_message: assistant prefill is not supported" },
  { name: "add_generation_prompt false", request: withUser({ add_generation_prompt: false }), message: "add_generation_prompt: false is not supported" },
  // Thinking and effort.
  { name: "thinking.effort medium", request: withUser({ thinking: { type: "enabled", effort: "medium" } }), message: 'thinking.effort: "medium" is not supported (allowed: "low", "high", "max")' },
  { name: "reasoning_effort medium", request: withUser({ reasoning_effort: "medium" }), message: 'reasoning_effort: "medium" is not supported (allowed: "low", "high", "max", "none")' },
  { name: "reasoning_effort xhigh", request: withUser({ reasoning_effort: "xhigh" }), message: 'reasoning_effort: "xhigh" is not supported' },
  { name: "thinking_effort medium in chat_template_kwargs", request: withUser({ chat_template_kwargs: { thinking_effort: "medium" } }), message: 'chat_template_kwargs.thinking_effort: "medium" is not supported' },
  { name: "an effort with thinking off", request: withUser({ thinking: { type: "disabled", effort: "medium" } }), message: 'thinking.effort: "medium" is not supported' },
  { name: "thinking.type auto", request: withUser({ thinking: { type: "auto" } }), message: 'thinking.type: "auto" is not "enabled" or "disabled"' },
  { name: "thinking a boolean", request: withUser({ thinking: true }), message: "thinking: expected an object, got a boolean" },
  { name: "thinking.keep other than all", request: withUser({ thinking: { keep: "last" } }), message: 'thinking.keep: "last" is not supported' },
  { name: "enable_thinking not a boolean", request: withUser({ chat_template_kwargs: { enable_thinking: "yes" } }), message: "chat_template_kwargs.enable_thinking: expected true or false, got a string" },
  { name: "thinking on and off at once", request: withUser({ thinking: { type: "enabled" }, reasoning_effort: "none" }), message: "reasoning_effort: turns thinking off, but thinking.type turns it on" },
  // Tools.
  { name: "tools not an array", request: withUser({ tools: { type: "function" } }), message: "tools: expected an array, got an object" },
  { name: "a tool not an object", request: withUser({ tools: ["get_weather"] }), message: "tools[0]: expected a tool object, got a string" },
  { name: "a tool without type", request: withUser({ tools: [{ function: { name: "f" } }] }), message: "tools[0].type: missing" },
  { name: "a tool of another type", request: withUser({ tools: [{ type: "retrieval", function: { name: "f" } }] }), message: 'tools[0].type: "retrieval" is not "function"' },
  { name: "a tool without function", request: withUser({ tools: [{ type: "function" }] }), message: "tools[0].function: missing" },
  { name: "a tool without a name", request: withUser({ tools: [{ type: "function", function: { description: "d" } }] }), message: "tools[0].function.name: missing" },
  { name: "an empty tool name", request: withUser({ tools: [fn("")] }), message: "tools[0].function.name: is empty" },
  { name: "a tool name starting with a digit", request: withUser({ tools: [fn("1tool")] }), message: 'tools[0].function.name: "1tool" starts with a digit' },
  { name: "a tool name with @", request: withUser({ tools: [fn("get@weather")] }), message: 'tools[0].function.name: "get@weather" contains "@"' },
  { name: "a tool name of 257 characters", request: withUser({ tools: [fn("a".repeat(257))] }), message: "tools[0].function.name: is 257 characters long (at most 256)" },
  { name: "duplicate tool names", request: withUser({ tools: [fn("f"), fn("g"), fn("f")] }), message: 'tools[2].function.name: "f" is declared twice (also at tools[0].function.name)' },
  { name: "a name declared again in a system message", request: { tools: [fn("f")], messages: [{ role: "system", tools: [fn("f")] }, user] }, message: 'messages[0].tools[0].function.name: "f" is declared twice (also at tools[0].function.name)' },
  { name: "parameters not an object", request: withUser({ tools: [{ type: "function", function: { name: "f", parameters: "x" } }] }), message: "tools[0].function.parameters: expected an object, got a string" },
  { name: "tools on a user message", request: { messages: [{ role: "user", content: "x", tools: [fn("f")] }] }, message: "messages[0].tools: tools can be declared only in system messages, not in a user message" },
  { name: "tools on an assistant message", request: { messages: [user, { role: "assistant", content: "x", tools: [] }] }, message: "messages[1].tools: tools can be declared only in system messages, not in an assistant message" },
  { name: "dynamic tools with content", request: { messages: [{ role: "system", content: "also text", tools: [fn("f")] }, user] }, message: "messages[0].content: must be empty in a system message that carries tools" },
  // tool_choice.
  { name: "tool_choice required without tools", request: withUser({ tool_choice: "required" }), message: 'tool_choice: "required" but the request declares no tools' },
  { name: "tool_choice required with tools []", request: withUser({ tools: [], tool_choice: "required" }), message: 'tool_choice: "required" but the request declares no tools' },
  { name: "tool_choice any", request: withUser({ tools: [fn("f")], tool_choice: "any" }), message: 'tool_choice: "any" is not one of "auto", "none", "required"' },
  { name: "tool_choice a number", request: withUser({ tool_choice: 1 }), message: "tool_choice: expected a string or an object, got a number" },
  { name: "tool_choice object without function", request: withUser({ tools: [fn("f")], tool_choice: { type: "function" } }), message: "tool_choice.function: missing" },
  { name: "tool_choice object of another type", request: withUser({ tool_choice: { type: "tool", name: "f" } }), message: "tool_choice.type: the object form is" },
  // response_format.
  { name: "response_format a string", request: withUser({ response_format: "json" }), message: "response_format: expected an object, got a string" },
  { name: "response_format without type", request: withUser({ response_format: {} }), message: "response_format.type: missing" },
  { name: "response_format of an unknown type", request: withUser({ response_format: { type: "xml" } }), message: 'response_format.type: "xml" is not one of "text", "json_object", "json_schema"' },
  { name: "json_schema missing", request: withUser({ response_format: { type: "json_schema" } }), message: "response_format.json_schema: missing" },
  { name: "json_schema without name", request: withUser({ response_format: { type: "json_schema", json_schema: { schema: {} } } }), message: "response_format.json_schema.name: missing" },
  { name: "json_schema without schema", request: withUser({ response_format: { type: "json_schema", json_schema: { name: "x" } } }), message: "response_format.json_schema.schema: missing" },
  { name: "json_schema schema not an object", request: withUser({ response_format: { type: "json_schema", json_schema: { name: "x", schema: [] } } }), message: "response_format.json_schema.schema: expected an object, got an array" },
  { name: "json_schema strict not a boolean", request: withUser({ response_format: { type: "json_schema", json_schema: { name: "x", schema: {}, strict: "yes" } } }), message: "response_format.json_schema.strict: expected true or false, got a string" },
  // Assistant tool calls and tool results.
  { name: "arguments that are JSON but not an object", request: assistantCall({ name: "f", arguments: "[1, 2]" }), message: "messages[1].tool_calls[0].function.arguments: is JSON but an array, not an object" },
  { name: "arguments missing", request: assistantCall({ name: "f" }), message: "messages[1].tool_calls[0].function.arguments: missing" },
  { name: "arguments a number", request: assistantCall({ name: "f", arguments: 3 }), message: "messages[1].tool_calls[0].function.arguments: expected a string or an object, got a number" },
  { name: "arguments nested beyond the depth limit", request: assistantCall({ name: "f", arguments: `{"a":${"[".repeat(300)}${"]".repeat(300)}}` }), message: "messages[1].tool_calls[0].function.arguments: 1:" },
  { name: "a call without function", request: { messages: [user, { role: "assistant", tool_calls: [{ id: "c1", type: "function" }] }] }, message: "messages[1].tool_calls[0].function: missing" },
  { name: "a call with an empty name", request: assistantCall({ name: "", arguments: "{}" }), message: "messages[1].tool_calls[0].function.name: is empty" },
  { name: "a call of another type", request: { messages: [user, { role: "assistant", tool_calls: [{ type: "code", function: { name: "f", arguments: "{}" } }] }] }, message: 'messages[1].tool_calls[0].type: "code" is not "function"' },
  { name: "legacy function_call", request: { messages: [user, { role: "assistant", function_call: { name: "f", arguments: "{}" } }] }, message: "messages[1].function_call: the legacy form is not supported" },
  { name: "a tool message without tool_call_id", request: { messages: [user, { role: "tool", content: "18C", name: "f" }] }, message: "messages[1].tool_call_id: missing" },
  { name: "a tool result whose tool cannot be named", request: { messages: [user, { role: "tool", tool_call_id: "c9", content: "18C" }] }, message: "messages[1]: cannot tell which tool result 1 comes from" },
  // Other fields.
  { name: "n = 0", request: withUser({ n: 0 }), message: "n: 0 is out of range" },
  { name: "a negative temperature", request: withUser({ temperature: -0.1 }), message: "temperature must be a number from 0 to 2 (0 is greedy), got -0.1" },
  { name: "top_p 0", request: withUser({ top_p: 0 }), message: "top_p must be a number above 0 and at most 1 (1 is off), got 0" },
  { name: "max_tokens 0", request: withUser({ max_tokens: 0 }), message: "max_tokens: 0 is out of range (>= 1)" },
  { name: "max_tokens not whole", request: withUser({ max_tokens: 1.5 }), message: "max_tokens: expected a whole number, got 1.5" },
  { name: "a seed beyond 2^53", request: `{"messages": [${JSON.stringify(user)}], "seed": 18446744073709551616}`, message: "seed must be a whole number of at most 2^53 - 1 in size, got 18446744073709552000" },
  { name: "stop with a number", request: withUser({ stop: ["a", 1] }), message: "stop[1]: expected a string, got a number" },
];
