/**
 * Log-probabilities in OpenAI's two shapes: chat's `logprobs.content` (each id's text, its
 * log-probability, its UTF-8 bytes and its alternatives) and the legacy completions object
 * (`tokens`, `token_logprobs`, `top_logprobs`, `text_offset`). An id's text is its own bytes
 * decoded; a piece holding part of a character shows U+FFFD there, and `bytes` is exact. A
 * log-probability of an id that could not be drawn is -9999 (JSON has no -Infinity), as OpenAI
 * writes it.
 */
import type { TokenLogprob } from "../decode/logprobs.ts";
import type { Tokenizer } from "../tokenizer/index.ts";

const lossy = new TextDecoder("utf-8");
/** A log-probability as JSON can carry it: -Infinity (could not be drawn) as OpenAI's -9999. */
export const finiteLogprob = (x: number) => (Number.isFinite(x) ? x : -9999);

export interface ChatTokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

export function chatLogprobs(entries: readonly TokenLogprob[], tokenizer: Tokenizer): ChatTokenLogprob[] {
  const piece = (id: number) => {
    const bytes = tokenizer.decode([id]);
    return { token: lossy.decode(bytes), bytes: [...bytes] };
  };
  return entries.map((e) => ({
    ...piece(e.id), logprob: finiteLogprob(e.logprob),
    top_logprobs: e.top.map((t) => ({ ...piece(t.id), logprob: finiteLogprob(t.logprob) })),
  }));
}

export interface LegacyLogprobs {
  tokens: string[];
  token_logprobs: number[];
  top_logprobs: Record<string, number>[];
  text_offset: number[];
}

/** The legacy shape; `offset` is where the first id's text starts in the choice's text (0, or what earlier chunks held). */
export function legacyLogprobs(entries: readonly TokenLogprob[], tokenizer: Tokenizer, offset = 0): LegacyLogprobs {
  const text = (id: number) => lossy.decode(tokenizer.decode([id]));
  const out: LegacyLogprobs = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  let at = offset;
  for (const e of entries) {
    const token = text(e.id);
    out.tokens.push(token);
    out.token_logprobs.push(finiteLogprob(e.logprob));
    out.top_logprobs.push(Object.fromEntries(e.top.map((t) => [text(t.id), finiteLogprob(t.logprob)])));
    out.text_offset.push(at);
    at += token.length;
  }
  return out;
}
