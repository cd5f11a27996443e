/**
 * `k3 serve <model_dir> --tok DIR` (or `k3 serve --demo`): an OpenAI-compatible server on
 * loopback, with a chat page at `/` (src/page/). The weights load once; `listening on
 * http://HOST:PORT` on stderr says it is ready. SIGINT and SIGTERM stop accepting, let the generation in flight end, and exit 0.
 */
import { envSetButEmpty, envValue } from "../env.ts";
import { inputLimits } from "../input-limits.ts";
import { ExitCode, quoteArgument, usageError } from "../errors.ts";
import { log } from "../report/log.ts";
import { checkPortFree, defaultBodyTimeoutSeconds, defaultDrainTimeoutSeconds, defaultIdleTimeoutSeconds, maxIdleTimeoutSeconds, startServer } from "../serve/http.ts";
import { Conversation } from "../session/conversation.ts";
import { ConversationPool } from "../session/conversation-pool.ts";
import { maxParallel } from "../plan/limits.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { chatModelDefaults, chatModelOptions, chatModelRequest, chatModelTailOptions, modelDirPositional, openChatModel, type ChatModelOptions } from "./chat-model.ts";
import { helpOption } from "./common-options.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface ServeCliOptions extends ChatModelOptions {
  host: string;
  port: number;
  apiKey: string | undefined;
  modelName: string;
  queue: number;
  maxBodyMb: number;
  allowHosts: string[];
  allowOrigins: string[];
  idleTimeoutSeconds: number;
  bodyTimeoutSeconds: number;
  parallel: number;
  metricsPublic: boolean;
  drainTimeoutSeconds: number;
}

const loopback = new Set(["127.0.0.1", "localhost", "::1"]);
const MiB = 1024 * 1024;
/** The request reader's limit (src/input-limits.ts) is the most any body can be: one number. */
const maxRequestMb = inputLimits.requestBytes / MiB;

const options: readonly OptionDef<ServeCliOptions>[] = [
  ...chatModelOptions<ServeCliOptions>("Reply length when a request gives no max_tokens"),
  { name: "host", value: "ADDR", description: "Address to listen on (default 127.0.0.1: this machine only)", apply: (o, raw) => { o.host = raw; } },
  { name: "port", value: "N", description: "Port (default 8000; 0 picks a free one)", apply: (o, raw, flag) => { o.port = parseInteger(raw, flag, 0, 65535); } },
  { name: "api-key", value: "KEY", description: "Require Authorization: Bearer KEY on /v1 (or set K3_API_KEY); never printed", apply: (o, raw) => { o.apiKey = raw; } },
  { name: "model-name", value: "NAME", description: "The model id the API reports and accepts (default kimi-k3)", apply: (o, raw) => { o.modelName = raw; } },
  {
    name: "parallel", value: "N",
    description: `Requests generated at once, each step one read of the weights for all, each answer as if alone (1 to ${maxParallel}, default 1)`,
    apply: (o, raw, flag) => { o.parallel = parseInteger(raw, flag, 1, maxParallel); },
  },
  { name: "queue", value: "N", description: "Requests that may wait behind those generating (default 8); more get 429", apply: (o, raw, flag) => { o.queue = parseInteger(raw, flag, 0, 10_000); } },
  { name: "max-body", value: "MB", description: `Largest request body in MB (default 16, at most ${maxRequestMb}: the request reader's limit); larger gets 413`, apply: (o, raw, flag) => { o.maxBodyMb = parseInteger(raw, flag, 1, 1024); } },
  {
    name: "allow-host", value: "NAME",
    description: "Also answer requests whose Host header names NAME (repeatable; default: localhost, 127.0.0.1, ::1 and --host), e.g. behind a proxy",
    apply: (o, raw) => { o.allowHosts.push(raw); },
  },
  {
    name: "allow-origin", value: "ORIGIN",
    description: "Also answer browser pages from ORIGIN, e.g. http://localhost:3000 (repeatable; '*' for any; default: only the server's own page)",
    apply: (o, raw, flag) => { o.allowOrigins.push(checkOrigin(raw, flag)); },
  },
  {
    name: "drain-timeout", value: "S",
    description: `At SIGTERM, generations in flight may finish for S seconds, then are cut with an error (default ${defaultDrainTimeoutSeconds}); new requests get 503`,
    apply: (o, raw, flag) => { o.drainTimeoutSeconds = parseInteger(raw, flag, 0, 86_400); },
  },
  {
    name: "metrics-public", description: "Serve /metrics (Prometheus text) without the API key; the Host and Origin checks still apply",
    apply: (o) => { o.metricsPublic = true; },
  },
  {
    name: "idle-timeout", value: "S",
    description: `Close a connection whose request headers do not arrive, or that stays idle between requests, after S seconds (default ${defaultIdleTimeoutSeconds}, at most ${maxIdleTimeoutSeconds})`,
    apply: (o, raw, flag) => { o.idleTimeoutSeconds = parseInteger(raw, flag, 1, maxIdleTimeoutSeconds); },
  },
  {
    name: "body-timeout", value: "S",
    description: `A request body must arrive whole within S seconds, else 408 (default ${defaultBodyTimeoutSeconds})`,
    apply: (o, raw, flag) => { o.bodyTimeoutSeconds = parseInteger(raw, flag, 1, 3600); },
  },
  ...chatModelTailOptions<ServeCliOptions>(),
  helpOption,
];

