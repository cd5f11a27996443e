/**
 * The page's only way to the model: the public OpenAI-compatible API, exactly as any client
 * uses it. POST /v1/chat/completions with `stream: true` and `stream_options.include_usage`
 * (chat.md 4.4), and GET /v1/models for the model's name. Aborting the signal closes the
 * connection, and k3 serve stops at the next prefill chunk or token.
 */
import type { Message, ToolCall } from "./messages.ts";
import { parseProgress, type StreamProgress } from "./progress.ts";
import { SseReader, SseTooLong, type SseItem } from "./sse.ts";
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

/** A stream the page cannot read (not SSE of JSON objects, or past its limits): the page's own refusal. */
export class BadStream extends ApiError {
  constructor(message: string) {
    super(200, message, "bad_stream");
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
  /** k3's progress comments: the queue ahead, then the prefill after every chunk. */
  onProgress?(progress: StreamProgress): void;
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

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
const isSeconds = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v) && v >= 0;

function usageOf(v: unknown): Usage | undefined {
  if (!isObject(v) || !isCount(v.prompt_tokens) || !isCount(v.completion_tokens) || !isCount(v.total_tokens)) return undefined;
  return { prompt_tokens: v.prompt_tokens, completion_tokens: v.completion_tokens, total_tokens: v.total_tokens };
}

function statsOf(v: unknown): K3Stats | undefined {
  if (!isObject(v) || !isCount(v.reused_prompt_ids) || !isCount(v.prefilled_ids) || typeof v.reused_from !== "string") return undefined;
  if (!isSeconds(v.prefill_seconds) || !isSeconds(v.decode_seconds)) return undefined;
  const spec = v.speculation;
  const speculation = isObject(spec) && isCount(spec.drafted) && isCount(spec.accepted) && spec.accepted <= spec.drafted
    ? { drafted: spec.drafted, accepted: spec.accepted }
    : undefined;
  return {
    reused_prompt_ids: v.reused_prompt_ids, prefilled_ids: v.prefilled_ids, reused_from: v.reused_from, prefill_seconds: v.prefill_seconds,
    decode_seconds: v.decode_seconds, ...(speculation && { speculation }),
  };
}

/**
 * One streamed reply read from its text, in whatever pieces it arrives: SSE (sse.ts) to the
 * events the page shows. What the server sends is checked, not trusted: a chunk of another shape
 * is read for what it holds, a stream that is not SSE of JSON chunks ends the reply with
 * BadStream, an error event with an ApiError, and nothing else is thrown.
 */
export class ChatStreamReader {
  readonly #sse = new SseReader();
  readonly #calls = new Map<number, ToolCall>();
  readonly #events: StreamEvents;

  constructor(events: StreamEvents) {
    this.#events = events;
  }

  /** True once `data: [DONE]` was read. */
  get done(): boolean {
    return this.#sse.done;
  }

  /** Reads `text`; each event is handled as soon as it is complete, so a split changes nothing. */
  push(text: string): void {
    try {
      this.#sse.read(text, (item) => this.#item(item));
    } catch (error) {
      if (error instanceof SseTooLong) throw new BadStream(error.message);
      throw error;
    }
  }

  #item(item: SseItem): void {
    if (item.kind === "comment") {
      const progress = parseProgress(item.text);
      if (progress) this.#events.onProgress?.(progress);
    } else {
      this.#chunk(item.data);
    }
  }

  #chunk(data: string): void {
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      throw new BadStream(`the server sent an event that is not JSON: ${JSON.stringify(data.length > 60 ? `${data.slice(0, 60)}…` : data)}`);
    }
    if (!isObject(chunk)) throw new BadStream("the server sent an event that is not a JSON object");
    if (chunk.error !== undefined) {
      const e = isObject(chunk.error) ? chunk.error : {};
      throw new ApiError(200, typeof e.message === "string" ? e.message : "the server reported an error", typeof e.code === "string" ? e.code : undefined);
    }
    const usage = usageOf(chunk.usage);
    if (usage) this.#events.onUsage(usage, statsOf(chunk.k3));
    for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
      if (!isObject(choice)) continue;
      const delta = isObject(choice.delta) ? choice.delta : {};
      if (typeof delta.reasoning_content === "string" && delta.reasoning_content) this.#events.onReasoning(delta.reasoning_content);
      if (typeof delta.content === "string" && delta.content) this.#events.onContent(delta.content);
      if (Array.isArray(delta.tool_calls)) {
        // Fragments of one call share an index; their arguments concatenate (chat.md 4.4).
        for (const part of delta.tool_calls) {
          if (!isObject(part)) continue;
          const index = isCount(part.index) ? part.index : this.#calls.size;
          const fn = isObject(part.function) ? part.function : {};
          const call = this.#calls.get(index) ?? { id: typeof part.id === "string" ? part.id : `call_${index}`, type: "function" as const, function: { name: "", arguments: "" } };
          if (typeof fn.name === "string") call.function.name += fn.name;
          if (typeof fn.arguments === "string") call.function.arguments += fn.arguments;
          this.#calls.set(index, call);
        }
        this.#events.onToolCalls([...this.#calls.values()]);
      }
      if (typeof choice.finish_reason === "string") this.#events.onFinish(choice.finish_reason);
    }
  }
}

/** Streams one reply; resolves at [DONE] or the end of the body, rejects on an error or an abort. */
export async function streamChat(request: Record<string, unknown>, apiKey: string | undefined, signal: AbortSignal, events: StreamEvents): Promise<void> {
  const response = await fetch("/v1/chat/completions", { method: "POST", headers: headers(apiKey), body: JSON.stringify(request), signal });
  if (!response.ok) throw await failure(response);
  if (!response.body) throw new ApiError(response.status, "the server sent no body");
  const reader = new ChatStreamReader(events);
  const decoder = new TextDecoder();
  const body = response.body.getReader();
  try {
    // A reader rather than `for await`, which Safari's streams do not all have.
    for (;;) {
      const { value, done } = await body.read();
      if (done) break;
      reader.push(decoder.decode(value, { stream: true }));
      if (reader.done) break;
    }
  } finally {
    // After [DONE] or an error event nothing more is wanted: close the connection.
    body.cancel().catch(() => {});
  }
}
