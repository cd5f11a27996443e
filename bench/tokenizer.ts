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
import { Figures, type PartReport } from "./results.ts";

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

/** Why the part does not run here, or undefined when the real table is there. */
export function tokenizerSkipReason(dir: string | undefined = KIMI_DIR): string | undefined {
  return dir === undefined
    ? "the real Kimi table is absent: set K3_KIMI_TOKENIZER to the directory with tiktoken.model and tokenizer_config.json"
    : undefined;
}

/** Issue targets: load under this many milliseconds; encode at least this share of tiktoken's rate. */
const loadTargetMs = 300;
const encodeTargetShare = 0.5;

export function tokenizerReport(r: TokenizerBench): PartReport {
  const figures = new Figures("tokenizer");
  const budget = { what: "the load budget (under 300 ms)", value: loadTargetMs, unit: "ms" };
  const load = figures.add("load", "k3 load: both files read and parsed, hash table built (median of 5)", r.loadMs, "ms", budget, { max: 1, source: "issue target" });
  const first = figures.add("load.first", "k3 load, the first of the process (what a one-shot run pays)", r.firstLoadMs, "ms", budget);
  const tiktokenLoad = figures.add("tiktoken.load", "tiktoken load: tiktoken.model read and Tiktoken constructed (median of 3)", r.tiktokenLoadMs, "ms",
    "the reference k3's load sits beside (not a limit)");
  const tiktoken = figures.add("tiktoken.encode", `tiktoken encode of ${(r.inputBytes / 1e6).toFixed(2)} MB (median of 5)`, r.tiktokenEncodeMBps, "MB/s",
    "the reference: k3's encode rates are measured against it");
  const versus = { what: "tiktoken's encode rate, measured in this run", value: r.tiktokenEncodeMBps, unit: "MB/s" };
  const fresh = figures.add("encode.fresh", "k3 encode, each by a freshly loaded tokenizer (median of 5)", r.encodeMBps, "MB/s", versus, { min: encodeTargetShare, source: "issue target (within 2x of tiktoken)" });
  const warm = figures.add("encode.warm", "k3 encode, the input already seen (median of 5)", r.warmEncodeMBps, "MB/s", versus);
  const firstEncode = figures.add("encode.first", "k3 encode, the first of the process", r.firstEncodeMBps, "MB/s", versus);
  const failures = r.identical ? [] : [`k3's ${r.ids} ids differ from tiktoken's on the same input`];
  return {
    lines: [
      `tokenizer: ${(r.inputBytes / 1e6).toFixed(2)} MB -> ${r.ids} ids (${r.identical ? "identical to" : "FAIL: DIFFERENT FROM"} tiktoken)`,
      `  load    k3 ${load.value.toFixed(1)} ms (first of the process ${first.value.toFixed(1)} ms; target < ${loadTargetMs}: ${load.target?.met ? "met" : "NOT met"})   tiktoken ${tiktokenLoad.value.toFixed(1)} ms`,
      `  encode  k3 ${fresh.value.toFixed(2)} MB/s fresh, ${warm.value.toFixed(2)} MB/s warm, ${firstEncode.value.toFixed(2)} MB/s first of the process   ` +
        `tiktoken ${tiktoken.value.toFixed(2)} MB/s (target: k3 >= ${(tiktoken.value * encodeTargetShare).toFixed(2)}: ${fresh.target?.met ? "met" : "NOT met"})`,
    ],
    figures: figures.list,
    failures,
  };
}

if (import.meta.main) {
  const skip = tokenizerSkipReason();
  const result = benchTokenizer();
  if (skip !== undefined || result === undefined) {
    console.log(`tokenizer: skipped (${skip})`);
  } else {
    const report = tokenizerReport(result);
    for (const line of report.lines) console.log(line);
    if (report.failures.length > 0) process.exit(1);
  }
}
