/**
 * Request bytes to text. A request that is not UTF-8 is refused with the place it breaks: a
 * silent U+FFFD would change the prompt without anyone seeing why.
 */

/** The text, or the byte offset of the first sequence that is not UTF-8. A BOM is kept as text. */
export function decodeUtf8(bytes: Uint8Array): { text: string } | { invalidAt: number } {
  try {
    return { text: new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes) };
  } catch {
    return { invalidAt: Math.max(firstInvalidUtf8(bytes), 0) };
  }
}

/** Offset of the first byte that does not start a well-formed sequence (RFC 3629), or -1. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i] as number;
    if (b < 0x80) {
      i++;
      continue;
    }
    let need: number;
    let low = 0x80;
    let high = 0xbf;
    if (b >= 0xc2 && b <= 0xdf) need = 1;
    else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      if (b === 0xe0) low = 0xa0; // overlong
      if (b === 0xed) high = 0x9f; // a surrogate
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      if (b === 0xf0) low = 0x90; // overlong
      if (b === 0xf4) high = 0x8f; // above U+10FFFF
    } else return i;
    if (i + need >= bytes.length) return i; // cut short by the end
    const second = bytes[i + 1] as number;
    if (second < low || second > high) return i;
    for (let k = 2; k <= need; k++) {
      const c = bytes[i + k] as number;
      if (c < 0x80 || c > 0xbf) return i;
    }
    i += need + 1;
  }
  return -1;
}
