/**
 * Two places where the reference's Python string handling decides ids: `str.isspace` (what
 * "whitespace-only" means for reasoning and tool arguments) and the released tokenizer's cutting
 * of one segment into pieces before encoding (chat.md 2.1 rule 4). Lengths are in code points,
 * as Python counts them.
 */

/** `str.isspace()` of one code point: Python's set, wider than JavaScript's `\s` in places. */
export function isPythonSpace(code: number): boolean {
  return (code >= 0x09 && code <= 0x0d) || (code >= 0x1c && code <= 0x20) || code === 0x85 || code === 0xa0 ||
    code === 0x1680 || (code >= 0x2000 && code <= 0x200a) || code === 0x2028 || code === 0x2029 ||
    code === 0x202f || code === 0x205f || code === 0x3000;
}

/** True when `text.strip()` would be empty. */
export function isBlank(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (!isPythonSpace(text.charCodeAt(i))) return false;
  return true;
}

/** The released tokenizer encodes at most this many characters at a time. */
export const ENCODE_CHUNK_CHARS = 400_000;
/** ...and cuts a run of more consecutive whitespace (or non-whitespace) characters than this. */
export const MAX_RUN_CHARS = 25_000;

/**
 * The pieces one text segment is encoded in: consecutive 400,000-character chunks, each cut
 * inside any run of more than 25,000 characters of one kind (space or not) so that no piece
 * holds a longer run. The counting restarts at every chunk. Ordinary text is one piece.
 */
export function encodePieces(text: string, chunkChars = ENCODE_CHUNK_CHARS, maxRun = MAX_RUN_CHARS): string[] {
  // A UTF-16 length bounds the code point count: short text cannot be cut.
  if (text.length <= Math.min(maxRun, chunkChars)) return text.length === 0 ? [] : [text];
  const pieces: string[] = [];
  let inChunk = 0;
  let pieceStart = 0;
  let runLength = 0;
  let runIsSpace = false;
  for (let i = 0; i < text.length; ) {
    const code = text.codePointAt(i) as number;
    const width = code > 0xffff ? 2 : 1;
    if (inChunk === chunkChars) {
      // A new chunk: its first character starts a new piece and a new run.
      pieces.push(text.slice(pieceStart, i));
      pieceStart = i;
      inChunk = 0;
      runLength = 0;
    }
    const space = isPythonSpace(code);
    if (runLength === 0 || space !== runIsSpace) {
      runIsSpace = space;
      runLength = 1;
    } else if (++runLength > maxRun) {
      pieces.push(text.slice(pieceStart, i));
      pieceStart = i;
      runLength = 1;
    }
    inChunk++;
    i += width;
  }
  pieces.push(text.slice(pieceStart));
  return pieces.filter((piece) => piece.length > 0);
}
