/**
 * Server-sent events as /v1/chat/completions sends them (chat.md 4.4): `data: <json>` events
 * ended by a blank line, until `data: [DONE]`, and comment lines (`: text`), which k3 uses for
 * progress (progress.ts). Read line by line as the HTML standard's event-stream parser does:
 * text arrives in arbitrary pieces, so a line is only read once its end has arrived (LF, CRLF or
 * CR, a CRLF split between two pieces included), an event only once its blank line has.
 */

export type SseItem = { kind: "data"; data: string } | { kind: "comment"; text: string };

/**
 * A line or an event longer than this is refused: no event k3 sends comes near it (one token's
 * text, or one whole tool call), and the page's memory stays bounded whatever arrives.
 */
export const maxEventChars = 16 * 1024 * 1024;

export class SseTooLong extends Error {
  constructor() {
    super(`the server sent a stream line or event over ${maxEventChars} characters`);
  }
}

export class SseReader {
  /** The line so far (its end not yet come). */
  #line = "";
  /** The data lines of the event so far, and their characters. */
  #data: string[] = [];
  #dataChars = 0;
  /** The last piece ended with CR: an LF starting the next one belongs to it. */
  #afterCr = false;
  #done = false;

  /** True once `data: [DONE]` was read; nothing after it is given out. */
  get done(): boolean {
    return this.#done;
  }

  /** The comments and the data of every event completed by `text`, in the order they came. */
  push(text: string): SseItem[] {
    const out: SseItem[] = [];
    this.read(text, (item) => out.push(item));
    return out;
  }

  /**
   * `push`, each item handed to `take` as soon as it is read: when a later line is refused (or
   * `take` throws), what came before it has been taken, however the text was split.
   */
  read(text: string, take: (item: SseItem) => void): void {
    if (this.#done || text === "") return;
    let at = 0;
    if (this.#afterCr && text.startsWith("\n")) at = 1;
    this.#afterCr = false;
    while (at < text.length && !this.#done) {
      // Only the new text is searched: a long line arriving in many pieces costs its length once.
      const lf = text.indexOf("\n", at);
      const cr = text.indexOf("\r", at);
      const end = lf < 0 ? cr : cr < 0 ? lf : Math.min(lf, cr);
      if (end < 0) {
        this.#append(text.slice(at));
        break;
      }
      this.#append(text.slice(at, end));
      const line = this.#line;
      this.#line = "";
      at = end + 1;
      if (text[end] === "\r") {
        if (at === text.length) this.#afterCr = true;
        else if (text[at] === "\n") at++;
      }
      this.#take(line, take);
    }
  }

  #append(piece: string): void {
    if (this.#line.length + piece.length > maxEventChars) throw new SseTooLong();
    this.#line += piece;
  }

  #take(line: string, take: (item: SseItem) => void): void {
    if (line === "") {
      if (this.#data.length === 0) return;
      const data = this.#data.join("\n");
      this.#data = [];
      this.#dataChars = 0;
      if (data === "[DONE]") {
        this.#done = true;
        this.#line = "";
        return;
      }
      take({ kind: "data", data });
      return;
    }
    const colon = line.indexOf(":");
    if (colon === 0) {
      take({ kind: "comment", text: line.slice(line.startsWith(": ") ? 2 : 1) });
      return;
    }
    // A field: its name, and its value after the colon and one optional space (none: empty).
    const name = colon < 0 ? line : line.slice(0, colon);
    if (name !== "data") return; // event names, ids and retry carry nothing this page needs
    const value = colon < 0 ? "" : line.slice(line.startsWith("data: ") ? 6 : 5);
    this.#dataChars += value.length + 1;
    if (this.#dataChars > maxEventChars) throw new SseTooLong();
    this.#data.push(value);
  }
}
