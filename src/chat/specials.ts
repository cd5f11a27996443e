/**
 * The control tokens XTML is built from (chat.md 1.1), found by name in the tokenizer's
 * `added_tokens_decoder`, never as numbers: a small test tokenizer that carries the same names
 * works the same way. One table; everything in src/chat asks it.
 */
import { usageError } from "../errors.ts";
import type { Tokenizer } from "../tokenizer/index.ts";

export const controlNames = {
  open: "<|open|>",
  close: "<|close|>",
  sep: "<|sep|>",
  endOfMessage: "<|end_of_msg|>",
  eos: "[EOS]",
  bos: "[BOS]",
} as const;

export type ControlName = keyof typeof controlNames;

export type ControlIds = { readonly [name in ControlName]: number };

/** The control ids of `tokenizer`; a tokenizer that lacks one cannot render or parse chat. */
export function controlIds(tokenizer: Tokenizer): ControlIds {
  const entries = Object.entries(controlNames).map(([name, text]) => {
    const id = tokenizer.specialId(text);
    if (id === undefined) {
      throw usageError(`the tokenizer has no ${text} in tokenizer_config.json's added_tokens_decoder: it is not a Kimi K3 chat tokenizer`);
    }
    return [name, id] as const;
  });
  return Object.fromEntries(entries) as ControlIds;
}

/** The ids that end an assistant turn (chat.md 2.8): `<|end_of_msg|>` and `[EOS]`, never `<|close|>`. */
export function stopIds(ids: ControlIds): ReadonlySet<number> {
  return new Set([ids.endOfMessage, ids.eos]);
}
