/**
 * `k3 chat <model_dir> --tok DIR` (or `k3 chat --demo`, the demo model built in): talk to Kimi K3.
 * On a terminal, a conversation: the reasoning streamed dimmed, the answer as it is produced,
 * commands after a slash, Ctrl-C stops the reply.
 * With `--message TEXT`, or stdin not a terminal, one turn: the answer on stdout, the reasoning
 * on stderr (or, with --json, the OpenAI-style assistant message with usage on stdout).
 */
import { existsSync } from "node:fs";
import { createInterface, type Interface } from "node:readline";
import { EFFORTS, type Effort } from "../chat/request-types.ts";
import type { ReplyEvent } from "../chat/parse.ts";
import { resolveSampling, samplingDefaults } from "../decode/sampling-options.ts";
import { ExitCode, quoteArgument, usageError } from "../errors.ts";
import { readOrFail, writeAtomically } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { JsonSyntaxError, parseJsonData } from "../json.ts";
import { formatBytes } from "../units.ts";
import { emit, log } from "../report/log.ts";
import { visibleText } from "../report/visible-text.ts";
import { statsOf, usageOf } from "../serve/turn-stats.ts";
import { chatLogprobs } from "../serve/logprob-shapes.ts";
import { readJsonFile } from "./json-file.ts";
import { logprobLimits } from "../chat/request-generation.ts";
import { ChatSession, type ChatMessage, type ChatTurn } from "../session/chat-session.ts";
import type { OptionDef } from "./args.ts";
import { chatModelDefaults, chatModelOptions, chatModelRequest, chatModelTailOptions, modelDirPositional, openChatModel, type ChatModelOptions } from "./chat-model.ts";
import { helpOption } from "./common-options.ts";
import { readStdin } from "./prompt.ts";
import { applySet } from "./chat-set.ts";
import { samplingOptions, type SamplingTarget } from "./sampling-options.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface ChatOptions extends SamplingTarget, ChatModelOptions {
  system: string | undefined;
  thinking: boolean;
  effort: Effort;
  message: string | undefined;
  json: boolean;
  hideReasoning: boolean;
  jsonSchema: string | undefined;
  toolsFile: string | undefined;
  toolChoice: string | undefined;
  logprobs: number | undefined;
}

const options: readonly OptionDef<ChatOptions>[] = [
  ...chatModelOptions<ChatOptions>("Longest reply in tokens"),
  { name: "system", value: "TEXT", description: "A system message before the conversation", apply: (o, raw) => { o.system = raw; } },
  { name: "no-think", description: "Answer without a reasoning section (thinking off)", apply: (o) => { o.thinking = false; } },
  {
    name: "effort", value: EFFORTS.join("|"), description: "Thinking effort (default max)",
    apply: (o, raw, flag) => {
      if (!(EFFORTS as readonly string[]).includes(raw)) throw usageError(`${flag} must be one of ${EFFORTS.join(", ")}, got ${quoteArgument(raw)}`);
      o.effort = raw as Effort;
    },
  },
  ...samplingOptions<ChatOptions>("chat default 1.0, with --top-p 0.95, as Moonshot evaluates K3"),
  { name: "message", value: "TEXT", description: "One turn with this message, then exit (also when stdin is not a terminal)", apply: (o, raw) => { o.message = raw; } },
  { name: "json", description: "One turn: print the OpenAI-style assistant message with usage on stdout", apply: (o) => { o.json = true; } },
  { name: "hide-reasoning", description: "Do not show the reasoning as it streams (it is still kept in the transcript)", apply: (o) => { o.hideReasoning = true; } },
  { name: "json-schema", value: "FILE", description: "Every answer is JSON that validates against the JSON schema in FILE (constrained decoding)", apply: (o, raw) => { o.jsonSchema = raw; } },
  { name: "tools", value: "FILE", description: "Tools the model may call: a JSON array of OpenAI function tools", apply: (o, raw) => { o.toolsFile = raw; } },
  {
    name: "tool-choice", value: "auto|none|required|NAME", description: "With --tools: free to call (auto), no call, at least one call, or exactly one call to NAME",
    apply: (o, raw) => { o.toolChoice = raw; },
  },
  {
    name: "logprobs", value: "N", description: `With --json: each id's log-probability and its N most likely alternatives (0-${logprobLimits.chatTop})`,
    apply: (o, raw, flag) => {
      const n = Number(raw);
      if (!/^\d+$/.test(raw) || n > logprobLimits.chatTop) throw usageError(`${flag} must be a whole number from 0 to ${logprobLimits.chatTop}, got ${quoteArgument(raw)}`);
      o.logprobs = n;
    },
  },
  ...chatModelTailOptions<ChatOptions>(),
  helpOption,
];

