/**
 * The released Kimi split pattern (runtime.md 10.2), as text. The engine does not run it: the
 * pre-tokenizer (`pretokenize.ts`) is a hand-written matcher over UTF-8 bytes that replays this
 * pattern's backtracking order. The text is kept so that tests can hand the very same pattern to
 * the oracles (tiktoken, and JavaScript's own regex engine) and compare.
 */

/** The eight alternatives, in order, in the fancy-regex syntax of the release (`&&` intersects). */
export const KIMI_PATTERN_ALTERNATIVES: readonly string[] = [
  String.raw`[\p{Han}]+`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?`,
  String.raw`\p{N}{1,3}`,
  String.raw` ?[^\s\p{L}\p{N}]+[\r\n]*`,
  String.raw`\s*[\r\n]+`,
  String.raw`\s+(?!\S)`,
  String.raw`\s+`,
];

/** The pattern exactly as `tokenization_kimi.py` joins it (what tiktoken is given). */
export const KIMI_PATTERN = KIMI_PATTERN_ALTERNATIVES.join("|");

/**
 * The same pattern for JavaScript's `v`-flag regex engine. Two rewrites, both forced by syntax:
 * `\p{Han}` is spelled `\p{Script=Han}` (JavaScript has no bare script names), and `\s`/`\S` are
 * spelled `\p{White_Space}`/`\P{White_Space}` because JavaScript's `\s` is a different set
 * (it adds U+FEFF and lacks U+0085). `&&` inside a class is native `v`-flag intersection, and
 * the `(?i:...)` modifier group is supported by Bun's JavaScriptCore.
 */
export function kimiPatternForJs(): RegExp {
  const source = KIMI_PATTERN_ALTERNATIVES.map((alternative) =>
    alternative
      .replaceAll(String.raw`\p{Han}`, String.raw`\p{Script=Han}`)
      .replaceAll(String.raw`[^\s\p{L}\p{N}]`, String.raw`[^\p{White_Space}\p{L}\p{N}]`)
      .replaceAll(String.raw`(?!\S)`, String.raw`(?!\P{White_Space})`)
      .replaceAll(String.raw`\s`, String.raw`\p{White_Space}`)
      // In `v` mode a nested class needs its own brackets on both sides of `&&`.
      .replaceAll(String.raw`[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&`, String.raw`[[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]&&`)
      .replaceAll(String.raw`[\p{Ll}\p{Lm}\p{Lo}\p{M}&&`, String.raw`[[\p{Ll}\p{Lm}\p{Lo}\p{M}]&&`),
  );
  return new RegExp(source.join("|"), "gv");
}
