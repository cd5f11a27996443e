/**
 * The dictionary every generated word is checked against: the npm package `word-list` (MIT,
 * a dev dependency), a newline-separated file of lowercase English words. It has no one-letter
 * words, so "a" and "I" are allowed explicitly, with the two proper names the brief allows.
 * Words containing a digit ("k3", "K3") are not checked; neither is the renderer's own XTML
 * structure (tags, attributes, notes), which the checker never sees: only generated text goes in.
 */
import { readFileSync } from "node:fs";
import wordListPath from "word-list";

/** Words allowed beyond the dictionary, lowercase. */
export const EXTRA_WORDS: readonly string[] = ["a", "i", "kimi", "moonshot"];

let dictionary: Set<string> | undefined;

export function loadDictionary(): Set<string> {
  if (dictionary === undefined) {
    const words = readFileSync(wordListPath, "utf8").split("\n").map((w) => w.trim()).filter((w) => w.length > 0);
    dictionary = new Set([...words, ...EXTRA_WORDS]);
  }
  return dictionary;
}

/** The word tokens of `text` the checker looks at: split on anything but letters and ', lowercased. */
export function wordsOf(text: string): string[] {
  return text.split(/[^A-Za-z0-9']+/).filter((w) => w.length > 0 && !/[0-9]/.test(w)).map((w) => w.toLowerCase());
}

/**
 * Counts every word of every text it is given and remembers the ones not in the dictionary
 * (with an example of where each appeared), so a run can fail listing all offenders at once.
 */
export class WordChecker {
  readonly counts = new Map<string, number>();
  readonly offenders = new Map<string, string>();
  private readonly dict = loadDictionary();

  check(text: string): void {
    for (const word of wordsOf(text)) {
      const seen = this.counts.get(word);
      this.counts.set(word, (seen ?? 0) + 1);
      if (seen === undefined && !this.dict.has(word)) this.offenders.set(word, text.slice(0, 120));
    }
  }

  /** Throws listing every offender, if any. */
  assertClean(): void {
    if (this.offenders.size === 0) return;
    const lines = [...this.offenders].sort(([a], [b]) => (a < b ? -1 : 1)).map(([word, where]) => `  ${JSON.stringify(word)} in ${JSON.stringify(where)}`);
    throw new Error(`${this.offenders.size} generated word(s) are not in the dictionary (word-list):\n${lines.join("\n")}`);
  }
}
