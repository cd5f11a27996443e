/**
 * Bytes in, text out, one token at a time (chat.md 2.9): a trailing partial UTF-8 sequence is
 * held until the next bytes complete it, so no U+FFFD is ever emitted for a character that is
 * still arriving. Bytes that can never become a character are U+FFFD at once, and `end` turns a
 * sequence the run cut short into U+FFFD: the deltas joined are exactly a one-shot decode of
 * all the bytes (WHATWG's maximal-subpart replacement, as `decodeText` gives for a whole run).
 */
export class Utf8Stream {
  // ignoreBOM keeps a U+FEFF the model wrote: it is content, not a byte-order mark.
  private decoder = new TextDecoder("utf-8", { ignoreBOM: true });
  private pending = false;

  /** The text the bytes complete; incomplete trailing bytes wait for the next call. */
  push(bytes: Uint8Array): string {
    if (bytes.length === 0) return "";
    this.pending = true;
    return this.decoder.decode(bytes, { stream: true });
  }

  /** The run is over: whatever was held, with U+FFFD for a sequence that never completed. */
  end(): string {
    if (!this.pending) return "";
    this.pending = false;
    const rest = this.decoder.decode();
    this.decoder = new TextDecoder("utf-8", { ignoreBOM: true });
    return rest;
  }
}
