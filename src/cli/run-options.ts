/** The options of `k3 <model_dir>`: one table for parsing, validation and usage text. */
import { usageError } from "../errors.ts";
import { defaultGeneratedTokens, maxGeneratedTokens } from "../plan/limits.ts";
import type { DecodeMode } from "../decode/greedy.ts";
import { parseIdList, parseInteger, type OptionDef, type PositionalDef } from "./args.ts";

export interface RunOptions {
  modelDir: string;
  /** Prompt sources in the order given; exactly one is allowed. */
  promptSources: string[];
  ids: number[];
  gen: number;
  configPath: string | undefined;
  mode: DecodeMode;
  /** JSON results path; "-" is stdout. */
  out: string;
  dumpLogits: string | undefined;
  layers: number | undefined;
}

export function defaultRunOptions(): RunOptions {
  return {
    modelDir: "", promptSources: [], ids: [], gen: defaultGeneratedTokens, configPath: undefined,
    mode: "incremental", out: "k3_run.json", dumpLogits: undefined, layers: undefined,
  };
}

const requirePath = (raw: string, flag: string) => {
  if (raw.length === 0) throw usageError(`${flag} needs a path`);
  return raw;
};

export const runPositionals: readonly PositionalDef[] = [
  { name: "model_dir", description: "Directory holding the .safetensors shards and config.json (first argument)" },
];

const noop = () => {};

export const runOptionTable: readonly OptionDef<RunOptions>[] = [
  {
    name: "ids", value: "1,2,3",
    description: "Prompt as raw token ids, separated by commas and/or spaces",
    apply: (o, raw, flag) => {
      o.promptSources.push(flag);
      o.ids = parseIdList(raw, flag);
    },
  },
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
  {
    name: "out", value: "FILE",
    description: "JSON results file, '-' for stdout (default k3_run.json)",
    apply: (o, raw, flag) => { o.out = requirePath(raw, flag); },
  },
  {
    name: "dump-logits", value: "PATH",
    description: "Write the first step's logits as raw little-endian float32",
    apply: (o, raw, flag) => { o.dumpLogits = requirePath(raw, flag); },
  },
  {
    name: "layers", value: "N",
    description: "Bind only the first N layers (the output is then not the full model)",
    apply: (o, raw, flag) => { o.layers = parseInteger(raw, flag, 1, 1_000_000); },
  },
  {
    name: "config", value: "PATH",
    description: "Model config (default <model_dir>/config.json)",
    apply: (o, raw, flag) => { o.configPath = requirePath(raw, flag); },
  },
  { name: "list-presets", description: "Print the memory presets and exit", apply: noop },
  { name: "version", description: "Print the version and exit", apply: noop },
  { name: "help", alias: "h", description: "Print this usage and exit", apply: noop },
];
