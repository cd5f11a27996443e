/**
 * Tokenizer benchmark: k3's loader and encoder against tiktoken (the official Rust core as WASM)
 * on the same ~1 MB input with the real Kimi table. Targets: load under 300 ms; encode within 2x
 * of tiktoken. Run alone with `bun bench/tokenizer.ts`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Tiktoken } from "tiktoken";
import { loadTokenizer } from "../src/tokenizer/index.ts";
import { KIMI_PATTERN } from "../src/tokenizer/pattern.ts";
import type { Tokenizer } from "../src/tokenizer/tokenizer.ts";
import { concatBytes, concatSources, KIMI_DIR, readCases, readMultilingual, REPO_ROOT, specialsOf } from "../test/fixtures/tokenizer/support.ts";

export interface TokenizerBench {
  /** Input size in bytes (UTF-8). */
  inputBytes: number;
  /** Ids produced (identical for both encoders, or `identical` is false). */
  ids: number;
  identical: boolean;
  /** Median of 5 `loadTokenizer` calls: both files read and parsed, hash table built. */
  loadMs: number;
  /**
   * The first `loadTokenizer` call of the process, before the JIT has compiled the loader: what
   * a one-shot CLI run pays. Only cold when this benchmark is the process's first tokenizer use.
   */
  firstLoadMs: number;
  /** The first encode of the process (JIT cold, cache empty), on the same input. */
  firstEncodeMBps: number;
  /** Median of 5 encodes, each by a freshly loaded tokenizer (its piece cache starts empty). */
  encodeMBps: number;
  /** Median of 5 encodes by one tokenizer, the input already seen (every short piece cached). */
  warmEncodeMBps: number;
  /** Median of 3: reading `tiktoken.model` as text and constructing `Tiktoken`. */
  tiktokenLoadMs: number;
  /** Median of 5 `Tiktoken.encode(text, "all")`. */
  tiktokenEncodeMBps: number;
}

const INPUT_BYTES = 1_000_000;

/** ~1 MB of this repository's code and docs with the multilingual fixture woven through. */
export function benchInput(): string {
  const multilingual = readMultilingual();
  const parts = [
    concatSources(join(REPO_ROOT, "src"), [".ts"]), multilingual, concatSources(join(REPO_ROOT, "zig"), [".zig"]), multilingual,
    concatSources(join(REPO_ROOT, "test"), [".ts"]), multilingual, concatSources(join(REPO_ROOT, "tools"), [".ts", ".py"]),
    new Uint8Array(readFileSync(join(REPO_ROOT, "README.md"))), ...readCases().map((c) => c.bytes), multilingual,
  ];
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (let i = 0; total < INPUT_BYTES; i++) {
    const part = parts[i % parts.length] as Uint8Array;
    chunks.push(part);
    total += part.length;
  }
  const text = new TextDecoder().decode(concatBytes(chunks));
  // Cut at a line end near 1 MB so no character is split.
  let cut = INPUT_BYTES;
  const bytes = new TextEncoder().encode(text);
  while (cut > 0 && bytes[cut - 1] !== 0x0a) cut--;
  return new TextDecoder().decode(bytes.subarray(0, cut));
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

function timed<T>(run: () => T): [T, number] {
  const started = performance.now();
  const result = run();
  return [result, performance.now() - started];
}

/** The figures, or undefined when the real table is absent (the caller says it skipped). */
export function benchTokenizer(dir: string | undefined = KIMI_DIR): TokenizerBench | undefined {
  if (dir === undefined) return undefined;
  const text = benchInput();
  const inputBytes = Buffer.byteLength(text);
  const megabytes = inputBytes / 1e6;

  const loads: number[] = [];
  const fresh: Tokenizer[] = [];
  let firstLoadMs = 0;
  for (let i = 0; i < 6; i++) {
    const [tokenizer, ms] = timed(() => loadTokenizer(dir));
    if (i === 0) firstLoadMs = ms; // also pays for compiling the loader
    else loads.push(ms);
    fresh.push(tokenizer);
  }
  const warmup = fresh.shift() as Tokenizer;
  // The first encode compiles the encoder; later runs measure steady-state code.
  const [ids, firstEncodeMs] = timed(() => warmup.encode(text));
  const cold = fresh.map((tokenizer) => timed(() => tokenizer.encode(text))[1]);
  const warm = Array.from({ length: 5 }, () => timed(() => warmup.encode(text))[1]);

  const tiktokenLoads: number[] = [];
  let encoder: Tiktoken | undefined;
  for (let i = 0; i < 3; i++) {
    encoder?.free();
    const [made, ms] = timed(() => new Tiktoken(readFileSync(join(dir, "tiktoken.model"), "utf8"), specialsOf(warmup), KIMI_PATTERN));
    tiktokenLoads.push(ms);
    encoder = made;
  }
  const reference = (encoder as Tiktoken).encode(text, "all");
  const tiktokenRuns = Array.from({ length: 5 }, () => timed(() => (encoder as Tiktoken).encode(text, "all"))[1]);
  (encoder as Tiktoken).free();

  return {
    inputBytes,
    ids: ids.length,
    identical: ids.length === reference.length && ids.every((id, i) => id === reference[i]),
    loadMs: median(loads),
    firstLoadMs,
    firstEncodeMBps: megabytes / (firstEncodeMs / 1000),
    encodeMBps: megabytes / (median(cold) / 1000),
    warmEncodeMBps: megabytes / (median(warm) / 1000),
    tiktokenLoadMs: median(tiktokenLoads),
    tiktokenEncodeMBps: megabytes / (median(tiktokenRuns) / 1000),
  };
}

if (import.meta.main) {
  const result = benchTokenizer();
  if (result === undefined) {
    console.log("tokenizer: skipped (no real Kimi table; set K3_KIMI_TOKENIZER)");
  } else {
    const r = result;
    console.log(
      `tokenizer: ${(r.inputBytes / 1e6).toFixed(2)} MB -> ${r.ids} ids (${r.identical ? "identical to" : "DIFFERENT FROM"} tiktoken)\n` +
        `  load    k3 ${r.loadMs.toFixed(1)} ms (first of the process ${r.firstLoadMs.toFixed(1)} ms; target < 300)   ` +
        `tiktoken ${r.tiktokenLoadMs.toFixed(1)} ms\n` +
        `  encode  k3 ${r.encodeMBps.toFixed(2)} MB/s fresh, ${r.warmEncodeMBps.toFixed(2)} MB/s warm, ` +
        `${r.firstEncodeMBps.toFixed(2)} MB/s first of the process   ` +
        `tiktoken ${r.tiktokenEncodeMBps.toFixed(2)} MB/s (target: k3 >= ${(r.tiktokenEncodeMBps / 2).toFixed(2)})`,
    );
  }
}
