/**
 * Where speculative drafts come from (runtime.md 9): the n-gram lookup over the sequence itself,
 * or a draft model (hybrid decode). A drafter only proposes; the exact model verifies every id
 * before it is emitted, so a drafter can make decoding faster or slower, never different.
 */

export interface Drafter {
  /**
   * Up to `max` ids to verify next. `sequence` is every id so far (prompt and emitted); its last
   * id is pending: emitted, not yet fed to the exact model. An empty list means no draft: the
   * step runs exactly as without speculation.
   */
  propose(sequence: readonly number[], max: number): number[];
  /**
   * After each forward of the exact model: `fed` is every id it has fed so far, in order. A
   * drafter with a state of its own brings it to the same point (feeding what it lacks, or
   * restoring and replaying what it guessed wrong); the n-gram drafter needs nothing.
   */
  sync?(fed: readonly number[]): void;
  /** Releases what the drafter holds. */
  close?(): void;
}

/** The most ids one sweep drafts (runtime.md 9.1: N is clamped to 8). */
export const maxDraftIds = 8;
