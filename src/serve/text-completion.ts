/**
 * `POST /v1/completions`: a raw prompt, no chat template (chat.md 2.10 trap 7: control-token
 * text in the prompt is recognised as the control ids, as the released tokenizer does), and the
 * continuation as text. It runs on the same generation source and the same sampling as chat.
 */
import { Utf8Stream } from "../chat/utf8-stream.ts";
import { finishReason, type OpenAIFinishReason } from "../chat/finish.ts";
import { LogprobRecorder, type TokenLogprob } from "../decode/logprobs.ts";
import { createSampler } from "../decode/sampling.ts";
import { choiceSampling, freshSeed, resolveSampling, samplingDefaults, type SamplingOptions } from "../decode/sampling-options.ts";
import { fitReply } from "../decode/reply-room.ts";
import { fieldError, usageError } from "../errors.ts";
import { checkTextFits } from "../chat/render.ts";
import { readGenerationFields, requestFields } from "../chat/request-generation.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { PrefillProgress, TurnOptions, TurnResult } from "../session/conversation.ts";
import { choiceTurns, StopStrings, type GenerationSource } from "../session/reply.ts";
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
  /** `n`: the continuations to generate, each sampled with its own seed (choiceSampling). */
  choices: number;
  /** The legacy `logprobs`: alternatives per id (0-5); undefined: none. */
  logprobs: number | undefined;
}

/**
 * Validates a completions body: what to continue (`prompt`) and this endpoint's refusals here,
 * how to generate by the reader both endpoints share (chat/request-generation.ts).
 */
export function parseTextRequest(bytes: Uint8Array, tokenizer: Tokenizer, capacity: number): TextRequest {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw usageError("request: not valid UTF-8");
  }
  const body = requestFields(text, "request");
  const prompt = body.string("prompt");
  if (prompt === undefined || prompt.length === 0) throw fieldError("prompt", "expected a non-empty string");
  if (body.boolean("echo") === true) throw fieldError("echo", "not supported");
  const generation = readGenerationFields(body, ["max_tokens"], "completions");
  const sampling = resolveSampling({ ...generation.sampling, seed: generation.sampling.seed ?? freshSeed() }, samplingDefaults.chat, "field");
  checkTextFits(Buffer.byteLength(prompt), capacity, tokenizer, "prompt"); // before encoding: the work is bounded by the context
  const ids = tokenizer.encode(prompt); // control-token text becomes the control ids
  const maxTokens = fitReply({
    promptIds: ids.length, maxTokens: generation.maxTokens, defaultMaxTokens: defaultCompletionTokens, capacity,
    promptField: "prompt", maxTokensField: "max_tokens",
  });
  return {
    model: body.string("model"), ids, promptTokens: ids.length, maxTokens, sampling,
    stop: [...generation.stop], stream: generation.stream, includeUsage: generation.includeUsage, choices: generation.choices,
    logprobs: generation.logprobs,
  };
}

export interface TextChoice {
  index: number;
  text: string;
  finishReason: OpenAIFinishReason;
  /** With `logprobs`: every generated id but a stop id, and those past a stop string. */
  logprobs?: TokenLogprob[];
  /** Streaming: the entries no text chunk carried yet (they go with the choice's last chunk). */
  unsent?: TokenLogprob[];
}

export interface TextCompletion {
  choices: TextChoice[];
  usage: Usage;
  stats: CompletionStats;
}

export interface TextEvents {
  /** Text of choice `index` as it is produced (whole characters, a stop string held back), with the entries of the ids since the last call when asked for. */
  onText: (text: string, index: number, logprobs?: TokenLogprob[]) => void;
  onChoiceEnd?: (choice: TextChoice) => void;
  cancelled: () => boolean;
  onPrefill?: (progress: PrefillProgress) => void;
}

export async function runTextCompletion(
  request: TextRequest, source: GenerationSource, tokenizer: Tokenizer, stopIds: ReadonlySet<number>, events: TextEvents,
): Promise<TextCompletion> {
  const prompt = { ids: request.ids, historyEnd: request.ids.length };
  const continuations = Array.from({ length: request.choices }, (_, index) => {
    const utf8 = new Utf8Stream();
    const stops = new StopStrings(request.stop);
    let text = "";
    const sampling = choiceSampling(request.sampling, index);
    const recorder = request.logprobs === undefined ? undefined : new LogprobRecorder(sampling, request.logprobs);
    const all: TokenLogprob[] = [];
    const unsent: TokenLogprob[] = [];
    let chosen: TokenLogprob | undefined;
    const emit = (piece: string) => {
      if (!piece) return;
      text += piece;
      events.onText(piece, index, recorder && unsent.splice(0));
    };
    const options: TurnOptions = {
      sampler: createSampler(sampling), maxNewTokens: request.maxTokens, stopIds,
      cancelled: events.cancelled, onPrefill: index === 0 ? events.onPrefill : undefined,
      onChosen: recorder && ((id, row) => {
        chosen = recorder.record(id, row);
      }),
      onToken: (id) => {
        if (stopIds.has(id)) return undefined; // the stop id ends the reply and is not text
        if (chosen && !stops.hit) {
          all.push(chosen);
          unsent.push(chosen);
        }
        chosen = undefined;
        emit(stops.push(utf8.push(tokenizer.decode([id]))));
        return stops.hit ? "stop" : undefined;
      },
    };
    const finish = (turn: TurnResult): TextChoice => {
      emit(stops.push(utf8.end()));
      emit(stops.flush());
      const choice = { index, text, finishReason: finishReason(turn.finish, false), ...(recorder && { logprobs: all, unsent: unsent.splice(0) }) };
      events.onChoiceEnd?.(choice);
      return choice;
    };
    return { options, finish };
  });
  const turns = choiceTurns(source, prompt, continuations.map((c) => c.options));
  const done = await Promise.all(turns.map(async (turn, i) => {
    const result = await turn;
    return { turn: result, choice: (continuations[i] as (typeof continuations)[number]).finish(result) };
  }));
  const results = done.map((d) => d.turn);
  return { choices: done.map((d) => d.choice), usage: usageOf(request.promptTokens, results), stats: statsOf(results, request.sampling.seed) };
}