const command: CommandInfo<ChatOptions> = {
  name: "k3 chat",
  description: "Talk to Kimi K3: the chat template, reasoning and answer streamed, multi-turn state kept",
  positionals: [modelDirPositional],
  options,
};

const slashHelp = [
  "/reset             forget the conversation",
  "/save FILE         write the transcript (OpenAI messages JSON) and the model state (FILE.k3st)",
  "/load FILE         read a transcript written by /save, and its state when FILE.k3st is there",
  "/think on|off      thinking on or off for the next turns",
  "/effort low|high|max",
  "/set KNOB VALUE    max-tokens, or a sampling knob: temperature, top-p, top-k, min-p, seed",
  "/stats             what the last turn fed, reused and how fast it ran",
  "/exit              leave (Ctrl-D too); Ctrl-C stops a reply",
].join("\n");

export async function main(args: readonly string[]): Promise<number> {
  const o: ChatOptions = {
    tokDir: undefined, configPath: undefined, layers: undefined, budgets: [], trunkDir: undefined, system: undefined,
    thinking: true, effort: "max", ...chatModelDefaults, message: undefined, json: false,
    hideReasoning: false, sampling: {}, jsonSchema: undefined, toolsFile: undefined, toolChoice: undefined, logprobs: undefined,
  };
  const positionals = await parseCommandArgs(args, command, o);
  if (!positionals) return ExitCode.ok;
  const requestFields = constraintFields(o);
  const [modelDir] = positionals;
  const request = await chatModelRequest(command, modelDir, o);
  const sampling = resolveSampling(o.sampling, samplingDefaults.chat);
  const oneTurn = o.message !== undefined || o.json || !process.stdin.isTTY;
  const message = oneTurn ? (o.message ?? new TextDecoder().decode(readStdin(inputLimits.promptTextBytes, "the message"))) : undefined;
  if (oneTurn && message!.trim() === "") throw usageError("chat: the message is empty (give --message TEXT or text on stdin)");

  const opened = openChatModel("k3 chat", request, o);
  using engine = opened.engine;
  const tokenizer = opened.tokenizer;
  const session = new ChatSession(engine, tokenizer, {
    system: o.system, thinking: o.thinking, effort: o.effort, sampling, maxNewTokens: o.maxTokens, freshSeedEachTurn: o.sampling.seed === undefined,
    requestFields, logprobs: o.logprobs,
  }, opened.conversation);
  try {
    if (message !== undefined) await oneShot(session, message, o);
    else await interactive(session, o);
  } finally {
    session.close();
  }
  const drops = engine.experts.drops.length;
  if (drops === 0) return ExitCode.ok;
  process.stderr.write(`RUN INVALID: ${drops} routed expert load(s) failed and were dropped; the replies are CORRUPT\n`);
  return ExitCode.corruptTokens;
}

/**
 * --json-schema, --tools and --tool-choice as the request fields the server takes, so one
 * reader checks them (chat/request-tools.ts, chat/reply-shape.ts): a refusal names the field.
 */
function constraintFields(o: ChatOptions): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  if (o.jsonSchema !== undefined) fields.response_format = { type: "json_schema", json_schema: { name: "answer", schema: readJsonFile(o.jsonSchema, "--json-schema") } };
  if (o.toolsFile !== undefined) fields.tools = readJsonFile(o.toolsFile, "--tools");
  if (o.toolChoice !== undefined) {
    if (o.toolsFile === undefined) throw usageError("--tool-choice needs --tools FILE (the tools to choose from)");
    fields.tool_choice = ["auto", "none", "required"].includes(o.toolChoice) ? o.toolChoice : { type: "function", function: { name: o.toolChoice } };
  }
  if (o.logprobs !== undefined && !o.json) throw usageError("--logprobs needs --json (the log-probabilities go in the JSON message)");
  return fields;
}

