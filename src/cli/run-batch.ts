/**
 * `k3 <model_dir> --batch FILE [--parallel N]`: every prompt of FILE (cli/batch-file.ts says
 * how it is written), decoded up to N at a time with their steps batched, so each step reads
 * the weights once for all of them. Each prompt's answer is the one `k3 <model_dir>` gives it
 * alone with the same options (the same --seed too); one JSON line per prompt, in the file's
 * order, on stdout as soon as it and those before it are done (or to --out, whole, at the end).
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { resolveSampling, samplingDefaults } from "../decode/sampling-options.ts";
import type { TokenLogprob } from "../decode/logprobs.ts";
import { generateEach, type EachResult } from "../engine/generate-each.ts";
import { finiteLogprob, legacyLogprobs } from "../serve/logprob-shapes.ts";
import { stopIfSignalled } from "../native/signals.ts";
import { ExitCode, usageError, type ExitCodeValue } from "../errors.ts";
import { readOrFail, writeAtomically } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { emit, log } from "../report/log.ts";
import { runInvalidReport } from "../report/run-report.ts";
import { loadTokenizer, type Tokenizer } from "../tokenizer/index.ts";
import { formatBytes } from "../units.ts";
import { parseBatchLines } from "./batch-file.ts";
import { schemaConstraint } from "./json-schema-option.ts";
import { injectedFaults, injectedTrunkReadFaults, tokMissingMessage } from "./common-options.ts";
import { openForRun } from "./execute.ts";
import { checkInVocabulary, checkRequest } from "./prompt.ts";
import type { ParsedRun } from "./run-options.ts";

/**
 * The completions API's legacy shape when there is a tokenizer (each id's text); without one, the
 * ids themselves: `{"ids", "token_logprobs", "top_logprobs": [{id: logprob}]}`.
 */
function batchLogprobs(entries: readonly TokenLogprob[], tokenizer: Tokenizer | undefined) {
  if (tokenizer) return legacyLogprobs(entries, tokenizer);
  return {
    ids: entries.map((e) => e.id), token_logprobs: entries.map((e) => finiteLogprob(e.logprob)),
    top_logprobs: entries.map((e) => Object.fromEntries(e.top.map((t) => [String(t.id), finiteLogprob(t.logprob)]))),
  };
}

export interface BatchContext {
  config: ModelConfig;
  configShape: string;
  layerCount: number;
}

/** The file's prompts as ids, each checked as `--ids` would be, with the line that holds it named. */
function batchPrompts(options: ParsedRun, context: BatchContext): { prompts: number[][]; tokenizer: Tokenizer | undefined } {
  const path = options.promptValue;
  const lines = parseBatchLines(new TextDecoder().decode(readOrFail(path, "--batch", inputLimits.promptTextBytes)), path);
  const tokenizer = options.tokDir ? loadTokenizer(options.tokDir) : undefined;
  const prompts = lines.map((line, i) => {
    const where = `--batch ${path}: line ${i + 1}`;
    let ids: number[];
    if (line.kind === "ids") {
      ids = line.ids;
    } else {
      if (!tokenizer) throw usageError(`${where}: ${tokMissingMessage("text")}`);
      ids = tokenizer.encode(line.text); // as --prompt encodes it
      if (ids.length === 0) throw usageError(`${where}: the text has no ids`);
    }
    checkInVocabulary(ids, context.config.vocabSize, where);
    checkRequest(ids.length, options.gen, 0, where);
    return ids;
  });
  return { prompts, tokenizer };
}

/** One prompt's JSON line: the fields a run's results give it, and how it shared its steps. */
function resultLine(r: EachResult, tokenizer: Tokenizer | undefined): string {
  return `${JSON.stringify({
    index: r.index, prompt_ids: r.promptIds, generated_ids: r.generatedIds, generated_text: r.generatedText, finish_reason: r.finishReason,
    ...(r.logprobs && { logprobs: batchLogprobs(r.logprobs, tokenizer) }),
    usage: { prompt_tokens: r.promptIds.length, completion_tokens: r.generatedIds.length },
    ...(r.speculation && { speculation: r.speculation }),
    batch: { steps: r.steps, shared_rows: r.sharedRows, bytes_read_share: r.bytesReadShare },
  })}\n`;
}

export async function runBatchFile(options: ParsedRun, context: BatchContext): Promise<ExitCodeValue> {
  const { prompts, tokenizer } = batchPrompts(options, context);
  const schema = options.jsonSchema === undefined ? undefined : await schemaConstraint(options.jsonSchema, tokenizer);
  const longest = prompts.reduce((a, b) => (b.length > a.length ? b : a));
  const sampling = resolveSampling(options.sampling, samplingDefaults.run);
  using engine = openForRun({
    modelDir: options.modelDir, config: context.config, configShape: context.configShape, layerCount: context.layerCount,
    layersRequested: options.layers ?? context.config.numLayers, prompt: longest, maxNewTokens: options.gen, mode: "incremental",
    prefillChunk: options.prefillChunk, sampling, budgets: options.budgetRequest, trunkDir: options.trunkDir, tokenizer,
    speculative: options.spec, batch: { parallel: options.parallel },
    faults: injectedFaults(), trunkReadFaults: injectedTrunkReadFaults(),
  });
  log.info(`batch: ${prompts.length} prompt(s) from ${options.promptValue}, up to ${options.parallel} decoded together`);
  // In the file's order: a result waits for those before it, then goes out at once (stdout) or at the end (--out).
  const ready = new Map<number, string>();
  const lines: string[] = [];
  let written = 0;
  const summary = await generateEach(engine, prompts, {
    maxNewTokens: options.gen, sampling, prefillChunk: options.prefillChunk, parallel: options.parallel, tokenizer, speculative: options.spec, logprobs: options.logprobs,
    ...(schema && { constraint: schema.make, stopIds: schema.stopIds }),
  }, (result) => {
    ready.set(result.index, resultLine(result, tokenizer));
    for (let line = ready.get(written); line !== undefined; line = ready.get(written)) {
      ready.delete(written);
      written++;
      if (options.out === "-") emit(line);
      else lines.push(line);
    }
  });
  const b = summary.batch;
  log.info(
    `batch: ${summary.prompts} prompt(s), ${summary.generatedIds} generated ids in ${summary.seconds.toFixed(2)} s ` +
      `(${(summary.generatedIds / Math.max(summary.seconds, 1e-9)).toFixed(1)} ids/s); ${b.steps} batched steps, ` +
      `${b.steps > 0 ? (b.sequences / b.steps).toFixed(2) : "0"} sequences and ${b.steps > 0 ? (b.rows / b.steps).toFixed(1) : "0"} rows a step on average (at most ${b.maxSequences} and ${b.maxRows})`,
  );
  const perId = (bytes: number) => formatBytes(bytes / Math.max(summary.generatedIds, 1));
  log.info(
    `batch: read from disk ${formatBytes(summary.trunkBytesRead)} of trunk and ${formatBytes(summary.expertBytesRead)} of experts, ` +
      `${perId(summary.trunkBytesRead + summary.expertBytesRead)} per generated id (trunk_bytes=${summary.trunkBytesRead} expert_bytes=${summary.expertBytesRead})`,
  );
  stopIfSignalled();
  if (options.out !== "-") {
    writeAtomically(options.out, lines.join(""), "the batch results", "--out");
    log.info(`wrote ${options.out}`);
  }
  if (summary.expertDrops > 0) {
    process.stderr.write(`${runInvalidReport(engine.experts.drops)}\n`);
    return ExitCode.corruptTokens;
  }
  return ExitCode.ok;
}
