/** The options of `k3 <model_dir>`: one table for parsing, validation and usage text. */
import { usageError } from "../errors.ts";
import { defaultGeneratedTokens, maxGeneratedTokens } from "../plan/limits.ts";
import { parseIdList, parseInteger, type OptionDef, type PositionalDef } from "./args.ts";

export interface RunOptions {
  modelDir: string;
  /** Prompt sources in the order given; exactly one is allowed. */
  promptSources: string[];
  ids: number[];
  gen: number;
  configPath: string | undefined;
}

export function defaultRunOptions(): RunOptions {
  return { modelDir: "", promptSources: [], ids: [], gen: defaultGeneratedTokens, configPath: undefined };
}

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
    name: "config", value: "PATH",
    description: "Model config (default <model_dir>/config.json)",
    apply: (o, raw, flag) => {
      if (raw.length === 0) throw usageError(`${flag} needs a path`);
      o.configPath = raw;
    },
  },
  { name: "list-presets", description: "Print the memory presets and exit", apply: noop },
  { name: "version", description: "Print the version and exit", apply: noop },
  { name: "help", alias: "h", description: "Print this usage and exit", apply: noop },
];
