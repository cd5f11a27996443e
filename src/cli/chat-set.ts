/**
 * `k3 chat`'s `/set KNOB VALUE`: `max-tokens`, or a sampling knob by its flag name. The value is
 * read as the flag's value is (`parseNumber`) and checked by the one table of ranges, so `/set`,
 * the flags and both HTTP endpoints give the same verdict for the same value.
 */
import { resolveSampling, samplingNames, type SamplingKnob } from "../decode/sampling-options.ts";
import { quoteArgument, usageError } from "../errors.ts";
import { maxGeneratedTokens } from "../plan/limits.ts";
import type { ChatSettings } from "../session/chat-session.ts";
import { parseInteger } from "./args.ts";
import { parseNumber } from "./sampling-options.ts";

/** Applies `/set` to `settings` and returns the line that confirms it. */
export function applySet(settings: ChatSettings, [knob, value, ...extra]: readonly string[]): string {
  if (!knob || value === undefined || extra.length > 0) throw usageError("/set takes a knob and a value, e.g. /set temperature 0.7");
  if (knob === "max-tokens") {
    settings.maxNewTokens = parseInteger(value, "/set max-tokens", 1, maxGeneratedTokens);
    return `(max-tokens ${settings.maxNewTokens})`;
  }
  const entry = (Object.entries(samplingNames.flag) as [SamplingKnob, string][]).find(([, flag]) => flag === `--${knob}`);
  if (!entry) throw usageError(`/set: unknown knob ${quoteArgument(knob)} (max-tokens, ${Object.values(samplingNames.flag).map((f) => f.slice(2)).join(", ")})`);
  const [name, flag] = entry;
  settings.sampling = resolveSampling({ ...settings.sampling, [name]: parseNumber(value, flag) }, settings.sampling);
  if (name === "seed") settings.freshSeedEachTurn = false; // a seed asked for is kept, turn after turn
  return `(${knob} ${settings.sampling[name]})`;
}
