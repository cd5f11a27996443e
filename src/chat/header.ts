/**
 * A tag header (chat.md 2.2): the ordinary tokens between `<|open|>` or `<|close|>` and the next
 * `<|sep|>`, decoded to text: a tag name, then ` key="value"` attributes whose values were
 * escaped with `&` -> `&amp;` first and `"` -> `&quot;` second.
 */
export interface Header {
  readonly name: string;
  readonly attributes: ReadonlyMap<string, string>;
}

const NAME = /^[^\s"=]+/;
const ATTRIBUTE = /\s+([^\s="]+)="([^"]*)"/y;
const TRAILING_SPACE = /\s*$/y;

/** The header's name and attributes, or undefined when the text is not header-shaped. */
export function parseHeader(text: string): Header | undefined {
  const name = NAME.exec(text)?.[0];
  if (name === undefined) return undefined;
  const attributes = new Map<string, string>();
  let at = name.length;
  for (;;) {
    ATTRIBUTE.lastIndex = at;
    const match = ATTRIBUTE.exec(text);
    if (match === null) break;
    attributes.set(match[1] as string, unescapeAttribute(match[2] as string));
    at = ATTRIBUTE.lastIndex;
  }
  TRAILING_SPACE.lastIndex = at;
  TRAILING_SPACE.exec(text);
  return TRAILING_SPACE.lastIndex === text.length ? { name, attributes } : undefined;
}

/**
 * Undoes the renderer's escaping. `&quot;` goes first (chat.md 2.9): a value holding the text
 * `&quot;` was rendered `&amp;quot;`, which must come back as `&quot;`, not as `"`.
 */
export function unescapeAttribute(value: string): string {
  return value.replaceAll("&quot;", "\"").replaceAll("&amp;", "&");
}
