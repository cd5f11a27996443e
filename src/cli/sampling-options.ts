/**
 * The sampling flags (`--temperature`, `--top-p`, ...), generated from the one table of knobs
 * in src/decode/sampling-options.ts; their ranges are checked there, once, for every command.
 */
import { quoteArgument, usageError } from "../errors.ts";
import { samplingNames, type SamplingKnob } from "../decode/sampling-options.ts";
import type { OptionDef } from "./args.ts";

export interface SamplingTarget {
  /** The knobs given on the command line; the command's defaults fill the rest. */
  sampling: Partial<Record<SamplingKnob, number>>;
}

const describeKnob: Record<SamplingKnob, string> = {
  temperature: "Sampling temperature, 0 to 2 (0 is greedy: argmax, ties to the lowest id)",
  topP: "Nucleus sampling: keep the most likely ids up to this mass, in (0, 1]",
  topK: "Keep only the K most likely ids (0 is off)",
  minP: "Drop ids below this fraction of the most likely id's probability (0 is off)",
  seed: "Seed of the sampler's random stream: the same seed gives the same ids",
  presencePenalty: "Subtracted once from the logit of every id already generated, -2 to 2",
  frequencyPenalty: "Subtracted per occurrence from the logit of every id already generated, -2 to 2",
};

/** A number as people type it: decimal, optionally signed, optionally with a fraction or exponent. */
function parseNumber(raw: string, flag: string): number {
  const text = raw.trim();
  if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(text)) throw usageError(`${flag} expects a number, got ${quoteArgument(raw)}`);
  return Number(text);
}

export function samplingOptions<T extends SamplingTarget>(defaultsNote: string): OptionDef<T>[] {
  return (Object.keys(samplingNames.flag) as SamplingKnob[]).map((knob) => ({
    name: samplingNames.flag[knob].slice(2),
    value: knob === "topK" ? "K" : knob === "seed" ? "S" : "X",
    description: `${describeKnob[knob]}${knob === "temperature" ? ` (${defaultsNote})` : ""}`,
    apply: (o, raw, flag) => { o.sampling[knob] = parseNumber(raw, flag); },
  }));
}
