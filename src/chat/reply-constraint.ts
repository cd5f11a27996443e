/**
 * The K3 reply structure as a constraint (chat.md 2.8, 4.8), decided on ids as the reply parser
 * decides it (parse.ts): with thinking on, free reasoning until `<|close|>`, then
 * `think<|sep|><|open|>response<|sep|>` forced; the response section's text (free, or JSON from a
 * grammar); then, by the tool choice, a tools section of calls to declared tools only, each
 * argument in its XTML form (chat.md 2.6.3: `type` from the parameter's schema, strings raw, other
 * values JSON from a grammar), or none; then `<|close|>message<|sep|>` and a stop id. Tag headers
 * are the renderer's own id runs (IdSequences), so where one header is possible it is forced.
 *
 * Text inside a section is ordinary ids only: a control id there would change the structure, so
 * the mask allows exactly the control id that ends the section.
 */
import { maskCount, maskOf, maskSet, maskWords, type Constraint, type TokenMask } from "../decode/constraint.ts";
import type { CompiledText, TextMatcher } from "../grammar/engine.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import { encodeSegments } from "./encode.ts";
import { controlIds, stopIds, type ControlIds } from "./specials.ts";
import { closeTag, openTag, type Segment } from "./xtml.ts";
import { IdSequences } from "./id-sequences.ts";
import { Utf8Guard } from "./utf8-guard.ts";

/** A section's text: any ordinary ids, or what a compiled grammar allows. */
export type TextRule = { readonly kind: "free" } | { readonly kind: "grammar"; readonly grammar: CompiledText };

/** The `type` attribute of an argument (chat.md 2.6.3). */
export type ArgumentType = "string" | "number" | "boolean" | "null" | "object" | "array";

export interface ArgumentShape {
  readonly key: string;
  /** Each type the parameter's schema allows, with the rule its value text follows. */
  readonly types: readonly { readonly type: ArgumentType; readonly value: TextRule }[];
}

export interface ToolShape {
  readonly name: string;
  /** In declaration order; only these keys are written. */
  readonly arguments: readonly ArgumentShape[];
  readonly required: ReadonlySet<string>;
}

export type ToolMode =
  | { readonly kind: "none" }
  /** `auto`: the reply may end after the response or open a tools section; `required`: it must. */
  | { readonly kind: "auto" | "required"; readonly tools: readonly ToolShape[] }
  /** A named function: exactly one call, to it. */
  | { readonly kind: "named"; readonly tool: ToolShape };

export interface ReplyShape {
  readonly thinking: boolean;
  readonly content: TextRule;
  readonly tools: ToolMode;
  /** Paths of tool-schema keywords not enforced (reply-shape.ts withoutUnenforced), reported with the reply. */
  readonly unenforced: readonly string[];
}

type Next = () => Phase;

type Phase =
  | { readonly kind: "free"; readonly ends: number; readonly then: Next }
  | { readonly kind: "text"; readonly grammar: CompiledText; matcher?: TextMatcher; readonly utf8: Utf8Guard; readonly ends: number; readonly then: Next }
  | { readonly kind: "sequence"; readonly choice: IdChoice }
  | { readonly kind: "stop" }
  | { readonly kind: "ended" };

type IdChoice = IdSequences<Next>;

/** Ids of the vocabulary a section's free text may use: every ordinary id. */
function ordinaryMask(tokenizer: Tokenizer, vocabSize: number): TokenMask {
  const mask = new Int32Array(maskWords(vocabSize));
  const n = Math.min(tokenizer.rankCount, vocabSize);
  for (let w = 0; w < n >>> 5; w++) mask[w] = -1;
  for (let id = n & ~31; id < n; id++) maskSet(mask, id);
  return mask;
}

export class ReplyConstraint implements Constraint {
  readonly #controls: ControlIds;
  readonly #stops: readonly number[];
  readonly #vocabSize: number;
  readonly #tokenizer: Tokenizer;
  readonly #ordinary: TokenMask;
  readonly #shape: ReplyShape;
  #phase: Phase;
  /** The mask of the current phase, once asked (forced ids and the next choice share it). */
  #mask: TokenMask | undefined;
  #calls = 0;

  constructor(shape: ReplyShape, tokenizer: Tokenizer, vocabSize: number) {
    this.#tokenizer = tokenizer;
    this.#controls = controlIds(tokenizer);
    this.#stops = [...stopIds(this.#controls)];
    this.#vocabSize = vocabSize;
    this.#ordinary = ordinaryMask(tokenizer, vocabSize);
    this.#shape = shape;
    this.#phase = shape.thinking ? this.#reasoning() : this.#content();
  }

  /** Tool calls the structure has completed so far. */
  get calls(): number {
    return this.#calls;
  }

