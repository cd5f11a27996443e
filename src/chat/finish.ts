/**
 * The one mapping from the engine's finish reasons (src/decode/loop.ts) to the three values
 * OpenAI clients accept (chat.md 4.5). Streaming and non-streaming responses both call it, so
 * they cannot disagree, and nothing like `stop_163586` can leave the server.
 */
import type { FinishReason } from "../decode/loop.ts";

export const openAIFinishReasons = ["stop", "length", "tool_calls"] as const;
export type OpenAIFinishReason = (typeof openAIFinishReasons)[number];

/**
 * Without tool calls: `stop` when a stop id (or the caller, at a stop sequence) ended the run;
 * otherwise the reply was cut short, which clients know as `length`, whether the budget ran out
 * or the caller cancelled (chat.md 2.9: "else length"). A Record over the engine's enum makes a
 * new engine reason a type error here until it is mapped.
 */
const withoutCalls: Readonly<Record<FinishReason, OpenAIFinishReason>> = {
  stop: "stop",
  length: "length",
  cancelled: "length",
};

/** `tool_calls` whenever at least one complete call was emitted, however the run ended. */
export function finishReason(engine: FinishReason, sawToolCalls: boolean): OpenAIFinishReason {
  return sawToolCalls ? "tool_calls" : withoutCalls[engine];
}