/** One turn for scripts: the answer (or the JSON message) on stdout, the reasoning on stderr. */
async function oneShot(session: ChatSession, text: string, o: ChatOptions): Promise<void> {
  const turn = await session.send(text, {
    onEvent: (event) => {
      if (o.json) return;
      if (event.kind === "content") emit(visibleText(event.text));
      else if (event.kind === "reasoning" && !o.hideReasoning) process.stderr.write(visibleText(event.text));
      else if (event.kind === "warning") log.warn(event.message);
    },
  });
  if (o.json) {
    // The same usage and k3 statistics as k3 serve's response.
    const logprobs = turn.logprobs && {
      content: chatLogprobs(turn.logprobs.content, session.tokenizer), reasoning_content: chatLogprobs(turn.logprobs.reasoning, session.tokenizer),
    };
    emit(`${JSON.stringify({
      ...turn.message, finish_reason: turn.finishReason, ...(logprobs && { logprobs }), usage: usageOf(turn.promptTokens, [turn.turn]), k3: statsOf([turn.turn], turn.seed),
    })}\n`);
  } else {
    emit("\n");
  }
  log.info(statsLine(turn));
}

function statsLine(turn: ChatTurn): string {
  const t = turn.turn;
  const rate = t.decodeSeconds > 0 ? (turn.generatedIds.length / t.decodeSeconds).toFixed(2) : "-";
  return `turn: prompt ${turn.promptIds} ids (${t.fedPromptIds} fed, ${t.reusedPromptIds} reused from the ${t.reusedFrom === "none" ? "start" : `${t.reusedFrom} state`}) ` +
    `in ${t.prefillSeconds.toFixed(2)} s; reply ${turn.generatedIds.length} tokens at ${rate} tok/s` +
    (t.speculation ? `, ${t.speculation.accepted} of ${t.speculation.drafted} drafted ids accepted` : "") +
    `; seed ${turn.seed}; finish ${turn.finishReason} (${turn.engineFinish})`;
}

/** Lines from the terminal, one `next()` at a time; a line ending in a backslash continues. */
class LineReader {
  readonly #rl: Interface;
  readonly #queued: string[] = [];
  #waiting: ((line: string | undefined) => void) | undefined;
  #closed = false;

  constructor(rl: Interface) {
    this.#rl = rl;
    rl.on("line", (line) => {
      if (this.#waiting) {
        const resolve = this.#waiting;
        this.#waiting = undefined;
        resolve(line);
      } else {
        this.#queued.push(line);
      }
    });
    rl.on("close", () => {
      this.#closed = true;
      this.#waiting?.(undefined);
    });
  }

  #line(prompt: string): Promise<string | undefined> {
    const queued = this.#queued.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.#closed) return Promise.resolve(undefined);
    this.#rl.setPrompt(prompt);
    this.#rl.prompt();
    return new Promise((resolve) => {
      this.#waiting = resolve;
    });
  }

  /** The next input, its continuation lines joined; undefined at end of input (Ctrl-D). */
  async next(): Promise<string | undefined> {
    const parts: string[] = [];
    let line = await this.#line("> ");
    while (line !== undefined && line.endsWith("\\")) {
      parts.push(line.slice(0, -1));
      line = await this.#line(". ");
    }
    if (line === undefined) return parts.length > 0 ? parts.join("\n") : undefined;
    parts.push(line);
    return parts.join("\n");
  }
}

const dim = (text: string) => `\u001b[2m${text}\u001b[22m`;

async function interactive(session: ChatSession, o: ChatOptions): Promise<void> {
  const rl = createInterface({ input: process.stdin, output: process.stdout, terminal: true });
  const reader = new LineReader(rl);
  let replying = false;
  let interrupted = false;
  rl.on("SIGINT", () => {
    if (replying) {
      interrupted = true;
    } else {
      process.stdout.write("^C (type /exit or press Ctrl-D to leave)\n");
      rl.prompt();
    }
  });
  process.stdout.write(`Kimi K3 chat. ${slashHelp.split("\n")[0]?.split(/\s{2,}/)[0]}, /exit, and more with /help.\n`);
  let last: ChatTurn | undefined;
  try {
    for (;;) {
      const input = await reader.next();
      if (input === undefined) break;
      const text = input.trim();
      if (text === "") continue;
      if (text.startsWith("/")) {
        if (!runSlash(text, session, last)) break;
        continue;
      }
      replying = true;
      interrupted = false;
      let inReasoning = false;
      try {
        last = await session.send(input, {
          cancelled: () => interrupted,
          onEvent: (event) => { inReasoning = show(event, inReasoning, o.hideReasoning); },
        });
        process.stdout.write(last.engineFinish === "cancelled" ? "\n[stopped]\n" : "\n");
      } catch (error) {
        process.stdout.write(`\nk3: ${(error as Error).message}\n`);
      } finally {
        replying = false;
      }
    }
  } finally {
    rl.close();
  }
}

