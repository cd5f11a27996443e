/**
 * Segments to ids (chat.md 2.1): a control segment is its control id, found by name; a text
 * segment is encoded alone with special-token text as ordinary text, in the pieces the released
 * tokenizer cuts it into (python-text.ts). No [BOS] is added.
 */
import type { Tokenizer } from "../tokenizer/index.ts";
import { encodePieces } from "./python-text.ts";
import { controlIds } from "./specials.ts";
import type { Segment } from "./xtml.ts";

export interface EncodedSegments {
  readonly ids: number[];
  /** `starts[i]` is the index in `ids` where segment i begins; `starts[segments.length]` is `ids.length`. */
  readonly starts: number[];
}

export function encodeSegments(segments: readonly Segment[], tokenizer: Tokenizer): EncodedSegments {
  const controls = controlIds(tokenizer);
  const ids: number[] = [];
  const starts: number[] = [];
  for (const segment of segments) {
    starts.push(ids.length);
    if (segment.kind === "control") {
      ids.push(controls[segment.control]);
      continue;
    }
    for (const piece of encodePieces(segment.text)) {
      for (const id of tokenizer.encode(piece, { ordinary: true })) ids.push(id);
    }
  }
  starts.push(ids.length);
  return { ids, starts };
}
