/** What several targets start from: the fixture models, a packed trunk of tiny13, tokenizer dirs. */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { expectation, fixturesDir, modelDir, packTrunkOf } from "../support/fixtures.ts";
import type { FuzzContext } from "./harness.ts";

export const tinyModel = modelDir("tiny13");
export const nestedModel = modelDir("nested14");
export const chatTokenizer = join(fixturesDir, "chat-tokenizer");
/** The byte-level tokenizer (256 ranks, one per byte): every id it makes fits tiny13's vocabulary. */
export const byteTokenizer = join(fixturesDir, "byte-tokenizer");
/** The demo model's BPE tokenizer (3840 ranks and the K3 control ids). */
export const demoTokenizer = resolve(import.meta.dir, "../../assets/demo");
/** The prompt every model run feeds: tiny13's oracle prompt. */
export const promptIds = expectation("tiny13").prompt_ids.join(",");

/** The arguments of a short greedy run whose JSON results go to stdout. */
export const runTail = ["--ids", promptIds, "--gen", "2", "--out", "-"];

/** The ids of a run's `--out -` results: what must not change when the input means the same. */
export function runIds(stdout: string): string {
  try {
    return JSON.stringify((JSON.parse(stdout) as { full_ids?: unknown }).full_ids);
  } catch {
    return stdout;
  }
}

/** tiny13 packed into the run's work directory, once. */
export function tinyPack(ctx: FuzzContext): string {
  const dir = join(ctx.work, "tiny13-pack");
  if (existsSync(join(dir, "trunk.json"))) return dir;
  mkdirSync(dir, { recursive: true });
  packTrunkOf(tinyModel, dir);
  return dir;
}

export const read = (path: string): Uint8Array => new Uint8Array(readFileSync(path));
export const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);
export const utf8 = (value: string): Uint8Array => new TextEncoder().encode(value);

/** `dir` made afresh a copy of `from` by symlinks, except for `but`; returns `dir`. */
export function linkDir(dir: string, from: string, but?: string): string {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const entry of readdirSync(from)) if (entry !== but) symlinkSync(join(from, entry), join(dir, entry));
  return dir;
}

/** `dir` made a copy of `from` (symlinks) with the file `name` replaced by `bytes`; returns its path. */
export function dirWith(dir: string, from: string, name: string, bytes: Uint8Array): string {
  linkDir(dir, from, name);
  writeFileSync(join(dir, name), bytes);
  return join(dir, name);
}

/** Text with plain words, digits, non-ASCII and the special tokens both tokenizers list. */
export const tokenizerText = utf8("Hello, world! 123 [BOS]caf\u00e9 <|end_of_msg|> \u4e16\u754c\n\ttabs  and  spaces[EOS]");

/** A streamed greedy run of tiny13 from the pack `pack` with its trunk.bin replaced by `input`, under `dir`. */
export function trunkBinRun(input: Uint8Array, pack: string, dir: string): { args: string[]; names: string[] } {
  const trunk = join(dir, "trunk");
  dirWith(trunk, pack, "trunk.bin", input);
  return { args: [tinyModel, "--trunk", trunk, "--trunk-gb", "0", ...runTail], names: [trunk] };
}
