/**
 * --include / --exclude: shell-style patterns over repository paths, as `hf download` reads its
 * allow and ignore patterns (fnmatch): `*` matches any run of characters, `/` included; `?` one
 * character; `[abc]`, `[a-z]` and `[!abc]` one character of (or not of) a set. A file is kept
 * when it matches some include (or none were given) and no exclude.
 */
import { usageError } from "../errors.ts";

export const maxPatternLength = 1024;

const escapeRegExp = (text: string) => text.replace(/[\\^$.*+?()[\]{}|/]/g, "\\$&");
/** Inside a set only these need escaping (and in unicode mode nothing else may be escaped). */
const escapeInSet = (text: string) => text.replace(/[\\\]^[-]/g, "\\$&");

/** The pattern as an anchored regular expression; a usage error naming `flag` if malformed. */
export function patternRegExp(pattern: string, flag: string): RegExp {
  if (pattern.length === 0) throw usageError(`${flag}: an empty pattern`);
  if (pattern.length > maxPatternLength) throw usageError(`${flag}: a pattern longer than ${maxPatternLength} characters`);
  let source = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i] as string;
    if (c === "*") {
      // Runs of stars mean one star: no nested quantifiers to backtrack over.
      while (pattern[i + 1] === "*") i++;
      source += "[\\s\\S]*";
    } else if (c === "?") {
      source += "[\\s\\S]";
    } else if (c === "[") {
      const close = pattern.indexOf("]", i + 2);
      if (close < 0) throw usageError(`${flag}: '${pattern}' has a '[' without its ']'`);
      let body = pattern.slice(i + 1, close);
      const negate = body.startsWith("!");
      if (negate) body = body.slice(1);
      if (body.length === 0) throw usageError(`${flag}: '${pattern}' has an empty set []`);
      let set = "";
      for (let j = 0; j < body.length; j++) {
        const from = body[j] as string;
        if (body[j + 1] === "-" && j + 2 < body.length) {
          const to = body[j + 2] as string;
          if (to < from) throw usageError(`${flag}: '${pattern}' has the reversed range ${from}-${to}`);
          set += `${escapeInSet(from)}-${escapeInSet(to)}`;
          j += 2;
        } else {
          set += escapeInSet(from);
        }
      }
      source += `[${negate ? "^" : ""}${set}]`;
      i = close;
    } else {
      source += escapeRegExp(c);
    }
  }
  return new RegExp(`^${source}$`, "u");
}

export interface FileSelection {
  include: RegExp[];
  exclude: RegExp[];
  /** The patterns as given, for the record. */
  includeText: string[];
  excludeText: string[];
}

export const emptySelection = (): FileSelection => ({ include: [], exclude: [], includeText: [], excludeText: [] });

/** Adds the comma-separated patterns of one --include or --exclude. */
export function addPatterns(selection: FileSelection, raw: string, kind: "include" | "exclude"): void {
  for (const pattern of raw.split(",").map((p) => p.trim())) {
    const regexp = patternRegExp(pattern, `--${kind}`);
    selection[kind].push(regexp);
    selection[kind === "include" ? "includeText" : "excludeText"].push(pattern);
  }
}

export function isSelected(path: string, selection: FileSelection): boolean {
  if (selection.include.length > 0 && !selection.include.some((r) => r.test(path))) return false;
  return !selection.exclude.some((r) => r.test(path));
}
