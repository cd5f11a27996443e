/**
 * The part of a request body both completion endpoints share: how to generate, not what from.
 * The sampling knobs (read as numbers, checked by the one table of ranges in
 * decode/sampling-options.ts that the flags and /set use too; chat.md 3.4 rule 5: any valid
 * value is accepted), the reply's length, stop strings, `n`, log-probabilities (chat: `logprobs` and
 * `top_logprobs`; completions: the legacy `logprobs` count), and streaming. Read here once, for
 * /v1/chat/completions (request.ts) and /v1/completions (serve/text-completion.ts), so a field
 * gets the same verdict, with the same name, at either.
 */
import { checkGivenSampling } from "../decode/sampling-options.ts";
import { inputLimits } from "../input-limits.ts";
import { usageError } from "../errors.ts";
import { Fields, quote, refuse, typeName } from "./fields.ts";
import { JsonSyntaxError, parseJson } from "./json-parse.ts";
import { isJsonObject, type JsonValue } from "./json-value.ts";
import type { GenerationFields, Sampling } from "./request-types.ts";


/** A request body's JSON text as the fields of its top-level object (number lexemes kept, a repeated key's last value). */
export function requestFields(text: string, source: string): Fields {
  let root: JsonValue;
  try {
    root = parseJson(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw usageError(`${source}:${error.message}`);
    throw error;
  }
  return objectFields(root, source);
}

export function objectFields(root: JsonValue, source: string): Fields {
  if (!isJsonObject(root)) throw usageError(`${source}: expected a JSON object, got ${typeName(root)}`);
  return new Fields(root, "");
}

/** OpenAI's bounds on the alternatives per id: chat's `top_logprobs`, the legacy completions `logprobs`. */
export const logprobLimits = { chatTop: 20, completionsTop: 5 } as const;

/**
 * How many alternatives per id the request wants with its log-probabilities, or undefined for
 * none. Chat: `logprobs: true`, `top_logprobs` 0-20 (which needs `logprobs`); completions: the
 * legacy `logprobs` 0-5.
 */
function readLogprobs(body: Fields, shape: "chat" | "completions"): number | undefined {
  const given = (key: string) => body.value(key) !== undefined && body.value(key) !== null;
  if (shape === "completions") {
    if (given("top_logprobs")) throw refuse("top_logprobs", "is a chat-completions field; /v1/completions takes logprobs: 0-5 (alternatives per id)");
    return given("logprobs") ? body.integer("logprobs", 0, logprobLimits.completionsTop) : undefined;
  }
  const on = given("logprobs") ? body.boolean("logprobs") : undefined;
  const top = given("top_logprobs") ? body.integer("top_logprobs", 0, logprobLimits.chatTop) : undefined;
  if (top !== undefined && on !== true) throw refuse("top_logprobs", "needs logprobs: true");
  return on === true ? top ?? 0 : undefined;
}

/**
 * The generation fields of `body`; `maxTokenFields` are the endpoint's names for the reply's
 * length, the first given wins (chat: `max_completion_tokens`, then `max_tokens`).
 */
export function readGenerationFields(body: Fields, maxTokenFields: readonly string[], shape: "chat" | "completions"): GenerationFields {
  const logprobs = readLogprobs(body, shape);
  const choices = body.integer("n", 1, inputLimits.requestChoices) ?? 1;
  const lengths = maxTokenFields.map((key) => body.integer(key, 1, Number.POSITIVE_INFINITY));
  const streamOptions = body.object("stream_options");
  return {
    sampling: readSampling(body),
    maxTokens: lengths.find((x) => x !== undefined),
    stop: readStop(body),
    stream: body.boolean("stream") ?? false,
    includeUsage: streamOptions?.boolean("include_usage") ?? false,
    choices,
    logprobs,
  };
}

function readSampling(body: Fields): Sampling {
  const numberAt = (key: string) => body.number(key, Number.NEGATIVE_INFINITY, Number.POSITIVE_INFINITY);
  const given = checkGivenSampling({
    temperature: numberAt("temperature"), topP: numberAt("top_p"), topK: numberAt("top_k"), minP: numberAt("min_p"), seed: numberAt("seed"),
    presencePenalty: numberAt("presence_penalty"), frequencyPenalty: numberAt("frequency_penalty"),
  }, "field");
  return {
    temperature: given.temperature, topP: given.topP, topK: given.topK, minP: given.minP, seed: given.seed,
    presencePenalty: given.presencePenalty, frequencyPenalty: given.frequencyPenalty,
  };
}

function readStop(body: Fields): string[] {
  const value = body.value("stop");
  if (value === undefined) return [];
  const list = typeof value === "string" ? [value] : body.array("stop") ?? [];
  return list.map((item, i) => {
    const at = typeof value === "string" ? "stop" : `stop[${i}]`;
    if (typeof item !== "string") throw refuse(at, `expected a string, got ${typeName(item)}`);
    if (item.length === 0) throw refuse(at, `${quote(item)} is empty`);
    return item;
  });
}
