/**
 * Tool results before rendering (chat.md 2.3 and 2.6.5). A run of consecutive tool messages is
 * put in the order of the preceding assistant's `tool_calls` when every message in it matches a
 * call by id (then each takes the called function's name); if any does not match, the run stays
 * exactly as sent. Each result gets its index, counted from 1 since the last assistant message,
 * and the name of its tool: `tool`, else `name`, else the function of call number `index`.
 */
import { refuse } from "./fields.ts";
import type { AssistantMessage, ChatMessage, ToolMessage } from "./request-types.ts";

export interface ToolResult {
  readonly kind: "toolResult";
  readonly message: ToolMessage;
  readonly tool: string;
  readonly index: number;
}

export type RenderMessage = Exclude<ChatMessage, ToolMessage> | ToolResult;

export function resolveToolResults(messages: readonly ChatMessage[]): RenderMessage[] {
  const out: RenderMessage[] = [];
  let assistant: AssistantMessage | undefined;
  let count = 0;
  for (let i = 0; i < messages.length; ) {
    const message = messages[i] as ChatMessage;
    if (message.kind !== "tool") {
      if (message.kind === "assistant") {
        assistant = message;
        count = 0;
      }
      out.push(message);
      i++;
      continue;
    }
    let end = i;
    while (messages[end]?.kind === "tool") end++;
    const run = messages.slice(i, end) as ToolMessage[];
    for (const { message: result, calledName } of ordered(run, assistant)) {
      count++;
      const tool = calledName ?? result.tool ?? result.name ?? assistant?.toolCalls[count - 1]?.name;
      if (tool === undefined) {
        throw refuse(`messages[${result.at}]`, `cannot tell which tool result ${count} comes from (no "tool" or "name", and the preceding assistant message has no call ${count})`);
      }
      out.push({ kind: "toolResult", message: result, tool, index: count });
    }
    i = end;
  }
  return out;
}

/** The run in call order with each call's name, or as sent (no names) if any id matches no call. */
function ordered(run: readonly ToolMessage[], assistant: AssistantMessage | undefined): { message: ToolMessage; calledName: string | undefined }[] {
  const calls = assistant?.toolCalls ?? [];
  const positions = run.map((message) => calls.findIndex((call) => call.id !== undefined && call.id === message.toolCallId));
  if (positions.some((p) => p < 0)) return run.map((message) => ({ message, calledName: undefined }));
  return run
    .map((message, k) => ({ message, position: positions[k] as number, calledName: calls[positions[k] as number]?.name }))
    .sort((a, b) => a.position - b.position)
    .map(({ message, calledName }) => ({ message, calledName }));
}
