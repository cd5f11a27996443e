/**
 * What `k3 chat` and `k3 serve` share: the options that open a chat model (the model and
 * tokenizer directories or --demo, memory, context, reply length, config, layers) and opening
 * it, with one line saying what was loaded.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { ngramDrafter } from "../decode/ngram-drafter.ts";
import { startHybrid } from "../engine/hybrid.ts";
import { openEngine, type Engine } from "../engine/open.ts";
import { budgetRequest, type BudgetAction, type BudgetRequest } from "../plan/budget.ts";
import { defaultPrefillChunk, maxGeneratedTokens, maxPositions } from "../plan/limits.ts";
import { recurrentStateBytes } from "../plan/memory-plan.ts";
import { log } from "../report/log.ts";
import { formatBytes } from "../units.ts";
import { hybridBanner, speculationBanner } from "../report/run-report.ts";
import type { ConversationOptions } from "../session/conversation.ts";
import { loadTokenizer, type Tokenizer } from "../tokenizer/index.ts";
import { runtimeError, usageError } from "../errors.ts";
import { errnoCode } from "../fs.ts";
import { modelIdentity, PromptCache } from "../session/prompt-cache.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { checkLayers, checkTokenizerFits, configOption, injectedFaults, injectedTrunkReadFaults, layersOption, prefillChunkOption, tokMissingMessage, tokOption } from "./common-options.ts";
import { demoModelName, unpackDemo } from "./demo-assets.ts";
import { memoryOptions, parseGb } from "./memory-options.ts";
import { checkSpeculation, speculationDefaults, speculationOptions, speculationRequest, type SpeculationTarget } from "./speculation-options.ts";
import { usageText, type CommandInfo } from "./usage.ts";

export interface ChatModelOptions extends SpeculationTarget {
  tokDir: string | undefined;
  /** Run the demo model built into k3: it is then the model directory and the tokenizer. */
  demo: boolean;
  configPath: string | undefined;
  layers: number | undefined;
  budgets: BudgetAction[];
  trunkDir: string | undefined;
  /** Positions a conversation holds, prompt and replies. */
  ctx: number;
  /** Prompt ids per forward call (a server reports its prefill progress after each). */
  prefillChunk: number;
  /** The longest reply (chat), or the reply length when a request gives none (serve). */
  maxTokens: number;
  /** RAM for state snapshots; undefined: room for one. */
  snapshotBytes: number | undefined;
  /** Disk for parked snapshots. */
  snapshotDiskBytes: number;
  /** Where parked snapshots go (a private directory is made inside). */
  snapshotDir: string | undefined;
  /** The prompt cache's directory (snapshots that outlive the process); none when undefined. */
  promptCacheDir: string | undefined;
  /** Disk the prompt cache may hold. */
  promptCacheBytes: number;
}

export const chatModelDefaults = {
  ...speculationDefaults, demo: false, ctx: 8192, prefillChunk: defaultPrefillChunk, maxTokens: 2048, snapshotBytes: undefined, snapshotDiskBytes: 8e9, snapshotDir: undefined,
  promptCacheDir: undefined, promptCacheBytes: 16e9,
} as const;

