/** The options of `k3 <model_dir>`: one table for parsing, validation and usage text. */
import { defaultGeneratedTokens, defaultPrefillChunk, maxGeneratedTokens, maxParallel } from "../plan/limits.ts";
import type { DecodeMode } from "../decode/loop.ts";
import type { BudgetAction, BudgetRequest } from "../plan/budget.ts";
import { parseIdList, parseInteger, type OptionDef, type PositionalDef } from "./args.ts";
import type { CommandInfo } from "./usage.ts";
import { configOption, helpOption, layersOption, prefillChunkOption, requirePath, tokOption } from "./common-options.ts";
import { memoryOptions } from "./memory-options.ts";
import { samplingOptions, type SamplingTarget } from "./sampling-options.ts";
import { speculationDefaults, speculationOptions, type SpeculationTarget } from "./speculation-options.ts";

export interface RunOptions extends SpeculationTarget {
  modelDir: string;
  /** Prompt sources in the order given; exactly one is allowed. */
  promptSources: string[];
  /** The prompt option's raw value (ids text, "-", text or path); resolved after the config. */
  promptValue: string;
  tokDir: string | undefined;
  ids: number[];
  gen: number;
  configPath: string | undefined;
  mode: DecodeMode;
  /** JSON results path; "-" is stdout. */
  out: string;
  dumpLogits: string | undefined;
  layers: number | undefined;
  /** Budget options in argv order: a later one wins (runtime.md 1.4). */
  budgets: BudgetAction[];
  trunkDir: string | undefined;
  dumpCacheTrace: string | undefined;
  sampling: SamplingTarget["sampling"];
  prefillChunk: number;
  saveState: string | undefined;
  loadState: string | undefined;
  /** Teacher-forced check: one forward over the prompt, argmax agreement, no decoding. */
  tfCheck: boolean;
  /** --batch: sequences decoded together. */
  parallel: number;
  /** Whether --out was given (--batch writes to stdout unless it was). */
  outGiven: boolean;
  /** Whether --parallel was given (it needs --batch). */
  parallelGiven: boolean;
  /** With --batch: each generated id's log-probability and this many alternatives (0-5). */
  logprobs: number | undefined;
  /** The continuation (each --batch line's) is JSON that validates against the schema in this file. */
  jsonSchema: string | undefined;
}

/** The run's options, and the decision its budget options make (ultra-low-memory or not), taken once here. */
export interface ParsedRun extends RunOptions {
  budgetRequest: BudgetRequest;
}

export function defaultRunOptions(): RunOptions {
  return {
    modelDir: "", promptSources: [], promptValue: "", tokDir: undefined, ids: [], gen: defaultGeneratedTokens, configPath: undefined,
    mode: "incremental", out: "k3_run.json", dumpLogits: undefined, layers: undefined,
    budgets: [], trunkDir: undefined, dumpCacheTrace: undefined, sampling: {}, prefillChunk: defaultPrefillChunk,
    ...speculationDefaults, saveState: undefined, loadState: undefined, tfCheck: false, parallel: 1, outGiven: false, parallelGiven: false, logprobs: undefined, jsonSchema: undefined,
  };
}

export const runPositionals: readonly PositionalDef[] = [
  { name: "model_dir", description: "Directory holding the .safetensors shards and config.json (first argument)" },
];

const noop = () => {};

