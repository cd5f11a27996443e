/**
 * `k3 serve <model_dir> --tok DIR`: an OpenAI-compatible server on loopback. The weights load
 * once; `listening on http://HOST:PORT` on stderr says it is ready. SIGINT and SIGTERM stop
 * accepting, let the generation in flight end, and exit 0.
 */
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { openEngine } from "../engine/open.ts";
import { envValue } from "../env.ts";
import { ExitCode, usageError } from "../errors.ts";
import type { BudgetAction } from "../plan/budget.ts";
import { defaultPrefillChunk, maxGeneratedTokens, maxPositions } from "../plan/limits.ts";
import { log } from "../report/log.ts";
import { formatBytes } from "../report/format.ts";
import { startServer } from "../serve/http.ts";
import { Conversation } from "../session/conversation.ts";
import { loadTokenizer } from "../tokenizer/index.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { checkLayers, configOption, helpOption, injectedFaults, layersOption, tokMissingMessage, tokOption } from "./common-options.ts";
import { memoryOptions } from "./memory-options.ts";
import { parseCommandArgs, usageText, type CommandInfo } from "./usage.ts";

interface ServeCliOptions {
  tokDir: string | undefined;
  configPath: string | undefined;
  layers: number | undefined;
  budgets: BudgetAction[];
  trunkDir: string | undefined;
  host: string;
  port: number;
  apiKey: string | undefined;
  modelName: string;
  queue: number;
  maxBodyMb: number;
  ctx: number;
  maxTokens: number;
}

const loopback = new Set(["127.0.0.1", "localhost", "::1"]);

const options: readonly OptionDef<ServeCliOptions>[] = [
  tokOption("Tokenizer directory (tiktoken.model + tokenizer_config.json with the K3 control tokens)"),
  ...memoryOptions<ServeCliOptions>(),
  { name: "host", value: "ADDR", description: "Address to listen on (default 127.0.0.1: this machine only)", apply: (o, raw) => { o.host = raw; } },
  { name: "port", value: "N", description: "Port (default 8000; 0 picks a free one)", apply: (o, raw, flag) => { o.port = parseInteger(raw, flag, 0, 65535); } },
  { name: "api-key", value: "KEY", description: "Require Authorization: Bearer KEY on /v1 (or set K3_API_KEY); never printed", apply: (o, raw) => { o.apiKey = raw; } },
  { name: "model-name", value: "NAME", description: "The model id the API reports and accepts (default kimi-k3)", apply: (o, raw) => { o.modelName = raw; } },
  { name: "queue", value: "N", description: "Requests that may wait behind the one generating (default 8); more get 429", apply: (o, raw, flag) => { o.queue = parseInteger(raw, flag, 0, 10_000); } },
  { name: "max-body", value: "MB", description: "Largest request body in MB (default 16); larger gets 413", apply: (o, raw, flag) => { o.maxBodyMb = parseInteger(raw, flag, 1, 1024); } },
  { name: "ctx", value: "N", description: "Positions a conversation can hold, prompt and reply (default 8192)", apply: (o, raw, flag) => { o.ctx = parseInteger(raw, flag, 16, maxPositions); } },
  {
    name: "max-tokens", value: "N", description: `Reply length when a request gives no max_tokens (default 2048, at most ${maxGeneratedTokens})`,
    apply: (o, raw, flag) => { o.maxTokens = parseInteger(raw, flag, 1, maxGeneratedTokens); },
  },
  configOption(),
  layersOption("Bind only the first N layers (the output is then not the full model)"),
  helpOption,
];

const command: CommandInfo<ServeCliOptions> = {
  name: "k3 serve",
  description: "An OpenAI-compatible server: /v1/chat/completions (JSON and SSE), /v1/models, /health",
  positionals: [{ name: "model_dir", description: "Checkpoint directory (the .safetensors shards and config.json)" }],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  const o: ServeCliOptions = {
    tokDir: undefined, configPath: undefined, layers: undefined, budgets: [], trunkDir: undefined, host: "127.0.0.1",
    port: 8000, apiKey: undefined, modelName: "kimi-k3", queue: 8, maxBodyMb: 16, ctx: 8192, maxTokens: 2048,
  };
  const positionals = await parseCommandArgs(args, command, o);
  if (!positionals) return ExitCode.ok;
  const [modelDir] = positionals;
  if (!modelDir) throw usageError("serve needs <model_dir>", await usageText(command));
  if (!o.tokDir) throw usageError(tokMissingMessage("serve"));
  const apiKey = o.apiKey ?? envValue("K3_API_KEY");
  if (!loopback.has(o.host) && apiKey === undefined) log.warn(`listening on ${o.host} without an API key: anyone who can reach it can use it (--api-key or K3_API_KEY)`);
  const { config } = loadConfig(o.configPath ?? join(modelDir, "config.json"));
  const layerCount = checkLayers(o.layers, config);
  const tokenizer = loadTokenizer(o.tokDir);
  using engine = openEngine(
    { modelDir, config, layerCount, positions: o.ctx, prefillChunk: defaultPrefillChunk, budgets: o.budgets, trunkDir: o.trunkDir, faults: injectedFaults() },
    { onWarning: (w) => log.warn(w), onDrop: (d) => log.error(`EXPERT DROP: layer ${d.layer} expert ${d.expert} failed to load; the reply being generated is CORRUPT (${d.reason})`) },
  );
  const conversation = new Conversation(engine.model, engine.plan.prefillChunk);
  const running = startServer(conversation, tokenizer, {
    host: o.host, port: o.port, apiKey, modelName: o.modelName, maxBodyBytes: o.maxBodyMb * 1024 * 1024, queue: o.queue,
    defaultMaxTokens: o.maxTokens,
  });
  log.info(`k3 serve: ${modelDir}, ${layerCount} layers, context ${o.ctx}; loaded in ${engine.loadSeconds.toFixed(1)} s, peak RSS ${formatBytes(engine.peakRssAfterLoadBytes)}`);
  process.stderr.write(`listening on ${running.url}\n`);
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      log.info(`${signal}: finishing the request in flight, then stopping`);
      void running.stop().then(resolve);
    };
    process.once("SIGINT", () => stop("SIGINT"));
    process.once("SIGTERM", () => stop("SIGTERM"));
  });
  conversation.close();
  return engine.experts.drops.length > 0 ? ExitCode.corruptTokens : ExitCode.ok;
}