/** The tokenizer and memory options, for the top of a command's table. */
export function chatModelOptions<T extends ChatModelOptions>(maxTokensWhat: string): OptionDef<T>[] {
  return [
    tokOption("Tokenizer directory (tiktoken.model + tokenizer_config.json with the K3 control tokens)"),
    {
      name: "demo", description: "Run the demo Kimi K3 built into k3 (trained here, its own tokenizer): no <model_dir> and no --tok",
      apply: (o) => { o.demo = true; },
    },
    ...memoryOptions<T>(),
    {
      name: "ctx", value: "N", description: `Positions a conversation can hold, prompt and replies (default ${chatModelDefaults.ctx})`,
      apply: (o, raw, flag) => { o.ctx = parseInteger(raw, flag, 16, maxPositions); },
    },
    prefillChunkOption<T>(),
    {
      name: "max-tokens", value: "N", description: `${maxTokensWhat} (default ${chatModelDefaults.maxTokens}, at most ${maxGeneratedTokens})`,
      apply: (o, raw, flag) => { o.maxTokens = parseInteger(raw, flag, 1, maxGeneratedTokens); },
    },
    {
      name: "snapshot-gb", value: "X",
      description: "RAM for multi-turn state snapshots, counted in the memory plan (default: room for one; 0 parks every one on disk)",
      apply: (o, raw, flag) => { o.snapshotBytes = parseGb(raw, flag); },
    },
    {
      name: "snapshot-disk-gb", value: "X",
      description: `Disk for snapshots parked when the RAM is full (default ${chatModelDefaults.snapshotDiskBytes / 1e9}; 0 drops them instead)`,
      apply: (o, raw, flag) => { o.snapshotDiskBytes = parseGb(raw, flag); },
    },
    {
      name: "snapshot-dir", value: "DIR", description: "Where parked snapshots go (default the temporary directory; removed at exit)",
      apply: (o, raw) => { o.snapshotDir = raw; },
    },
    {
      name: "prompt-cache", value: "DIR",
      description: "Keep prompt prefixes' states in DIR across runs: a later conversation starting the same way, in this process or the next, prefills only the rest",
      apply: (o, raw) => { o.promptCacheDir = raw; },
    },
    {
      name: "prompt-cache-gb", value: "X", description: `Disk the prompt cache may use, least recently used first out (default ${chatModelDefaults.promptCacheBytes / 1e9})`,
      apply: (o, raw, flag) => { o.promptCacheBytes = parseGb(raw, flag); },
    },
    ...speculationOptions<T>(),
  ];
}

/** The options for the bottom of the table. */
export function chatModelTailOptions<T extends ChatModelOptions>(): OptionDef<T>[] {
  return [configOption<T>(), layersOption<T>("Bind only the first N layers (the output is then not the full model)")];
}

/** The prompt cache for this model, its directory made when missing; one that cannot be made is a clear error. */
function openPromptCache(dir: string, bytes: number, modelDir: string, layers: number, trunkDir: string | undefined): PromptCache {
  try {
    const cache = new PromptCache(dir, bytes, modelIdentity(modelDir, layers, trunkDir), (message) => log.warn(message));
    log.info(`prompt cache: ${cache.size} prefix(es), ${(cache.bytes / 1e9).toFixed(2)} GB in ${dir} for this model`);
    return cache;
  } catch (error) {
    throw runtimeError(`--prompt-cache ${dir}: cannot use it (${errnoCode(error)})`);
  }
}

/** The positional every chat command takes: what it says in usage. */
export const modelDirPositional = { name: "model_dir", description: "Checkpoint directory (the .safetensors shards and config.json); none with --demo" };

/** What a chat command runs on: a model directory and a tokenizer directory, or the demo (both at once). */
export type ChatModelSource = { demo: true } | { demo: false; modelDir: string; tokDir: string };

/** The source, and the decision the budget options make (ultra-low-memory or not), taken once. */
export interface ChatModelRequest {
  source: ChatModelSource;
  budgets: BudgetRequest;
}

/**
 * What the command line asks for: `<model_dir> --tok DIR`, or `--demo` alone, and the budgets.
 * Anything else, or a flag that cannot take effect, is a usage error; the demo is unpacked
 * later, by openChatModel, after every other check.
 */
export async function chatModelRequest<T extends ChatModelOptions>(
  command: CommandInfo<T>, modelDir: string | undefined, o: T,
): Promise<ChatModelRequest> {
  const verb = command.name.replace(/^k3 /, "");
  const budgets = budgetRequest(o.budgets);
  checkSpeculation(o, { recompute: false, ultra: budgets.ultraLowMemory });
  if (o.snapshotDir !== undefined && o.snapshotDiskBytes === 0) {
    throw usageError("--snapshot-dir is where parked snapshots go: with --snapshot-disk-gb 0 none are parked (drop one of them)");
  }
  if (o.demo) {
    const extra = [modelDir === undefined ? undefined : "<model_dir>", o.tokDir === undefined ? undefined : "--tok"].filter((x) => x !== undefined);
    if (extra.length > 0) throw usageError(`${verb}: --demo is the model directory and the tokenizer: give no ${extra.join(" and no ")} with it`);
    return { source: { demo: true }, budgets };
  }
  if (!modelDir) throw usageError(`${verb} needs <model_dir> (or --demo)`, await usageText(command));
  if (!o.tokDir) throw usageError(tokMissingMessage(verb));
  return { source: { demo: false, modelDir, tokDir: o.tokDir }, budgets };
}

