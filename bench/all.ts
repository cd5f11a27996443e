/**
 * `bun run bench`: every benchmark in one process, each printing its figures next to the limit
 * it is measured against, cheapest first:
 *
 *   1. index      safetensors headers of the released checkpoint (497,220 names, 96 shards)
 *   2. kernels    bf16 / MXFP4 matmul against this machine's memory read bandwidth (T = 1)
 *                 and f64 FMA peak (T > 1), and the f64 contract's ceiling on this CPU
 *                 (bench/ceiling.ts: the inner loops alone)
 *   3. tokenizer  k3's loader and encoder against tiktoken (skipped without the real table)
 *   3b. attention the latent MLA kernel at released widths over 1k-32k cached positions, and the
 *                 planned cache of the released config
 *   3c. routing   the demo model's learned routing next to the random fixtures': routing entropy,
 *                 LRU and Belady hit rates (k3 sim-cache), --spec 4 acceptance (bench/routing.ts;
 *                 a run whose --spec 4 ids differ from plain decode fails)
 *   4. streaming  dist/k3 on the K3-width checkpoint: resident vs streamed trunk, against the
 *                 disk's O_DIRECT bandwidth (skipped with K3_BENCH_SKIP_STREAMING=1, or when the
 *                 disk cannot hold the ~15 GB of checkpoint and pack)
 *   5. prefill    the same checkpoint: a 256-id prompt in chunks against one id at a time,
 *                 resident and streamed (skipped with the streaming part)
 *   5b. long context the same checkpoint, resident: the decode step after an 8,192-id prompt
 *                 (prefilled in chunks once and kept as a state file) against the step after a
 *                 16-id prompt (skipped with the streaming part or K3_BENCH_SKIP_LONG=1)
 *   6. speculative the same checkpoint, streamed: one verification sweep against serial steps,
 *                 and --spec 4 against plain decode (skipped with the streaming part)
 *   6b. state     the same checkpoint, streamed: a state file's size, save and restore times
 *                 against plain writes and reads of as many bytes, a resumed run against a cold one,
 *                 and --tf-check against a chunked prefill (skipped with the streaming part)
 *   7. ultra      the same checkpoint: peak RSS of --preset ultra against --preset laptop, and
 *                 the laptop budgets with --ultra-low-memory (skipped with the streaming part)
 *   8. hybrid     the same checkpoint, streamed: plain decode against hybrid decode with the
 *                 int8 draft trunk (skipped with the streaming part)
 *   9. batch      the same checkpoint: 4 prompts decoded together (--batch --parallel 4)
 *                 against one after another, streamed at 1.5 GB and resident (skipped with the
 *                 streaming part)
 *  10. compressed the same checkpoint packed with --compress: stored size, decode GB/s against
 *                 the disk, streamed s/token against the plain pack, the experts' entropy
 *                 (skipped with the streaming part)
 *
 * Figures go to stdout, progress to stderr. Exits 1 when a benchmark found a correctness
 * failure (ids differing across budgets, tokenizer output differing from tiktoken, peak RSS
 * over the memory plan, ultra's peak RSS not below the laptop's by the tables, a draft that read
 * an expert, a resumed run or --tf-check disagreeing with an uninterrupted run, batched ids
 * differing from one-at-a-time ids, a compressed pack's ids differing from the plain one's).
 */
import { availableParallelism, cpus, loadavg, totalmem } from "node:os";
import { attentionReport, benchAttention } from "./attention.ts";
import { batchReport, benchBatch } from "./batch.ts";
import { benchCompressed, compressedReport } from "./compressed.ts";
import { benchIndex } from "./index-headers.ts";
import { benchKernels, kernelReport } from "./kernels.ts";
import { benchLongContext, longContextReport, longContextSkipReason } from "./long-context.ts";
import { benchPrefill, prefillReport } from "./prefill.ts";
import { benchSpeculative, speculativeReport } from "./speculative.ts";
import { benchState, stateReport } from "./state.ts";
import { benchHybrid, hybridReport } from "./hybrid.ts";
import { benchUltra, ultraReport } from "./ultra.ts";
import { measureRouting, routingReport, routingSources } from "./routing.ts";
import { benchStreaming, streamingReport, streamingSkipReason } from "./streaming.ts";
import { benchTokenizer } from "./tokenizer.ts";

const timings: [string, number][] = [];
let failed = false;

async function part(name: string, run: () => Promise<void> | void): Promise<void> {
  process.stderr.write(`[bench] ${name} ...\n`);
  const started = performance.now();
  try {
    await run();
  } catch (error) {
    failed = true;
    console.log(`${name}: ERROR ${(error as Error).stack ?? String(error)}`);
  }
  const seconds = (performance.now() - started) / 1000;
  timings.push([name, seconds]);
  process.stderr.write(`[bench] ${name} took ${seconds.toFixed(1)} s\n`);
}

const load = () => (loadavg()[0] ?? 0).toFixed(2);

