/**
 * Text between sections (state G of chat.md 2.9): whitespace there is layout and is dropped,
 * anything else is content. Streaming means trailing whitespace is held until something other
 * than whitespace follows it; if the section ends first, it was layout after all.
 */
export class TrimmedText {
  private started = false;
  private held = "";

  /** The part of `text` that is certainly content now. */
  push(text: string): string {
    const all = this.held + text;
    const body = this.started ? all : all.trimStart();
    const kept = body.trimEnd();
    this.held = body.slice(kept.length);
    if (kept.length > 0) this.started = true;
    return kept;
  }

  /** The section ended: held whitespace is dropped, and the next section starts afresh. */
  reset(): void {
    this.started = false;
    this.held = "";
  }
}
