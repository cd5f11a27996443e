/**
 * The sampling flags (`--temperature`, `--top-p`, ...), generated from the one table of knobs
 * in src/decode/sampling-options.ts; their ranges are checked there, once, for every command.
 */
import { quoteArgument, usageError } from "../errors.ts";
import { samplingNames, samplingRange, type SamplingKnob } from "../decode/sampling-options.ts";
import type { OptionDef } from "./args.ts";

export interface SamplingTarget {
  /** The knobs given on the command line; the command's defaults fill the rest. */
  sampling: Partial<Record<SamplingKnob, number>>;
}

/** What each knob does; its valid values come from the table (`samplingRange`), never restated. */
const describeKnob: Record<SamplingKnob, string> = {
  temperature: "Sampling temperature",
  topP: "Nucleus sampling: keep the most likely ids up to this mass",
  topK: "Keep only the K most likely ids",
  minP: "Drop ids below this fraction of the most likely id's probability",
  seed: "Seed of the sampler's random stream: the same seed gives the same ids",
  presencePenalty: "Subtracted once from the logit of every id already generated",
  frequencyPenalty: "Subtracted per occurrence from the logit of every id already generated",
};

/** A number as people type it: decimal, optionally signed, optionally with a fraction or exponent. */
export function parseNumber(raw: string, flag: string): number {
  const text = raw.trim();
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw usageError(`${flag} expects a number, got ${quoteArgument(raw)}`);
  return Number(text);
}

export function samplingOptions<T extends SamplingTarget>(defaultsNote: string): OptionDef<T>[] {
  return (Object.keys(samplingNames.flag) as SamplingKnob[]).map((knob) => ({
    name: samplingNames.flag[knob].slice(2),
    value: knob === "topK" ? "K" : knob === "seed" ? "S" : "X",
    description: `${describeKnob[knob]}: ${samplingRange(knob)}${knob === "temperature" ? `; ${defaultsNote}` : ""}`,
    apply: (o, raw, flag) => { o.sampling[knob] = parseNumber(raw, flag); },
  }));
}
