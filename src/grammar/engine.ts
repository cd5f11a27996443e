/**
 * The grammar engine behind constrained decoding: XGrammar (npm `@mlc-ai/web-xgrammar`, WASM),
 * behind this one module as libk3 is behind native/. It sees the tokenizer's ordinary ids as
 * their bytes (in the GPT-2 byte-level alphabet, so a piece holding part of a UTF-8 character is
 * exact) and every control id as an empty string, which XGrammar treats as special: never allowed
 * by a grammar, except the one stop id a matcher is given. Structure (which control id comes
 * when) is decided above, on ids (chat/reply-constraint.ts, reply-shape.ts); a grammar here only ever spans the text of
 * one section.
 */
import * as xgrammar from "@mlc-ai/web-xgrammar";
import type { Tokenizer } from "../tokenizer/index.ts";

/** A compiled grammar: each matcher is one pass over it. */
export interface CompiledText {
  /** A matcher that ends its text with `stopId` (allowed once the text is complete). */
  matcher(stopId: number): Promise<TextMatcher>;
}

export interface TextMatcher {
  /** The ids allowed next (XGrammar's bitmask: bit id & 31 of word id >> 5). */
  mask(): Promise<Int32Array>;
  /** Advances on `id`; false when the grammar does not allow it (the matcher is then unchanged). */
  advance(id: number): boolean;
  /** The stop id was accepted: the text is complete. */
  readonly done: boolean;
  dispose(): void;
}

/** GPT-2's byte-to-character table: printable Latin-1 maps to itself, the rest to U+0100 on. */
const byteLevelChars: string[] = (() => {
  const chars: string[] = new Array(256);
  let next = 256;
  for (let b = 0; b < 256; b++) {
    const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    chars[b] = String.fromCharCode(printable ? b : next++);
  }
  return chars;
})();

/** `bytes` in the byte-level alphabet. */
export function byteLevel(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += byteLevelChars[b];
  return out;
}

/** JSON text as the prompt shows it (chat.md 2.4): one line, ", " and ": ". */
const separators: [string, string] = [", ", ": "];

/** The engine for one tokenizer: its vocabulary built once, compiled grammars cached by their source. */
export class GrammarEngine {
  readonly #compiler: xgrammar.GrammarCompiler;
  readonly #cache = new Map<string, Promise<CompiledText>>();

  private constructor(compiler: xgrammar.GrammarCompiler) {
    this.#compiler = compiler;
  }

  static async create(tokenizer: Tokenizer): Promise<GrammarEngine> {
    const vocab: string[] = new Array(tokenizer.vocabSize);
    for (let id = 0; id < tokenizer.vocabSize; id++) vocab[id] = id < tokenizer.rankCount ? byteLevel(tokenizer.tokenBytes(id)) : "";
    const info = await xgrammar.TokenizerInfo.createTokenizerInfo(vocab, "byte_level", false, tokenizer.vocabSize, []);
    return new GrammarEngine(await xgrammar.GrammarCompiler.createGrammarCompiler(info, true));
  }

  /** JSON text that validates against `schema` (its keywords checked by chat/schema-keywords.ts first). */
  jsonSchema(schema: string): Promise<CompiledText> {
    return this.#compiled(`schema ${schema}`, () => this.#compiler.compileJSONSchema(schema, false, -1, separators, true));
  }

  /** A grammar in XGrammar's EBNF, root rule `root`. */
  ebnf(source: string): Promise<CompiledText> {
    return this.#compiled(`ebnf ${source}`, () => this.#compiler.compileGrammar(source, "root"));
  }

  #compiled(key: string, compile: () => Promise<xgrammar.CompiledGrammar>): Promise<CompiledText> {
    let found = this.#cache.get(key);
    if (!found) {
      found = compile().then((grammar) => ({ matcher: (stopId: number) => openMatcher(grammar, stopId) }));
      // A grammar that failed to compile is not kept: the error belongs to the request that sent it.
      found.catch(() => this.#cache.delete(key));
      this.#cache.set(key, found);
    }
    return found;
  }
}

async function openMatcher(grammar: xgrammar.CompiledGrammar, stopId: number): Promise<TextMatcher> {
  const matcher = await xgrammar.GrammarMatcher.createGrammarMatcher(grammar, [stopId], false);
  return {
    mask: () => matcher.getNextTokenBitmask(),
    advance: (id) => matcher.acceptToken(id),
    get done() {
      return matcher.isTerminated();
    },
    dispose: () => matcher.dispose(),
  };
}

const engines = new WeakMap<Tokenizer, Promise<GrammarEngine>>();

/** The engine of `tokenizer`, made on first use (its vocabulary costs a fraction of a second). */
export function grammarEngine(tokenizer: Tokenizer): Promise<GrammarEngine> {
  let engine = engines.get(tokenizer);
  if (!engine) {
    engine = GrammarEngine.create(tokenizer);
    engines.set(tokenizer, engine);
  }
  return engine;
}

/** The error text XGrammar gave, on one line. */
export function grammarErrorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.replace(/\s+/g, " ").trim().slice(0, 300);
}
