/**
 * `POST /v1/completions`: a raw prompt, no chat template (chat.md 2.10 trap 7: control-token
 * text in the prompt is recognised as the control ids, as the released tokenizer does), and the
 * continuation as text. It runs on the same generation source and the same sampling as chat.
 */
import { Utf8Stream } from "../chat/utf8-stream.ts";
import { finishReason, type OpenAIFinishReason } from "../chat/finish.ts";
import { createSampler } from "../decode/sampling.ts";
import { resolveSampling, samplingDefaults, type SamplingOptions } from "../decode/sampling-options.ts";
import { fitReply } from "../decode/reply-room.ts";
import { fieldError, usageError } from "../errors.ts";
import { JsonSyntaxError, parseJsonData } from "../json.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { PrefillProgress } from "../session/conversation.ts";
import { StopStrings, type GenerationSource } from "../session/reply.ts";
import { statsOf, usageOf, type CompletionStats, type Usage } from "./turn-stats.ts";

/** OpenAI's legacy default for a completion's length. */
const defaultCompletionTokens = 16;

export interface TextRequest {
  model: string | undefined;
  ids: number[];
  promptTokens: number;
  maxTokens: number;
  sampling: SamplingOptions;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
}

type Body = Record<string, unknown>;

function integer(body: Body, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) throw fieldError(key, "expected a whole number of at least 1");
  return v;
}

function numberOf(body: Body, key: string): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number") throw fieldError(key, `expected a number, got ${typeof v}`);
  return v;
}

/** Validates a completions body (plain JSON: the prompt is text, nothing keeps number lexemes). */
export function parseTextRequest(bytes: Uint8Array, tokenizer: Tokenizer, capacity: number): TextRequest {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw usageError("request: not valid UTF-8");
  }
  let root: unknown;
  try {
    // As chat bodies are read (chat.md 2.4): a repeated key's last value wins.
    root = parseJsonData(text, { duplicateKeys: "last" });
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw usageError(`request:${error.message}`);
    throw error;
  }
  if (typeof root !== "object" || root === null || Array.isArray(root)) throw usageError("request: expected a JSON object");
  const body = root as Body;
  if (typeof body.prompt !== "string" || body.prompt.length === 0) throw fieldError("prompt", "expected a non-empty string");
  if (body.n !== undefined && body.n !== 1) throw fieldError("n", "only 1 is supported");
  if (body.echo === true) throw fieldError("echo", "not supported");
  if (body.logprobs !== undefined && body.logprobs !== null) throw fieldError("logprobs", "not supported");
  const stopField = body.stop;
  const stop = stopField === undefined || stopField === null ? [] : typeof stopField === "string" ? [stopField] : stopField;
  if (!Array.isArray(stop) || !stop.every((s) => typeof s === "string" && s.length > 0)) throw fieldError("stop", "expected a non-empty string or an array of them");
  const sampling = resolveSampling({
    temperature: numberOf(body, "temperature"), topP: numberOf(body, "top_p"), topK: numberOf(body, "top_k"), minP: numberOf(body, "min_p"),
    seed: numberOf(body, "seed"), presencePenalty: numberOf(body, "presence_penalty"), frequencyPenalty: numberOf(body, "frequency_penalty"),
  }, samplingDefaults.chat, "field");
  const ids = tokenizer.encode(body.prompt); // control-token text becomes the control ids
  const maxTokens = fitReply({
    promptIds: ids.length, maxTokens: integer(body, "max_tokens"), defaultMaxTokens: defaultCompletionTokens, capacity,
    promptField: "prompt", maxTokensField: "max_tokens",
  });
  const options = body.stream_options as Body | undefined;
  return {
    model: typeof body.model === "string" ? body.model : undefined, ids, promptTokens: ids.length, maxTokens, sampling,
    stop: stop as string[], stream: body.stream === true, includeUsage: options?.include_usage === true,
  };
}

export interface TextCompletion {
  text: string;
  finishReason: OpenAIFinishReason;
  usage: Usage;
  stats: CompletionStats;
}

export async function runTextCompletion(
  request: TextRequest, source: GenerationSource, tokenizer: Tokenizer, stopIds: ReadonlySet<number>,
  onText: (text: string) => void, cancelled: () => boolean, onPrefill?: (progress: PrefillProgress) => void,
): Promise<TextCompletion> {
  const utf8 = new Utf8Stream();
  const stops = new StopStrings(request.stop);
  let text = "";
  const emit = (piece: string) => {
    if (!piece) return;
    text += piece;
    onText(piece);
  };
  const turn = await source.turn({ ids: request.ids, historyEnd: request.ids.length }, {
    sampler: createSampler(request.sampling), maxNewTokens: request.maxTokens, stopIds, cancelled, onPrefill,
    onToken: (id) => {
      if (stopIds.has(id)) return undefined; // the stop id ends the reply and is not text
      emit(stops.push(utf8.push(tokenizer.decode([id]))));
      return stops.hit ? "stop" : undefined;
    },
  });
  emit(stops.push(utf8.end()));
  emit(stops.flush());
  return { text, finishReason: finishReason(turn.finish, false), usage: usageOf(request.promptTokens, turn), stats: statsOf(turn) };
}