/** Writes one parser event to the terminal; returns whether the reasoning is open. */
function show(event: ReplyEvent, inReasoning: boolean, hideReasoning: boolean): boolean {
  if (event.kind === "reasoning") {
    if (!hideReasoning) process.stdout.write(dim(visibleText(event.text)));
    return true;
  }
  if (event.kind === "content") {
    if (inReasoning && !hideReasoning) process.stdout.write("\n\n");
    process.stdout.write(visibleText(event.text));
    return false;
  }
  if (event.kind === "tool_call") process.stdout.write(`\n[tool call ${visibleText(`${event.call.name}(${event.call.arguments})`)}]\n`);
  else process.stdout.write(dim(`\n[warning: ${visibleText(event.message)}]\n`));
  return inReasoning;
}

/** Where /save puts the model state for a transcript file. */
const stateFileFor = (transcript: string) => `${transcript}.k3st`;

/** Runs a slash command; false means leave. */
function runSlash(text: string, session: ChatSession, last: ChatTurn | undefined): boolean {
  const [name, ...rest] = text.split(/\s+/);
  const arg = rest.join(" ");
  const say = (line: string) => process.stdout.write(`${line}\n`);
  try {
    switch (name) {
      case "/exit":
      case "/quit":
        return false;
      case "/help":
        say(slashHelp);
        break;
      case "/reset":
        session.reset();
        say("(conversation forgotten)");
        break;
      case "/save":
        if (!arg) throw usageError("/save needs a file name");
        writeAtomically(arg, `${JSON.stringify(session.transcript, null, 1)}\n`, "the transcript");
        {
          const stateBytes = session.saveState(stateFileFor(arg));
          const state = stateBytes === undefined ? "" : `, the state in ${stateFileFor(arg)}: ${formatBytes(stateBytes)}`;
          say(`(saved ${session.transcript.length} messages to ${arg}${state})`);
        }
        break;
      case "/load": {
        if (!arg) throw usageError("/load needs a file name");
        session.load(parseTranscript(readOrFail(arg, "the transcript", inputLimits.requestBytes).toString("utf8"), arg));
        const restored = existsSync(stateFileFor(arg)) ? session.loadState(stateFileFor(arg)) : 0;
        say(restored > 0
          ? `(loaded ${session.transcript.length} messages from ${arg} and ${restored} positions of state; the next turn feeds only what is new)`
          : `(loaded ${session.transcript.length} messages from ${arg}; the next turn feeds them)`);
        break;
      }
      case "/think":
        if (arg !== "on" && arg !== "off") throw usageError("/think takes on or off");
        session.settings.thinking = arg === "on";
        say(`(thinking ${arg})`);
        break;
      case "/effort":
        if (!(EFFORTS as readonly string[]).includes(arg)) throw usageError(`/effort takes ${EFFORTS.join(", ")}`);
        session.settings.effort = arg as Effort;
        say(`(effort ${arg})`);
        break;
      case "/set":
        say(applySet(session.settings, rest));
        break;
      case "/stats":
        say(last ? statsLine(last) : "(no turn yet)");
        break;
      default:
        say(`unknown command ${name}; /help lists them`);
    }
  } catch (error) {
    say(`k3: ${(error as Error).message}`);
  }
  return true;
}

/** A saved transcript: a JSON array of messages, each an object with a string role. */
function parseTranscript(text: string, path: string): ChatMessage[] {
  let parsed: unknown;
  try {
    parsed = parseJsonData(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw usageError(`${path}:${error.message}`);
    throw error;
  }
  if (!Array.isArray(parsed) || !parsed.every((m) => typeof m === "object" && m !== null && typeof (m as { role?: unknown }).role === "string")) {
    throw usageError(`${path}: expected a JSON array of messages, each with a "role"`);
  }
  return parsed as ChatMessage[];
}
