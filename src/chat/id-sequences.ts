/**
 * A choice among fixed id sequences (tag headers: `<|close|>think<|sep|>`, one `call` header per
 * declared tool): the ids allowed next are the next ids of the sequences still matching what came.
 * Each sequence is the renderer's own encoding of its segments, so a forced header is the id run
 * the model was trained on; with one sequence left, every id is forced.
 */
export interface Alternative<T> {
  readonly ids: readonly number[];
  readonly value: T;
}

export class IdSequences<T> {
  #live: Alternative<T>[];
  #at = 0;

  constructor(alternatives: readonly Alternative<T>[]) {
    if (alternatives.length === 0) throw new Error("IdSequences: no alternatives");
    for (const a of alternatives) if (a.ids.length === 0) throw new Error("IdSequences: an empty sequence");
    this.#live = [...alternatives];
  }

  /** The ids that may come next. */
  next(): number[] {
    return [...new Set(this.#live.map((a) => a.ids[this.#at] as number))];
  }

  /** Advances on `id`; the value of the sequence it completed, if one. A sequence that is a prefix of another never completes early: headers end in `<|sep|>`. */
  advance(id: number): { done: T } | undefined {
    this.#live = this.#live.filter((a) => a.ids[this.#at] === id);
    if (this.#live.length === 0) throw new Error(`IdSequences: id ${id} is not allowed here`);
    this.#at++;
    const complete = this.#live.find((a) => a.ids.length === this.#at);
    return complete ? { done: complete.value } : undefined;
  }
}