/** The model and tokenizer directories of a source: the demo's is unpacked here, once per call. */
function directories(source: ChatModelSource): { modelDir: string; tokDir: string } {
  if (!source.demo) return source;
  const dir = unpackDemo();
  return { modelDir: dir, tokDir: dir };
}

/**
 * Loads the tokenizer and opens the engine for `command` (unpacking the demo first when it is
 * the source), with the snapshot RAM in its plan; returns what a Conversation on it needs. The
 * caller closes the engine.
 */
export function openChatModel(
  command: string, request: ChatModelRequest, o: ChatModelOptions, sequences = 1,
): { engine: Engine; tokenizer: Tokenizer; conversation: ConversationOptions } {
  const { source } = request;
  const { modelDir, tokDir } = directories(source);
  const { config } = loadConfig(o.configPath ?? join(modelDir, "config.json"));
  const layerCount = checkLayers(o.layers, config);
  const tokenizer = loadTokenizer(tokDir);
  const mismatch = checkTokenizerFits(tokenizer, config, tokDir);
  if (mismatch) log.warn(mismatch);
  // Room for one snapshot per conversation unless --snapshot-gb says otherwise.
  const snapshotBytes = o.snapshotBytes ?? sequences * recurrentStateBytes(config, layerCount);
  const speculation = speculationRequest(o);
  // A verification sweep feeds the pending id and its draft in one call: the activations are sized for both.
  const chunk = Math.max(o.prefillChunk, (speculation.speculative ?? 0) + 1);
  const engine = openEngine(
    {
      // With --parallel, a batched step holds one such call of every conversation.
      modelDir, config, layerCount, positions: o.ctx, prefillChunk: sequences * chunk, sequences,
      budgets: request.budgets, trunkDir: o.trunkDir, faults: injectedFaults(), trunkReadFaults: injectedTrunkReadFaults(), snapshotBytes, ...speculation,
    },
    { onWarning: (w) => log.warn(w), onDrop: (d) => log.error(`EXPERT DROP: layer ${d.layer} expert ${d.expert} failed to load; the reply is CORRUPT (${d.reason})`) },
  );
  const what = source.demo ? `${demoModelName(config.numLayers)}, from ${modelDir}` : modelDir;
  log.info(`${command}: ${what}, ${layerCount} layers, context ${o.ctx} positions, snapshots ${formatBytes(snapshotBytes)} in RAM; loaded in ${engine.loadSeconds.toFixed(1)} s, peak RSS ${formatBytes(engine.peakRssAfterLoadBytes)}`);
  const maxDraft = speculation.speculative;
  if (maxDraft !== undefined && engine.plan.draft) for (const line of hybridBanner(engine.plan.draft, maxDraft)) log.info(line);
  else if (maxDraft !== undefined) log.info(speculationBanner(maxDraft));
  // The draft model follows the conversation turn after turn; the conversation closes it.
  const drafter = maxDraft === undefined ? undefined : startHybrid(engine)?.drafter ?? ngramDrafter;
  const promptCache = o.promptCacheDir === undefined ? undefined : openPromptCache(o.promptCacheDir, o.promptCacheBytes, modelDir, layerCount, o.trunkDir);
  const conversation: ConversationOptions = {
    chunk,
    ...(promptCache && { promptCache }),
    snapshots: { ramBytes: snapshotBytes, diskBytes: o.snapshotDiskBytes, parent: o.snapshotDir ?? tmpdir() },
    warn: (message) => log.warn(message),
    ...(drafter && maxDraft !== undefined && { speculative: { drafter, maxDraft } }),
  };
  return { engine, tokenizer, conversation };
}
