/**
 * The page's only way to the model: the public OpenAI-compatible API, exactly as any client
 * uses it. POST /v1/chat/completions with `stream: true` and `stream_options.include_usage`
 * (chat.md 4.4), and GET /v1/models for the model's name. Aborting the signal closes the
 * connection, and k3 serve stops generating at the next token.
 */
import type { Message, ToolCall } from "./messages.ts";
import { SseReader } from "./sse.ts";
import type { K3Stats, Usage } from "./stats.ts";

export type Effort = "low" | "high" | "max";

export interface ChatSettings {
  thinking: boolean;
  effort: Effort;
  temperature: number;
  topP: number;
  /** Undefined: the server's --max-tokens. */
  maxTokens: number | undefined;
  /** Undefined: a fresh draw each time (irrelevant at temperature 0). */
  seed: number | undefined;
}

/** Moonshot's evaluation settings, which k3 chat and k3 serve default to as well (chat.md 3.1). */
export const defaultSettings: ChatSettings = { thinking: true, effort: "max", temperature: 1, topP: 0.95, maxTokens: undefined, seed: undefined };

/** An OpenAI-shaped error: an HTTP status with its body's message, or an error event mid-stream. */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string | undefined;

  constructor(status: number, message: string, code?: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function chatRequest(model: string, messages: readonly Message[], s: ChatSettings): Record<string, unknown> {
  return {
    model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: s.temperature,
    top_p: s.topP,
    ...(s.maxTokens === undefined ? {} : { max_tokens: s.maxTokens }),
    ...(s.seed === undefined ? {} : { seed: s.seed }),
    thinking: s.thinking ? { type: "enabled", effort: s.effort } : { type: "disabled" },
  };
}

export interface StreamEvents {
  onReasoning(text: string): void;
  onContent(text: string): void;
  onToolCalls(calls: ToolCall[]): void;
  onFinish(reason: string): void;
  onUsage(usage: Usage, k3: K3Stats | undefined): void;
}

function headers(apiKey: string | undefined): Record<string, string> {
  return { "content-type": "application/json", ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}) };
}

async function failure(response: Response): Promise<ApiError> {
  let message = `${response.status} ${response.statusText}`;
  let code: string | undefined;
  try {
    const body = (await response.json()) as { error?: { message?: unknown; code?: unknown } };
    if (typeof body.error?.message === "string") message = body.error.message;
    if (typeof body.error?.code === "string") code = body.error.code;
  } catch {
    // Not an OpenAI error body: the status line says what there is to say.
  }
  return new ApiError(response.status, message, code);
}

/** The ids of the models the server serves (k3 serves one). */
export async function listModels(apiKey: string | undefined): Promise<string[]> {
  const response = await fetch("/v1/models", { headers: headers(apiKey) });
  if (!response.ok) throw await failure(response);
  const body = (await response.json()) as { data?: { id?: unknown }[] };
  return (body.data ?? []).map((m) => m.id).filter((id): id is string => typeof id === "string");
}

interface Chunk {
  choices?: { delta?: { reasoning_content?: unknown; content?: unknown; tool_calls?: unknown }; finish_reason?: unknown }[];
  usage?: Usage;
  k3?: K3Stats;
  error?: { message?: unknown; code?: unknown };
}

/** Streams one reply; resolves at [DONE] or the end of the body, rejects on an error or an abort. */
export async function streamChat(request: Record<string, unknown>, apiKey: string | undefined, signal: AbortSignal, events: StreamEvents): Promise<void> {
  const response = await fetch("/v1/chat/completions", { method: "POST", headers: headers(apiKey), body: JSON.stringify(request), signal });
  if (!response.ok) throw await failure(response);
  if (!response.body) throw new ApiError(response.status, "the server sent no body");
  const reader = new SseReader();
  const calls = new Map<number, ToolCall>();
  const decoder = new TextDecoder();
  const handle = (data: string) => {
    const chunk = JSON.parse(data) as Chunk;
    if (chunk.error) {
      throw new ApiError(200, typeof chunk.error.message === "string" ? chunk.error.message : "the server reported an error", typeof chunk.error.code === "string" ? chunk.error.code : undefined);
    }
    if (chunk.usage) events.onUsage(chunk.usage, chunk.k3);
    for (const choice of chunk.choices ?? []) {
      const delta = choice.delta ?? {};
      if (typeof delta.reasoning_content === "string" && delta.reasoning_content) events.onReasoning(delta.reasoning_content);
      if (typeof delta.content === "string" && delta.content) events.onContent(delta.content);
      if (Array.isArray(delta.tool_calls)) {
        // Fragments of one call share an index; their arguments concatenate (chat.md 4.4).
        for (const part of delta.tool_calls as { index?: number; id?: string; function?: { name?: string; arguments?: string } }[]) {
          const index = part.index ?? calls.size;
          const call = calls.get(index) ?? { id: part.id ?? `call_${index}`, type: "function" as const, function: { name: "", arguments: "" } };
          call.function.name += part.function?.name ?? "";
          call.function.arguments += part.function?.arguments ?? "";
          calls.set(index, call);
        }
        events.onToolCalls([...calls.values()]);
      }
      if (typeof choice.finish_reason === "string") events.onFinish(choice.finish_reason);
    }
  };
  const body = response.body.getReader();
  try {
    // A reader rather than `for await`, which Safari's streams do not all have.
    for (;;) {
      const { value, done } = await body.read();
      if (done) break;
      for (const data of reader.push(decoder.decode(value, { stream: true }))) handle(data);
      if (reader.done) break;
    }
  } finally {
    // After [DONE] or an error event nothing more is wanted: close the connection.
    body.cancel().catch(() => {});
  }
}
