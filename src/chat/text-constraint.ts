/**
 * A raw continuation held to a JSON schema (`k3 <model_dir> --json-schema FILE`, and its
 * `--batch` lines): no chat structure, only the grammar's text, ended by a stop id. The schema
 * is checked against the keyword table first (a keyword k3 cannot enforce is refused, naming it),
 * and the text is kept valid UTF-8 as in a reply's JSON.
 */
import type { Constraint, TokenMask } from "../decode/constraint.ts";
import { maskCount } from "../decode/constraint.ts";
import { grammarEngine, grammarErrorText, type CompiledText, type TextMatcher } from "../grammar/engine.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import { refuse } from "./fields.ts";
import { checkSchema, forEngine, type PlainJson } from "./schema-keywords.ts";
import { Utf8Guard } from "./utf8-guard.ts";

export class TextConstraint implements Constraint {
  readonly #grammar: CompiledText;
  readonly #stopId: number;
  readonly #vocabSize: number;
  readonly #utf8: Utf8Guard;
  #matcher: TextMatcher | undefined;
  #mask: TokenMask | undefined;
  #ended = false;

  constructor(grammar: CompiledText, stopId: number, tokenizer: Tokenizer) {
    this.#grammar = grammar;
    this.#stopId = stopId;
    this.#vocabSize = tokenizer.vocabSize;
    this.#utf8 = new Utf8Guard(tokenizer);
  }

  async allowed(): Promise<TokenMask | undefined> {
    if (this.#ended) return undefined;
    this.#matcher ??= await this.#grammar.matcher(this.#stopId);
    this.#mask ??= this.#utf8.restrict(await this.#matcher.mask());
    return this.#mask;
  }

  accept(id: number): void {
    this.#take(id);
  }

  #take(id: number): void {
    this.#mask = undefined;
    if (this.#ended) return;
    if (!this.#matcher?.advance(id)) throw new Error(`text constraint: the grammar refused id ${id}`);
    this.#utf8.advance(id);
    if (id === this.#stopId) this.dispose();
  }

  async takeForced(limit: number): Promise<number[]> {
    const out: number[] = [];
    while (out.length < limit && !this.#ended) {
      const mask = await this.allowed();
      if (!mask) break;
      const { count, first } = maskCount(mask, this.#vocabSize);
      if (count !== 1 || first === this.#stopId) break;
      this.#take(first);
      out.push(first);
    }
    return out;
  }

  dispose(): void {
    this.#matcher?.dispose();
    this.#matcher = undefined;
    this.#ended = true;
  }
}

/** A factory of constraints for `schema` (one per sequence), ending at `stopId`; `flag` names the file in refusals. */
export async function jsonTextConstraint(schema: PlainJson, stopId: number, tokenizer: Tokenizer, flag: string): Promise<() => TextConstraint> {
  checkSchema(schema, flag);
  const engine = await grammarEngine(tokenizer);
  let grammar: CompiledText;
  try {
    grammar = await engine.jsonSchema(JSON.stringify(forEngine(schema)));
  } catch (error) {
    throw refuse(flag, `the schema cannot be compiled into a grammar: ${grammarErrorText(error)}`);
  }
  return () => new TextConstraint(grammar, stopId, tokenizer);
}