/** An origin as browsers send it: `http(s)://host[:port]`, nothing after; or "*". */
function checkOrigin(raw: string, flag: string): string {
  if (raw === "*") return raw;
  let url: URL | undefined;
  try {
    url = new URL(raw);
  } catch {
    url = undefined;
  }
  if (!url || !/^https?:$/.test(url.protocol) || url.origin !== raw.replace(/\/+$/, "").toLowerCase()) {
    throw usageError(`${flag} expects an origin such as http://localhost:3000 (scheme, host and port, nothing after), got ${quoteArgument(raw)}`);
  }
  return url.origin;
}

const command: CommandInfo<ServeCliOptions> = {
  name: "k3 serve",
  description: "An OpenAI-compatible server: /v1/chat/completions and /v1/completions (JSON and SSE), /v1/models, /health, and a chat page at /",
  positionals: [modelDirPositional],
  options,
};

export async function main(args: readonly string[]): Promise<number> {
  const o: ServeCliOptions = {
    tokDir: undefined, configPath: undefined, layers: undefined, budgets: [], trunkDir: undefined, host: "127.0.0.1",
    port: 8000, apiKey: undefined, modelName: "kimi-k3", queue: 8, maxBodyMb: 16, allowHosts: [], allowOrigins: [],
    idleTimeoutSeconds: defaultIdleTimeoutSeconds, bodyTimeoutSeconds: defaultBodyTimeoutSeconds, parallel: 1, metricsPublic: false, drainTimeoutSeconds: defaultDrainTimeoutSeconds, ...chatModelDefaults,
  };
  const positionals = await parseCommandArgs(args, command, o);
  if (!positionals) return ExitCode.ok;
  const [modelDir] = positionals;
  const request = await chatModelRequest(command, modelDir, o);
  // An empty key would be no key at all: refused, never read as "no key wanted".
  if (o.apiKey === "") throw usageError("--api-key is empty: give a key, or leave the flag out to serve without one");
  if (o.apiKey === undefined && envSetButEmpty("K3_API_KEY")) throw usageError("K3_API_KEY is set but empty: give a key, or unset it to serve without one");
  const apiKey = o.apiKey ?? envValue("K3_API_KEY");
  if (!loopback.has(o.host) && apiKey === undefined) log.warn(`listening on ${o.host} without an API key: anyone who can reach it can use it (--api-key or K3_API_KEY)`);
  if (o.maxBodyMb > maxRequestMb) log.warn(`--max-body ${o.maxBodyMb} is above the ${maxRequestMb} MB a request may be: bodies over ${maxRequestMb} MB get 413`);
  checkPortFree(o.host, o.port); // before a model that may take minutes to load
  if (o.parallel > 1 && o.draftTrunk) throw usageError("--draft-trunk drafts for one conversation at a time: it cannot be combined with --parallel");
  const opened = openChatModel("k3 serve", request, o, o.parallel);
  using engine = opened.engine;
  const tokenizer = opened.tokenizer;
  const bytesRead = () => (engine.streamed?.stats.bytesRead ?? 0) + engine.experts.bytesReadEver;
  const conversation = o.parallel > 1
    ? new ConversationPool(engine.model, o.parallel, { ...opened.conversation, bytesRead })
    : new Conversation(engine.model, opened.conversation);
  if (o.parallel > 1) log.info(`k3 serve: up to ${o.parallel} requests generate together, each step one read of the weights for all`);
  const running = startServer(conversation, tokenizer, {
    host: o.host, port: o.port, apiKey, modelName: o.modelName, maxBodyBytes: Math.min(o.maxBodyMb * MiB, inputLimits.requestBytes), queue: o.queue, parallel: o.parallel,
    bytesRead,
    defaultMaxTokens: o.maxTokens, allowHosts: o.allowHosts, allowOrigins: o.allowOrigins,
    idleTimeoutSeconds: o.idleTimeoutSeconds, bodyTimeoutSeconds: o.bodyTimeoutSeconds, metricsPublic: o.metricsPublic, drainTimeoutSeconds: o.drainTimeoutSeconds,
    dataLost: () => engine.experts.drops.map((d) => `layer ${d.layer} expert ${d.expert}: ${d.reason}`),
    expertRetention: () => ({ requests: engine.experts.requestsEver, retained: engine.experts.retainedEver }),
  });
  const stopped = new Promise<void>((resolve) => {
    // One handler for both signals, installed before the server says it is ready: the first
    // signal stops it gently, a second (either) ends the process at once, through exit, so the
    // snapshot directory still goes.
    let signals = 0;
    const onSignal = (signal: "SIGINT" | "SIGTERM") => {
      if (++signals > 1) process.exit(signal === "SIGINT" ? ExitCode.interrupted : ExitCode.terminated);
      log.info(`${signal}: finishing the request in flight, then stopping (again to stop at once)`);
      void running.stop().then(resolve);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
  process.stderr.write(`listening on ${running.url}\n`);
  log.info(`chat page: ${running.url}/ (open it in a browser)`);
  await stopped;
  conversation.close();
  return engine.experts.drops.length > 0 ? ExitCode.corruptTokens : ExitCode.ok;
}
