/**
 * The sampling knobs (chat.md 3.4): their names, ranges, defaults and the one validator. The CLI
 * flags and the server's request fields both come through here, so a range is written once.
 */
import { ExitCode, K3Error } from "../errors.ts";

export interface SamplingOptions {
  /** 0 is greedy: argmax, ties to the lowest id, no randomness used, every other knob ignored. */
  readonly temperature: number;
  /** Nucleus mass in (0, 1]; 1 is off. */
  readonly topP: number;
  /** Keep this many most likely ids; 0 is off. */
  readonly topK: number;
  /** Drop ids below minP times the most likely id's probability; 0 is off. */
  readonly minP: number;
  /** Seeds the random stream; the CLI's default is a fixed constant, a server request without one draws a fresh one (freshSeed). */
  readonly seed: number;
  /** Subtracted once from the logit of every id already generated; 0 is off. */
  readonly presencePenalty: number;
  /** Subtracted per occurrence from the logit of every id already generated; 0 is off. */
  readonly frequencyPenalty: number;
}

export type SamplingKnob = keyof SamplingOptions;

/** The seed when none is given. Any fixed value would do; it only has to never change. */
export const DEFAULT_SEED = 0;

const off = { topK: 0, minP: 0, seed: DEFAULT_SEED, presencePenalty: 0, frequencyPenalty: 0 } as const;

/**
 * The defaults: the run command stays greedy (the reference path, chat.md 3.4 rule 1); chat uses
 * Moonshot's evaluation settings, temperature 1.0 and top_p 0.95 (chat.md 3.1, rule 4).
 */
export const samplingDefaults = {
  run: { temperature: 0, topP: 1, ...off },
  chat: { temperature: 1, topP: 0.95, ...off },
} as const satisfies Record<string, SamplingOptions>;

/** How each knob is spelled on the command line and in an OpenAI-style request. */
export const samplingNames = {
  flag: {
    temperature: "--temperature", topP: "--top-p", topK: "--top-k", minP: "--min-p", seed: "--seed",
    presencePenalty: "--presence-penalty", frequencyPenalty: "--frequency-penalty",
  },
  field: {
    temperature: "temperature", topP: "top_p", topK: "top_k", minP: "min_p", seed: "seed",
    presencePenalty: "presence_penalty", frequencyPenalty: "frequency_penalty",
  },
} as const satisfies Record<string, Record<SamplingKnob, string>>;

export type SamplingNaming = keyof typeof samplingNames;

interface Range {
  readonly accepts: (value: number) => boolean;
  readonly says: string;
}

const between = (low: number, high: number): ((v: number) => boolean) => (v) => v >= low && v <= high;


const ranges: Record<SamplingKnob, Range> = {
  temperature: { accepts: between(0, 2), says: "a number from 0 to 2 (0 is greedy)" },
  topP: { accepts: (v) => v > 0 && v <= 1, says: "a number above 0 and at most 1 (1 is off)" },
  // -1 is "off" as vLLM and llama.cpp spell it; it is read as 0.
  topK: { accepts: (v) => Number.isSafeInteger(v) && v >= -1, says: "a whole number of at least -1 (0 and -1 are off)" },
  minP: { accepts: between(0, 1), says: "a number from 0 to 1 (0 is off)" },
  // Beyond 2^53 a number no longer holds every integer: 2^53 + 1 would silently seed as 2^53.
  seed: { accepts: (v) => Number.isSafeInteger(v), says: "a whole number of at most 2^53 - 1 in size" },
  presencePenalty: { accepts: between(-2, 2), says: "a number from -2 to 2 (0 is off)" },
  frequencyPenalty: { accepts: between(-2, 2), says: "a number from -2 to 2 (0 is off)" },
};

/** The knob's valid values in words, for usage text: the table's own sentence. */
export function samplingRange(knob: SamplingKnob): string {
  return ranges[knob].says;
}

/** One knob's value, checked against the table; `name` spells it in the refusal and is its field. */
function checkKnob(knob: SamplingKnob, value: unknown, name: string): number {
  const range = ranges[knob];
  if (typeof value !== "number" || Number.isNaN(value) || !range.accepts(value)) {
    throw new K3Error(ExitCode.usage, `${name} must be ${range.says}, got ${describe(value)}`, undefined, name);
  }
  return knob === "topK" && value === -1 ? 0 : value;
}

/**
 * The knobs a request or command line gave, each checked (absent ones stay absent): what the
 * chat request reader keeps, so a request is refused when it is read, by the same table.
 */
export function checkGivenSampling(given: Partial<Record<SamplingKnob, unknown>>, naming: SamplingNaming): Partial<Record<SamplingKnob, number>> {
  const out: Partial<Record<SamplingKnob, number>> = {};
  for (const knob of Object.keys(ranges) as SamplingKnob[]) {
    if (given[knob] !== undefined) out[knob] = checkKnob(knob, given[knob], samplingNames[naming][knob]);
  }
  return out;
}

/**
 * `defaults` with `given` laid over it, every knob checked; an out-of-range or non-number value
 * is a usage error (exit 2) whose one line names the option as `naming` spells it.
 */
export function resolveSampling(
  given: Partial<Record<SamplingKnob, unknown>>,
  defaults: SamplingOptions,
  naming: SamplingNaming = "flag",
): SamplingOptions {
  const check = (knob: SamplingKnob): number => checkKnob(knob, given[knob] ?? defaults[knob], samplingNames[naming][knob]);
  return {
    temperature: check("temperature"), topP: check("topP"), topK: check("topK"), minP: check("minP"),
    seed: check("seed"), presencePenalty: check("presencePenalty"), frequencyPenalty: check("frequencyPenalty"),
  };
}

/**
 * A seed for a request that gave none (chat.md 3.4 rule 3): fresh each time, so asking again
 * gives another answer, as OpenAI, llama-server and Ollama do; reported with the answer so it
 * can be reproduced. Any whole number below 2^53, so every door accepts it back.
 */
export function freshSeed(): number {
  const [high, low] = crypto.getRandomValues(new Uint32Array(2)) as unknown as [number, number];
  return (high & 0x1f_ffff) * 2 ** 32 + low;
}

/** Checks a complete set of options (the same rules as resolveSampling). */
export function validateSampling(options: SamplingOptions, naming: SamplingNaming = "flag"): SamplingOptions {
  return resolveSampling(options, options, naming);
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  return typeof value;
}

/**
 * The sampling of choice `index` of a request with `n > 1`: its seed is the request's plus the
 * index, wrapping from 2^53 - 1 to 0, so choice 0 is the answer the request gives with `n: 1`
 * and choice i the one it gives with `n: 1` and that seed.
 */
export function choiceSampling(sampling: SamplingOptions, index: number): SamplingOptions {
  const room = 2 ** 53 - sampling.seed; // exact for a seed >= 0, the only case that can wrap
  return { ...sampling, seed: index < room ? sampling.seed + index : index - room };
}
