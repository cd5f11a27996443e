/** The official `openai` client against a k3 server, and a streamed answer read to its end. */
import OpenAI from "openai";
import type { Served } from "./serve.ts";

export const openaiClient = (s: Served, apiKey = "unused") => new OpenAI({ baseURL: `${s.url}/v1`, apiKey, maxRetries: 0 });

export interface StreamedAnswer {
  content: string;
  reasoning: string;
  finish: string | null;
  usage: unknown;
}

/** A streamed chat completion, chunk by chunk: the reasoning and the answer joined, the finish reason, the usage chunk. */
export async function readStream(stream: AsyncIterable<OpenAI.ChatCompletionChunk>): Promise<StreamedAnswer> {
  const answer: StreamedAnswer = { content: "", reasoning: "", finish: null, usage: undefined };
  for await (const chunk of stream) {
    const choice = chunk.choices[0];
    const delta = (choice?.delta ?? {}) as { content?: string | null; reasoning_content?: string };
    answer.content += delta.content ?? "";
    answer.reasoning += delta.reasoning_content ?? "";
    answer.finish = choice?.finish_reason ?? answer.finish;
    if (chunk.usage) answer.usage = chunk.usage;
  }
  return answer;
}
