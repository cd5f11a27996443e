/**
 * Many prompts on one open engine, up to `parallel` decoding at a time, their steps batched
 * (decode/step-batch.ts): each prompt's answer is the one a run of it alone gives (its own
 * sampler, seeded as that run's would be), and each is reported as soon as it is done.
 */
import { decode, type FinishReason, type SpeculationStats } from "../decode/loop.ts";
import { ngramDrafter } from "../decode/ngram-drafter.ts";
import type { Constraint } from "../decode/constraint.ts";
import { LogprobRecorder, type TokenLogprob } from "../decode/logprobs.ts";
import { createSampler } from "../decode/sampling.ts";
import type { SamplingOptions } from "../decode/sampling-options.ts";
import { StepBatcher, type BatchStats } from "../decode/step-batch.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { Engine } from "./open.ts";

export interface EachOptions {
  maxNewTokens: number;
  sampling: SamplingOptions;
  /** Ids per prefill call of one prompt. */
  prefillChunk: number;
  parallel: number;
  stopIds?: ReadonlySet<number>;
  tokenizer?: Tokenizer;
  /** Speculative decode with the n-gram drafter: up to this many drafted ids per sweep. */
  speculative?: number;
  /** Record each generated id's log-probability with this many alternatives. */
  logprobs?: number;
  /** A fresh constraint for each prompt (a JSON schema, --json-schema). */
  constraint?: () => Constraint & { dispose(): void };
}

export interface EachResult {
  index: number;
  promptIds: readonly number[];
  generatedIds: number[];
  generatedText: string | null;
  finishReason: FinishReason;
  speculation?: SpeculationStats;
  /** Batched steps this prompt took part in, and the rows of those steps, its own included. */
  steps: number;
  sharedRows: number;
  /** Its share of the bytes those steps read from disk (trunk and experts), by its rows in each. */
  bytesReadShare: number;
  /** With EachOptions.logprobs: one entry per generated id. */
  logprobs?: TokenLogprob[];
}

export interface EachSummary {
  prompts: number;
  generatedIds: number;
  seconds: number;
  batch: BatchStats;
  expertDrops: number;
  /** Bytes read from disk while they ran: the streamed trunk's (0 when resident) and the routed experts'. */
  trunkBytesRead: number;
  expertBytesRead: number;
}

export async function generateEach(
  engine: Engine, prompts: readonly (readonly number[])[], options: EachOptions, onResult: (result: EachResult) => void,
): Promise<EachSummary> {
  const started = performance.now();
  const { experts } = engine;
  const dropsBefore = experts.drops.length;
  const trunkRead = () => engine.streamed?.stats.bytesRead ?? 0;
  const trunkBefore = trunkRead();
  const expertsBefore = experts.total.bytesRead;
  const batcher = new StepBatcher(engine.model);
  // Per prompt: the batched steps it was in, their rows, and its share of what they read, counted by its state.
  const shared = new Map<unknown, { steps: number; rows: number; bytes: number }>();
  let trunkAtStep = 0;
  batcher.hooks = {
    before: (calls, rows) => {
      experts.beginStep();
      trunkAtStep = trunkRead();
      for (const call of calls) {
        const seen = shared.get(call.state);
        if (seen) {
          seen.steps++;
          seen.rows += rows;
        }
      }
    },
    after: (calls, rows) => {
      experts.endStep();
      const read = trunkRead() - trunkAtStep + experts.step.bytesRead;
      for (const call of calls) {
        const seen = shared.get(call.state);
        if (seen) seen.bytes += (read * call.ids.length) / rows;
      }
    },
  };
  let next = 0;
  let generatedIds = 0;
  const worker = async () => {
    while (next < prompts.length) {
      const index = next++;
      const prompt = prompts[index] as readonly number[];
      const state = engine.model.newState();
      const counts = { steps: 0, rows: 0, bytes: 0 };
      shared.set(state, counts);
      const recorder = options.logprobs === undefined ? undefined : new LogprobRecorder(options.sampling, options.logprobs);
      const constraint = options.constraint?.();
      const logprobs: TokenLogprob[] = [];
      try {
        const decoded = await decode(engine.model, prompt, {
          mode: "incremental", maxNewTokens: options.maxNewTokens, sampler: createSampler(options.sampling), stopIds: options.stopIds,
          onChosen: recorder && ((id, row) => { logprobs.push(recorder.record(id, row)); }),
          constraint,
          prefillChunk: options.prefillChunk, state, batch: batcher,
          speculative: options.speculative ? { drafter: ngramDrafter, maxDraft: options.speculative } : undefined,
        });
        generatedIds += decoded.generated.length;
        onResult({
          index, promptIds: prompt, generatedIds: decoded.generated,
          generatedText: options.tokenizer && decoded.generated.length > 0 ? options.tokenizer.decodeText(decoded.generated) : null,
          finishReason: decoded.finish, ...(decoded.speculation && { speculation: decoded.speculation }),
          steps: counts.steps, sharedRows: counts.rows, bytesReadShare: Math.round(counts.bytes),
          ...(recorder && { logprobs }),
        });
      } finally {
        constraint?.dispose();
        shared.delete(state);
        engine.model.release(state);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.parallel, prompts.length) }, worker));
  return {
    prompts: prompts.length, generatedIds, seconds: (performance.now() - started) / 1000, batch: { ...batcher.stats },
    expertDrops: experts.drops.length - dropsBefore,
    trunkBytesRead: trunkRead() - trunkBefore, expertBytesRead: experts.total.bytesRead - expertsBefore,
  };
}
