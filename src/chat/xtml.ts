/**
 * XTML as segments (chat.md 2.1-2.2): a control segment is one of the four structure tokens and
 * becomes its control id; a text segment is encoded on its own with special-token text kept as
 * ordinary text, so nothing a client writes can forge structure. Segments are never joined
 * before encoding: the split pattern would see across their boundary.
 */
import { controlNames } from "./specials.ts";

export type XtmlControl = "open" | "close" | "sep" | "endOfMessage";

export type Segment =
  | { readonly kind: "control"; readonly control: XtmlControl; readonly text: string }
  | { readonly kind: "text"; readonly text: string };

/** An attribute; an int value is written as Python's `str()` writes it. */
export type Attribute = readonly [key: string, value: string | number];

export function control(name: XtmlControl): Segment {
  return { kind: "control", control: name, text: controlNames[name] };
}

export function text(value: string): Segment {
  return { kind: "text", text: value };
}

/** `&` first, then `"`: nothing else is escaped, and element bodies never are. */
export function escapeAttribute(value: string): string {
  return value.replaceAll("&", "&amp;").replaceAll('"', "&quot;");
}

/**
 * `<|open|>tag key="value"...<|sep|>`. Each attribute is four text segments, ` key`, `="`, the
 * escaped value, `"` (vector G pins it: `="_private"` joined would encode as `="_` + `private`).
 */
export function openTag(tag: string, attributes: readonly Attribute[] = []): Segment[] {
  const out = [control("open"), text(tag)];
  for (const [key, value] of attributes) {
    out.push(text(` ${key}`), text('="'), text(escapeAttribute(String(value))), text('"'));
  }
  out.push(control("sep"));
  return out;
}

export function closeTag(tag: string): Segment[] {
  return [control("close"), text(tag), control("sep")];
}

/** The rendered text: every segment's text joined (for logs; never a valid encoder input). */
export function segmentText(segments: readonly Segment[]): string {
  return segments.map((segment) => segment.text).join("");
}
