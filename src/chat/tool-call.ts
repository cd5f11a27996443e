/**
 * A tool call as the reply parser reports it, and its OpenAI wire shape (chat.md 2.9, 4.3).
 * Ids are opaque to the model (the prompt never shows them), so each is fresh and random.
 */
export interface ToolCall {
  /** Position among the reply's calls, from 0 (OpenAI `tool_calls[].index`). */
  readonly index: number;
  readonly id: string;
  readonly name: string;
  /** A JSON object's text, with the model's own number spellings. */
  readonly arguments: string;
}

export interface OpenAIToolCall {
  readonly id: string;
  readonly type: "function";
  readonly function: { readonly name: string; readonly arguments: string };
}

/** `call_` and 24 random hex digits. */
export function randomCallId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return `call_${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

export function openAIToolCall(call: ToolCall): OpenAIToolCall {
  return { id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } };
}
