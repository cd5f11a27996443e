/**
 * One generation loop (src/decode/loop.ts decode()): run, chat and serve all generate through
 * it, so stop ids, cancellation, speculation and the finish reasons are defined once. A token
 * is chosen by a sampler's choose() or, greedily, by argmax(); this test reads every source file
 * and fails when either appears where it may not, as layers.test.ts does for imports.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";

const root = resolve(import.meta.dir, "../../..");
const src = join(root, "src");

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sourceFiles(path) : path.endsWith(".ts") ? [path] : [];
  });
}

/** The file's code without its comments (a comment may name choose() freely). */
const codeOf = (path: string) => readFileSync(path, "utf8").replace(/\/\*[\s\S]*?\*\//g, "").replace(/\/\/.*$/gm, "");

/** The source files (relative to the repository) whose code matches `pattern`. */
function callers(pattern: RegExp): string[] {
  return sourceFiles(src).filter((file) => pattern.test(codeOf(file))).map((file) => relative(root, file)).sort();
}

describe("one token loop under src/", () => {
  test("only decode() asks a sampler for a token, or tells it which one was taken", () => {
    expect(callers(/\.choose\s*\(/)).toEqual(["src/decode/loop.ts"]);
    expect(callers(/\.accept\s*\??\.?\s*\(/)).toEqual(["src/decode/loop.ts"]);
  });

  test("argmax() is called only where no reply is generated", () => {
    // sampler.ts and sampling.ts: greedy choice itself (a Sampler, used by decode); model-drafter.ts: a
    // draft's proposals, each verified by decode; teacher-forced.ts: the argmax at prompt positions, no decoding.
    expect(callers(/(?<![\w.])argmax\s*\(/)).toEqual([
      "src/decode/model-drafter.ts", "src/decode/sampler.ts", "src/decode/sampling.ts", "src/decode/teacher-forced.ts",
    ]);
  });

  test("the scanner sees calls and ignores comments", () => {
    expect(/\.choose\s*\(/.test("const t = s.choose(logits);")).toBe(true);
    expect(/\.choose\s*\(/.test(codeOf(join(src, "decode/sampler.ts")))).toBe(false); // declared there, in an interface, as choose(
  });
});
