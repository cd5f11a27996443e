/**
 * The release's per-shard table (src/fetch/release-shards.ts) against the spec's run-length table
 * (runtime.md 11.2), derived here independently: 96 entries, the names, every size, the total.
 * Also the --include/--exclude patterns the downloader selects shards with.
 */
import { describe, expect, test } from "bun:test";
import { K3Error } from "../../../src/errors.ts";
import { addPatterns, emptySelection, isSelected, compilePattern } from "../../../src/fetch/file-patterns.ts";
import { releaseShardCount, releaseShards, releaseTotalBytes } from "../../../src/fetch/release-shards.ts";

/** runtime.md 11.2, row by row. */
function specSize(index: number): number {
  if (index === 1) return 2_341_216_112;
  if ([2, 3, 5, 6, 7, 9, 10].includes(index)) return 16_990_911_504;
  if (index === 4 || index === 8) return 16_567_501_776;
  if ((index >= 12 && index <= 88 && index % 4 === 0) || index === 92 || index === 93) return 16_567_507_176;
  if (index >= 11 && index <= 91) return 16_990_916_912;
  return ({ 94: 4_697_664_072, 95: 92_289_328, 96: 802_448_352 } as Record<number, number>)[index] ?? Number.NaN;
}

describe("the release shard table", () => {
  test("96 entries, named model-NNNNN-of-000096.safetensors, each the spec's size, 1,560,936,091,448 bytes in all", () => {
    expect(releaseShards.length).toBe(96);
    expect(releaseShardCount).toBe(96);
    releaseShards.forEach((shard, i) => {
      expect(shard.name).toBe(`model-${String(i + 1).padStart(5, "0")}-of-000096.safetensors`);
      expect(shard.bytes).toBe(specSize(i + 1));
    });
    const total = releaseShards.reduce((sum, s) => sum + s.bytes, 0);
    expect(total).toBe(1_560_936_091_448);
    expect(releaseTotalBytes).toBe(total);
  });

  test("the run-length counts of the spec: 1 + 7 + 2 + 61 + 22 + 1 + 1 + 1", () => {
    const counts = new Map<number, number>();
    for (const s of releaseShards) counts.set(s.bytes, (counts.get(s.bytes) ?? 0) + 1);
    expect(counts.get(16_990_911_504)).toBe(7);
    expect(counts.get(16_567_501_776)).toBe(2);
    expect(counts.get(16_990_916_912)).toBe(61);
    expect(counts.get(16_567_507_176)).toBe(22);
  });
});

describe("--include / --exclude patterns", () => {
  test("fnmatch semantics: * crosses /, ? one character, sets and ranges, negation", () => {
    const cases: [string, string, boolean][] = [
      ["model-0009[56]-*", "model-00095-of-000096.safetensors", true],
      ["model-0009[56]-*", "model-00094-of-000096.safetensors", false],
      ["*.json", "config.json", true], ["*.json", "sub/dir/x.json", true], ["*.json", "x.jsonl", false],
      ["?.bin", "a.bin", true], ["?.bin", "ab.bin", false], ["[!a-c]x", "dx", true], ["[!a-c]x", "bx", false],
      ["a.b", "axb", false], ["(x)+", "(x)+", true], ["***", "anything/at/all", true],
    ];
    for (const [pattern, path, expected] of cases) expect(compilePattern(pattern, "--x").test(path)).toBe(expected);
  });

  test("selection: includes, then excludes; malformed patterns are usage errors naming the flag", () => {
    const s = emptySelection();
    addPatterns(s, "*.safetensors,config.json", "include");
    addPatterns(s, "model-0009[56]-*", "exclude");
    expect(isSelected("model-00001-of-000096.safetensors", s)).toBe(true);
    expect(isSelected("model-00096-of-000096.safetensors", s)).toBe(false);
    expect(isSelected("config.json", s)).toBe(true);
    expect(isSelected("README.md", s)).toBe(false);
    for (const [raw, message] of [["[abc", "without its ']'"], ["a,,b", "an empty pattern"], ["[z-a]", "reversed range"], ["x".repeat(2000), "longer than"]]) {
      let error: unknown;
      try {
        addPatterns(emptySelection(), raw as string, "exclude");
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(K3Error);
      expect((error as K3Error).exitCode).toBe(2);
      expect((error as Error).message).toContain(message as string);
      expect((error as Error).message).toContain("--exclude");
    }
  });

  test("many stars over a long path: the walk answers (a backtracking regular expression would not, here)", () => {
    expect(compilePattern("*a*a*a*a*a*a*a*a*a*b", "--x").test("a".repeat(1000))).toBe(false);
    expect(compilePattern("*a*a*a*a*a*a*a*a*a*b", "--x").test(`${"a".repeat(1000)}b`)).toBe(true);
    expect(compilePattern("[]]x", "--x").test("]x")).toBe(true);
    expect(compilePattern("[!]]x", "--x").test("ax")).toBe(true);
  });
});
