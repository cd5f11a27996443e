/**
 * --include / --exclude: shell-style patterns over repository paths, as `hf download` reads its
 * allow and ignore patterns (fnmatch): `*` matches any run of characters, `/` included; `?` one
 * character; `[abc]`, `[a-z]` and `[!abc]` one character of (or not of) a set. A file is kept
 * when it matches some include (or none were given) and no exclude.
 *
 * Matching is the two-pointer wildcard walk, not a regular expression: paths come from the Hub,
 * and a pattern with many stars must not backtrack exponentially over a long one. It takes at
 * most (path length x pattern length) steps.
 */
import { usageError } from "../errors.ts";

export const maxPatternLength = 1024;

type Token = { star: true } | { star: false; accepts: (c: string) => boolean };

export interface Pattern {
  text: string;
  test: (path: string) => boolean;
}

function setToken(body: string, pattern: string, flag: string): Token {
  const negate = body.startsWith("!");
  const chars = [...(negate ? body.slice(1) : body)];
  if (chars.length === 0) throw usageError(`${flag}: '${pattern}' has an empty set []`);
  const singles = new Set<string>();
  const ranges: [string, string][] = [];
  for (let j = 0; j < chars.length; j++) {
    const from = chars[j] as string;
    if (chars[j + 1] === "-" && j + 2 < chars.length) {
      const to = chars[j + 2] as string;
      if ((to.codePointAt(0) as number) < (from.codePointAt(0) as number)) throw usageError(`${flag}: '${pattern}' has the reversed range ${from}-${to}`);
      ranges.push([from, to]);
      j += 2;
    } else {
      singles.add(from);
    }
  }
  const inSet = (c: string) => {
    if (singles.has(c)) return true;
    const code = c.codePointAt(0) as number;
    return ranges.some(([a, b]) => code >= (a.codePointAt(0) as number) && code <= (b.codePointAt(0) as number));
  };
  return { star: false, accepts: (c) => inSet(c) !== negate };
}

/** The pattern compiled; a usage error naming `flag` if malformed. */
export function compilePattern(pattern: string, flag: string): Pattern {
  if (pattern.length === 0) throw usageError(`${flag}: an empty pattern`);
  if (pattern.length > maxPatternLength) throw usageError(`${flag}: a pattern longer than ${maxPatternLength} characters`);
  const chars = [...pattern];
  const tokens: Token[] = [];
  for (let i = 0; i < chars.length; i++) {
    const c = chars[i] as string;
    if (c === "*") {
      if (tokens.at(-1)?.star !== true) tokens.push({ star: true });
    } else if (c === "?") {
      tokens.push({ star: false, accepts: () => true });
    } else if (c === "[") {
      // A ']' right after '[' (or '[!') is a member, as in fnmatch.
      const first = chars[i + 1] === "!" ? i + 2 : i + 1;
      const close = chars.indexOf("]", first + 1);
      if (close < 0) throw usageError(`${flag}: '${pattern}' has a '[' without its ']'`);
      tokens.push(setToken(chars.slice(i + 1, close).join(""), pattern, flag));
      i = close;
    } else {
      tokens.push({ star: false, accepts: (x) => x === c });
    }
  }
  return { text: pattern, test: (path) => matches(tokens, [...path]) };
}

function matches(tokens: readonly Token[], text: readonly string[]): boolean {
  let p = 0;
  let t = 0;
  let starAt = -1;
  let starText = 0;
  while (t < text.length) {
    const token = tokens[p];
    if (token && !token.star && token.accepts(text[t] as string)) {
      p++;
      t++;
    } else if (token?.star) {
      starAt = p++;
      starText = t;
    } else if (starAt >= 0) {
      p = starAt + 1;
      t = ++starText;
    } else {
      return false;
    }
  }
  while (tokens[p]?.star) p++;
  return p === tokens.length;
}

export interface FileSelection {
  include: Pattern[];
  exclude: Pattern[];
  /** The patterns as given, for the record. */
  includeText: string[];
  excludeText: string[];
}

export const emptySelection = (): FileSelection => ({ include: [], exclude: [], includeText: [], excludeText: [] });

/** Adds the comma-separated patterns of one --include or --exclude. */
export function addPatterns(selection: FileSelection, raw: string, kind: "include" | "exclude"): void {
  for (const text of raw.split(",").map((p) => p.trim())) {
    selection[kind].push(compilePattern(text, `--${kind}`));
    selection[kind === "include" ? "includeText" : "excludeText"].push(text);
  }
}

export function isSelected(path: string, selection: FileSelection): boolean {
  if (selection.include.length > 0 && !selection.include.some((p) => p.test(path))) return false;
  return !selection.exclude.some((p) => p.test(path));
}