export const runOptionTable: readonly OptionDef<RunOptions>[] = [
  {
    name: "ids", value: "1,2,3",
    description: "Prompt as raw token ids, separated by commas and/or spaces; '-' reads them from stdin",
    apply: (o, raw, flag) => {
      o.promptSources.push(flag);
      o.promptValue = raw;
      if (raw !== "-") o.ids = parseIdList(raw, flag);
    },
  },
  {
    name: "prompt", value: "TEXT",
    description: "Prompt as text, tokenized with --tok (a raw prompt gets a raw continuation)",
    apply: (o, raw, flag) => {
      o.promptSources.push(flag);
      o.promptValue = raw;
    },
  },
  {
    name: "prompt-file", value: "PATH",
    description: "Prompt text read verbatim from PATH (best for anything non-ASCII), tokenized with --tok",
    apply: (o, raw, flag) => {
      o.promptSources.push(flag);
      o.promptValue = requirePath(raw, flag);
    },
  },
  {
    name: "batch", value: "FILE",
    description: "Prompts, one per line (ids as --ids takes them, or text as a JSON string, with --tok), decoded --parallel at a time; one JSON line per prompt on stdout, in order",
    apply: (o, raw, flag) => {
      o.promptSources.push(flag);
      o.promptValue = requirePath(raw, flag);
    },
  },
  {
    name: "json-schema", value: "FILE",
    description: "The continuation (each --batch line's) is JSON that validates against the schema in FILE, ended by <|end_of_msg|> (needs --tok)",
    apply: (o, raw, flag) => { o.jsonSchema = requirePath(raw, flag); },
  },
  {
    name: "logprobs", value: "N",
    description: "With --batch: each line reports every generated id's log-probability and its N most likely alternatives (0 to 5, the completions API's shape)",
    apply: (o, raw, flag) => {
      o.logprobs = parseInteger(raw, flag, 0, 5);
    },
  },
  {
    name: "parallel", value: "N",
    description: `With --batch: prompts decoded together, each step one read of the weights for all (1 to ${maxParallel}, default 1)`,
    apply: (o, raw, flag) => {
      o.parallel = parseInteger(raw, flag, 1, maxParallel);
      o.parallelGiven = true;
    },
  },
  tokOption("Tokenizer directory (tiktoken.model + tokenizer_config.json), normally the model directory"),
  {
    name: "gen", value: "N",
    description: `Tokens to generate, 0 to ${maxGeneratedTokens} (default ${defaultGeneratedTokens})`,
    apply: (o, raw, flag) => {
      o.gen = parseInteger(raw, flag, 0, maxGeneratedTokens);
    },
  },
  {
    name: "incremental",
    description: "Prefill once, then one token per step carrying KDA, conv and MLA state (the default)",
    apply: (o) => { o.mode = "incremental"; },
  },
  {
    name: "recompute",
    description: "Recompute the whole prefix every step (the O(T^2) validation path)",
    apply: (o) => { o.mode = "recompute"; },
  },
  ...memoryOptions<RunOptions>(),
  prefillChunkOption<RunOptions>(),
  ...samplingOptions<RunOptions>("default 0: the run command decodes greedily"),
  ...speculationOptions<RunOptions>(),
  {
    name: "save-state", value: "FILE",
    description: "After the run, write the sequence state and its ids to FILE (resume it with --load-state)",
    apply: (o, raw, flag) => { o.saveState = requirePath(raw, flag); },
  },
  {
    name: "load-state", value: "FILE",
    description: "Resume a state written by --save-state: its ids come before this run's prompt (which may then be left out)",
    apply: (o, raw, flag) => { o.loadState = requirePath(raw, flag); },
  },
  {
    name: "tf-check", description: "Teacher-forced check: the argmax at every prompt position against the next id, then exit without decoding",
    apply: (o) => { o.tfCheck = true; },
  },
  {
    name: "dump-cache-trace", value: "DIR",
    description: "Write the expert request trace and histogram into DIR (which must exist) at the end",
    apply: (o, raw, flag) => { o.dumpCacheTrace = requirePath(raw, flag); },
  },
  {
    name: "out", value: "FILE",
    description: "JSON results file, '-' for stdout (default k3_run.json)",
    apply: (o, raw, flag) => {
      o.out = requirePath(raw, flag);
      o.outGiven = true;
    },
  },
  {
    name: "dump-logits", value: "PATH",
    description: "Write the first step's logits as raw little-endian float32 ('-' for stdout)",
    apply: (o, raw, flag) => { o.dumpLogits = requirePath(raw, flag); },
  },
  layersOption("Bind only the first N layers (the output is then not the full model)"),
  configOption(),
  { name: "list-presets", description: "Print the memory presets and exit", apply: noop },
  { name: "version", description: "Print the version and exit", apply: noop },
  helpOption,
];

export const runCommand: CommandInfo<RunOptions> = {
  name: "k3",
  description: "Run Kimi K3 from a checkpoint directory",
  positionals: runPositionals,
  options: runOptionTable,
};
