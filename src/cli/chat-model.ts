/**
 * What `k3 chat` and `k3 serve` share: the options that open a chat model (tokenizer, memory,
 * context, reply length, config, layers) and opening it, with one line saying what was loaded.
 */
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { openEngine, type Engine } from "../engine/open.ts";
import type { BudgetAction } from "../plan/budget.ts";
import { defaultPrefillChunk, maxGeneratedTokens, maxPositions } from "../plan/limits.ts";
import { log } from "../report/log.ts";
import { formatBytes } from "../report/format.ts";
import { loadTokenizer, type Tokenizer } from "../tokenizer/index.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { checkLayers, checkTokenizerFits, configOption, injectedFaults, layersOption, tokOption } from "./common-options.ts";
import { memoryOptions } from "./memory-options.ts";

export interface ChatModelOptions {
  tokDir: string | undefined;
  configPath: string | undefined;
  layers: number | undefined;
  budgets: BudgetAction[];
  trunkDir: string | undefined;
  /** Positions a conversation holds, prompt and replies. */
  ctx: number;
  /** The longest reply (chat), or the reply length when a request gives none (serve). */
  maxTokens: number;
}

export const chatModelDefaults = { ctx: 8192, maxTokens: 2048 } as const;

/** The tokenizer and memory options, for the top of a command's table. */
export function chatModelOptions<T extends ChatModelOptions>(maxTokensWhat: string): OptionDef<T>[] {
  return [
    tokOption("Tokenizer directory (tiktoken.model + tokenizer_config.json with the K3 control tokens)"),
    ...memoryOptions<T>(),
    {
      name: "ctx", value: "N", description: `Positions a conversation can hold, prompt and replies (default ${chatModelDefaults.ctx})`,
      apply: (o, raw, flag) => { o.ctx = parseInteger(raw, flag, 16, maxPositions); },
    },
    {
      name: "max-tokens", value: "N", description: `${maxTokensWhat} (default ${chatModelDefaults.maxTokens}, at most ${maxGeneratedTokens})`,
      apply: (o, raw, flag) => { o.maxTokens = parseInteger(raw, flag, 1, maxGeneratedTokens); },
    },
  ];
}

/** The options for the bottom of the table. */
export function chatModelTailOptions<T extends ChatModelOptions>(): OptionDef<T>[] {
  return [configOption<T>(), layersOption<T>("Bind only the first N layers (the output is then not the full model)")];
}

/** Loads the tokenizer and opens the engine for `command`; the caller closes the engine. */
export function openChatModel(command: string, modelDir: string, o: ChatModelOptions & { tokDir: string }): { engine: Engine; tokenizer: Tokenizer } {
  const { config } = loadConfig(o.configPath ?? join(modelDir, "config.json"));
  const layerCount = checkLayers(o.layers, config);
  const tokenizer = loadTokenizer(o.tokDir);
  const mismatch = checkTokenizerFits(tokenizer, config, o.tokDir);
  if (mismatch) log.warn(mismatch);
  const engine = openEngine(
    { modelDir, config, layerCount, positions: o.ctx, prefillChunk: defaultPrefillChunk, budgets: o.budgets, trunkDir: o.trunkDir, faults: injectedFaults() },
    { onWarning: (w) => log.warn(w), onDrop: (d) => log.error(`EXPERT DROP: layer ${d.layer} expert ${d.expert} failed to load; the reply is CORRUPT (${d.reason})`) },
  );
  log.info(`${command}: ${modelDir}, ${layerCount} layers, context ${o.ctx} positions; loaded in ${engine.loadSeconds.toFixed(1)} s, peak RSS ${formatBytes(engine.peakRssAfterLoadBytes)}`);
  return { engine, tokenizer };
}