console.log(
  `k3 bench: ${cpus()[0]?.model.trim() ?? "unknown CPU"}, ${availableParallelism()} CPUs, ${(totalmem() / 1e9).toFixed(1)} GB RAM; ` +
    `Bun ${Bun.version}; load average ${load()} at start`,
);

await part("index", () => {
  const index = benchIndex();
  console.log(
    `index: ${index.tensors} tensors in ${index.shards} shards (${(index.headerBytes / 1e6).toFixed(1)} MB of headers): ` +
      `median ${index.seconds.toFixed(3)} s of 5 (the original: ~0.27 s)`,
  );
});

await part("kernels", () => {
  const startLoad = load();
  const rows = benchKernels();
  console.log(`kernels: load average ${startLoad} before`);
  for (const line of kernelReport(rows, "  ")) console.log(line);
});

await part("tokenizer", () => {
  const r = benchTokenizer();
  if (r === undefined) {
    console.log("tokenizer: skipped (the real Kimi table is absent: set K3_KIMI_TOKENIZER to the directory with tiktoken.model and tokenizer_config.json)");
    return;
  }
  if (!r.identical) failed = true;
  console.log(
    `tokenizer: ${(r.inputBytes / 1e6).toFixed(2)} MB -> ${r.ids} ids (${r.identical ? "identical to" : "FAIL: DIFFERENT FROM"} tiktoken)\n` +
      `  load    k3 ${r.loadMs.toFixed(1)} ms (first of the process ${r.firstLoadMs.toFixed(1)} ms; target < 300)   tiktoken ${r.tiktokenLoadMs.toFixed(1)} ms\n` +
      `  encode  k3 ${r.encodeMBps.toFixed(2)} MB/s fresh, ${r.warmEncodeMBps.toFixed(2)} MB/s warm, ${r.firstEncodeMBps.toFixed(2)} MB/s first of the process   ` +
      `tiktoken ${r.tiktokenEncodeMBps.toFixed(2)} MB/s (target: k3 >= ${(r.tiktokenEncodeMBps / 2).toFixed(2)})`,
  );
});

await part("attention", () => {
  console.log(attentionReport(benchAttention()));
});

await part("routing", () => {
  console.log(`routing: load average ${load()} before`);
  for (const line of routingReport(routingSources().map(measureRouting))) console.log(line);
});

await part("streaming", async () => {
  const skip = streamingSkipReason();
  if (skip) {
    console.log(`streaming: skipped (${skip})`);
    return;
  }
  console.log(`streaming: load average ${load()} before`);
  const result = await benchStreaming();
  console.log(streamingReport(result));
  if (result.failures.length > 0) failed = true;
});

await part("prefill", async () => {
  const skip = streamingSkipReason();
  if (skip) {
    console.log(`prefill: skipped (${skip})`);
    return;
  }
  console.log(prefillReport(await benchPrefill()));
});

await part("long context", async () => {
  const skip = longContextSkipReason();
  if (skip) {
    console.log(`long context: skipped (${skip})`);
    return;
  }
  console.log(longContextReport(await benchLongContext()));
});

await part("speculative", async () => {
  const skip = streamingSkipReason();
  if (skip) {
    console.log(`speculative: skipped (${skip})`);
    return;
  }
  const result = await benchSpeculative();
  console.log(speculativeReport(result));
  if (!result.identical) failed = true;
});

await part("state", async () => {
  const skip = streamingSkipReason();
  if (skip) {
    console.log(`state: skipped (${skip})`);
    return;
  }
  const result = await benchState();
  console.log(stateReport(result));
  if (result.failures.length > 0) failed = true;
});

await part("ultra", async () => {
  const skip = streamingSkipReason();
  if (skip) {
    console.log(`ultra: skipped (${skip})`);
    return;
  }
  const result = await benchUltra();
  console.log(ultraReport(result));
  if (result.failures.length > 0) failed = true;
});

await part("hybrid", async () => {
  const skip = streamingSkipReason();
  if (skip) {
    console.log(`hybrid: skipped (${skip})`);
    return;
  }
  const result = await benchHybrid();
  console.log(hybridReport(result));
  if (result.failures.length > 0) failed = true;
});

await part("batch", async () => {
  const skip = streamingSkipReason();
  if (skip) {
    console.log(`batch: skipped (${skip})`);
    return;
  }
  const report = batchReport(await benchBatch());
  for (const line of report.lines) console.log(line);
  if (report.failed) failed = true;
});

await part("compressed", async () => {
  const skip = streamingSkipReason();
  if (skip) {
    console.log(`compressed: skipped (${skip})`);
    return;
  }
  const report = compressedReport(await benchCompressed());
  for (const line of report.lines) console.log(line);
  if (report.failed) failed = true;
});

console.log(`took: ${timings.map(([name, s]) => `${name} ${s.toFixed(1)} s`).join(", ")}; total ${timings.reduce((a, [, s]) => a + s, 0).toFixed(1)} s`);
if (failed) {
  console.log("bench: FAILED (see the FAIL lines above)");
  process.exit(1);
}
