/**
 * Server-sent events as /v1/chat/completions sends them (chat.md 4.4): `data: <json>` events
 * separated by a blank line, ending with `data: [DONE]`. Text arrives in arbitrary pieces, so an
 * event is only given out once its blank line has arrived.
 */
export class SseReader {
  #pending = "";
  #done = false;

  /** True once `data: [DONE]` was read; nothing after it is given out. */
  get done(): boolean {
    return this.#done;
  }

  /** The data of every event completed by `text`, in order. */
  push(text: string): string[] {
    if (this.#done) return [];
    this.#pending += text.replace(/\r\n?/g, "\n");
    const out: string[] = [];
    for (let end = this.#pending.indexOf("\n\n"); end >= 0; end = this.#pending.indexOf("\n\n")) {
      const block = this.#pending.slice(0, end);
      this.#pending = this.#pending.slice(end + 2);
      // Lines other than data (comments, event names, ids) carry nothing this page needs.
      const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(line.startsWith("data: ") ? 6 : 5));
      if (data.length === 0) continue;
      const payload = data.join("\n");
      if (payload === "[DONE]") {
        this.#done = true;
        this.#pending = "";
        break;
      }
      out.push(payload);
    }
    return out;
  }
}