  async allowed(): Promise<TokenMask | undefined> {
    if (this.#mask) return this.#mask;
    const phase = this.#phase;
    let mask: TokenMask;
    if (phase.kind === "free") {
      mask = this.#ordinary.slice();
      maskSet(mask, phase.ends);
    } else if (phase.kind === "text") {
      phase.matcher ??= await phase.grammar.matcher(phase.ends);
      mask = phase.utf8.restrict(await phase.matcher.mask());
    } else if (phase.kind === "sequence") {
      mask = maskOf(this.#vocabSize, phase.choice.next());
    } else if (phase.kind === "stop") {
      mask = maskOf(this.#vocabSize, this.#stops);
    } else {
      // After the stop id nothing is generated; the loop ends there.
      return undefined;
    }
    this.#mask = mask;
    return mask;
  }

  accept(id: number): void {
    this.#take(id);
  }

  #take(id: number): void {
    const phase = this.#phase;
    this.#mask = undefined;
    if (phase.kind === "free") {
      if (id === phase.ends) this.#phase = phase.then();
      else if (id >= this.#tokenizer.rankCount) throw new Error(`reply constraint: control id ${id} inside a section`);
    } else if (phase.kind === "text") {
      if (!phase.matcher?.advance(id)) throw new Error(`reply constraint: the grammar refused id ${id}`);
      phase.utf8.advance(id);
      if (id === phase.ends) {
        phase.matcher.dispose();
        this.#phase = phase.then();
      }
    } else if (phase.kind === "sequence") {
      const done = phase.choice.advance(id);
      if (done) this.#phase = done.done();
    } else if (phase.kind === "stop") {
      this.#phase = { kind: "ended" };
    }
  }

  async takeForced(limit: number): Promise<number[]> {
    const out: number[] = [];
    while (out.length < limit && (this.#phase.kind === "sequence" || this.#phase.kind === "text")) {
      const mask = await this.allowed();
      if (!mask) break;
      const { count, first } = maskCount(mask, this.#vocabSize);
      if (count !== 1) break;
      this.#take(first);
      out.push(first);
    }
    return out;
  }

  /** Frees a grammar matcher left open (a reply cut by its budget or cancelled). */
  dispose(): void {
    if (this.#phase.kind === "text") this.#phase.matcher?.dispose();
    this.#phase = { kind: "ended" };
  }

  #ids(segments: readonly Segment[]): number[] {
    return encodeSegments(segments, this.#tokenizer).ids;
  }

  #sequence(alternatives: readonly { segments: readonly Segment[]; skip?: number; then: Next }[]): Phase {
    return { kind: "sequence", choice: new IdSequences(alternatives.map((a) => ({ ids: this.#ids(a.segments).slice(a.skip ?? 0), value: a.then }))) };
  }

  /** A section's text, ended by `<|close|>`; the rest of the closing tag `tag` is forced, then `then`. */
  #section(rule: TextRule, tag: string, then: Next): Phase {
    const close = this.#controls.close;
    const after = () => this.#sequence([{ segments: closeTag(tag), skip: 1, then }]);
    return rule.kind === "free" ? { kind: "free", ends: close, then: after } : { kind: "text", grammar: rule.grammar, utf8: new Utf8Guard(this.#tokenizer), ends: close, then: after };
  }

  #reasoning(): Phase {
    // The think section closes, and the response section opens: one forced run.
    const close = this.#controls.close;
    return {
      kind: "free", ends: close,
      then: () => this.#sequence([{ segments: [...closeTag("think"), ...openTag("response")], skip: 1, then: () => this.#content() }]),
    };
  }

  #content(): Phase {
    return this.#section(this.#shape.content, "response", () => this.#afterResponse());
  }

  #end(): Next {
    return () => ({ kind: "stop" });
  }

  #afterResponse(): Phase {
    const tools = this.#shape.tools;
    const closeMessage = { segments: closeTag("message"), then: this.#end() };
    if (tools.kind === "none") return this.#sequence([closeMessage]);
    const open = { segments: openTag("tools"), then: () => this.#toolsSection(1) };
    return this.#sequence(tools.kind === "auto" ? [open, closeMessage] : [open]);
  }

  /** Call number `index` (1-based) may open; after the first call the section may close instead. */
  #toolsSection(index: number): Phase {
    const tools = this.#shape.tools;
    const callable = tools.kind === "named" ? (index === 1 ? [tools.tool] : []) : tools.kind === "none" ? [] : tools.tools;
    const calls = callable.map((tool) => ({
      segments: openTag("call", [["tool", tool.name], ["index", index]]),
      then: () => this.#arguments(tool, new Set(), index),
    }));
    const close = index > 1 ? [{ segments: [...closeTag("tools"), ...closeTag("message")], then: this.#end() }] : [];
    return this.#sequence([...calls, ...close]);
  }

  #arguments(tool: ToolShape, used: ReadonlySet<string>, index: number): Phase {
    const options = tool.arguments.filter((a) => !used.has(a.key)).flatMap((argument) =>
      argument.types.map(({ type, value }) => ({
        segments: openTag("argument", [["key", argument.key], ["type", type]]),
        then: () => this.#section(value, "argument", () => this.#arguments(tool, new Set([...used, argument.key]), index)),
      })));
    const complete = [...tool.required].every((key) => used.has(key));
    const close = complete
      ? [{ segments: closeTag("call"), then: () => {
        this.#calls++;
        return this.#toolsSection(index + 1);
      } }]
      : [];
    return this.#sequence([...options, ...close]);
  }
}
