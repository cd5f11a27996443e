/**
 * The OpenAI-compatible HTTP surface on `Bun.serve` (chat.md 4): routes, the key, the body limit,
 * generations (--parallel of them at once, a request's `n` choices counting as n) behind a
 * bounded FIFO, and errors in OpenAI's shape. Everything a request can get wrong is found before
 * the first byte of the answer is sent.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Server } from "bun";
import { controlIds, stopIds } from "../chat/specials.ts";
import chatPage from "../page/index.html";
import { progressComment, type StreamProgress } from "../page/progress.ts";
import type { PrefillProgress } from "../session/conversation.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import { prepareCompletion, runCompletion, type GenerationSource, type PreparedCompletion } from "./chat-completion.ts";
import { excerpt, fieldError, runtimeError } from "../errors.ts";
import { apiError, errorResponse, fromThrown } from "./errors.ts";
import { pageRoutes } from "./page-routes.ts";
import { hostAllowed, originAllowed, originPolicy, type OriginPolicy } from "./request-origin.ts";
import { legacyLogprobs } from "./logprob-shapes.ts";
import { endpointOf, ServerMetrics } from "./metrics.ts";
import type { CompletionStats } from "./turn-stats.ts";
import { chatCompletionsDoor } from "./door-chat-completions.ts";
import { anthropicMessagesDoor, asAnthropicError } from "./door-anthropic-messages.ts";
import { parseMessagesRequest } from "./anthropic-request.ts";
import { responsesDoor } from "./door-responses.ts";
import { renderChat } from "../chat/render.ts";
import { replyId, type Door, type ReplyHead, type SendEvent } from "./door.ts";
import { parseTextRequest, runTextCompletion, type TextChoice, type TextRequest } from "./text-completion.ts";

export interface ServeOptions {
  host: string;
  port: number;
  /** Required as `Authorization: Bearer KEY` on /v1 when set; never printed. */
  apiKey: string | undefined;
  modelName: string;
  maxBodyBytes: number;
  /** Requests that may wait behind those generating; more are refused with 429. */
  queue: number;
  /** Requests generating at once (--parallel), their steps batched; default 1. */
  parallel?: number;
  /** Bytes read from disk so far (trunk and experts), for /health's per-id figure. */
  bytesRead?: () => number;
  defaultMaxTokens: number;
  /** Host names answered besides the loopback names and the bound address (--allow-host). */
  allowHosts?: readonly string[];
  /** Browser origins answered besides the server's own page (--allow-origin; "*" for any). */
  allowOrigins?: readonly string[];
  /** A connection silent this long before its request is read (headers, keep-alive) is closed (--idle-timeout). */
  idleTimeoutSeconds?: number;
  /** A request body must have arrived whole within this (--body-timeout); else 408. */
  bodyTimeoutSeconds?: number;
  /** `/metrics` without the API key (--metrics-public); the Host and Origin checks still apply. */
  metricsPublic?: boolean;
  /** At a stop, how long generations in flight may go on before they are cut (--drain-timeout). */
  drainTimeoutSeconds?: number;
  /**
   * The routed-expert loads that failed so far, each said as one line: a request during which
   * one failed is answered with an error, never with its ids (a dropped expert makes them corrupt).
   */
  dataLost?: () => readonly string[];
  /** Routed-expert requests so far and how many found their expert in RAM (for /metrics). */
  expertRetention?: () => { requests: number; retained: number };
}

export const defaultDrainTimeoutSeconds = 300;

export const defaultIdleTimeoutSeconds = 10;
/** How long responses still being written get at shutdown before their connections are closed. */
const shutdownGraceMs = 2000;
export const defaultBodyTimeoutSeconds = 30;
/** Bun's ceiling for idleTimeout. */
export const maxIdleTimeoutSeconds = 255;

/**
 * A FIFO of generations: up to `slots` sequences decode at once (--parallel), a request with `n`
 * choices taking `n` of them; at most `limit` requests wait. The head of the line starts first
 * even when a smaller request behind it would fit (no one waits forever).
 */
class GenerationQueue {
  readonly #limit: number;
  readonly #slots: number;
  #running = 0;
  readonly #waiting: { weight: number; start: () => void }[] = [];
  #idle: PromiseWithResolvers<void> | undefined;
  /** Seconds during which at least one generation ran, up to the last time none did. */
  #busySeconds = 0;
  #busySince = 0;

  /** Generations running, and requests waiting for a turn, now. */
  get running(): number {
    return this.#running;
  }

  get waiting(): number {
    return this.#waiting.length;
  }

  /** Seconds during which at least one generation ran, so far. */
  get busySeconds(): number {
    return this.#busySeconds + (this.#running > 0 ? (performance.now() - this.#busySince) / 1000 : 0);
  }

  #start(weight: number): void {
    if (this.#running === 0) this.#busySince = performance.now();
    this.#running += weight;
  }

  constructor(limit: number, slots = 1) {
    this.#limit = limit;
    this.#slots = slots;
  }

  /**
   * Undefined when full; otherwise a promise that resolves when it is this caller's turn (to a
   * function that ends it), and how many generations must end or start before it does.
   * `weight` (the request's choices) is at most the slots.
   */
  enter(weight = 1): { ready: Promise<() => void>; ahead: number } | undefined {
    const now = this.#waiting.length === 0 && this.#running + weight <= this.#slots;
    if (!now && this.#waiting.length >= this.#limit) return undefined;
    const ahead = this.#waiting.length + Math.max(0, this.#running + weight - this.#slots);
    const release = () => {
      this.#running -= weight;
      if (this.#running === 0) this.#busySeconds += (performance.now() - this.#busySince) / 1000;
      for (let next = this.#waiting[0]; next && this.#running + next.weight <= this.#slots; next = this.#waiting[0]) {
        this.#waiting.shift();
        next.start();
      }
      if (this.#running === 0 && this.#waiting.length === 0) this.#idle?.resolve();
    };
    let ready: Promise<() => void>;
    if (now) {
      this.#start(weight);
      ready = Promise.resolve(once(release));
    } else {
      const { promise, resolve } = Promise.withResolvers<() => void>();
      this.#waiting.push({
        weight,
        start: () => {
          this.#start(weight);
          resolve(once(release));
        },
      });
      ready = promise;
    }
    return { ready, ahead };
  }

  /** Resolves when everything queued so far has finished. */
  idle(): Promise<void> {
    if (this.#running === 0 && this.#waiting.length === 0) return Promise.resolve();
    this.#idle ??= Promise.withResolvers<void>();
    const idle = this.#idle;
    return idle.promise.then(() => {
      if (this.#idle === idle) this.#idle = undefined;
    });
  }
}

/** `f`, callable once (a turn ends once, however many paths end it). */
function once(f: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    f();
  };
}

/**
 * The credentials of `Authorization: Bearer KEY`; the scheme is case-insensitive (RFC 9110
 * 11.1), so `bearer KEY` is the same header. Anything else has none.
 */
export function bearerToken(header: string | null): string | undefined {
  const match = header?.match(/^bearer +(\S+) *$/i);
  return match?.[1];
}

/** Compares digests, so the time taken says nothing about the key, not even its length. */
function keyMatches(header: string | null, key: string): boolean {
  const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();
  const token = bearerToken(header);
  return timingSafeEqual(digest(token ?? ""), digest(key)) && token !== undefined;
}

/** The key a request carries: `Authorization: Bearer KEY` (OpenAI), else `x-api-key: KEY` (Anthropic). */
function keyOf(req: Request, key: string): boolean {
  const apiKey = req.headers.get("x-api-key");
  return keyMatches(req.headers.get("authorization"), key) || (apiKey !== null && keyMatches(`Bearer ${apiKey}`, key));
}

export interface RunningServer {
  readonly server: Server<undefined>;
  readonly url: string;
  /** Stops accepting, lets the generation in flight end, and closes. */
  stop(): Promise<void>;
}

export function startServer(source: GenerationSource, tokenizer: Tokenizer, options: ServeOptions): RunningServer {
  const stopIdSet = stopIds(controlIds(tokenizer));
  const queue = new GenerationQueue(options.queue, options.parallel ?? 1);
  /** Requests answered and the ids they generated, for /health. */
  const served = { requests: 0, generatedIds: 0 };
  const metrics = new ServerMetrics();
  const count = (usage: { prompt_tokens: number; completion_tokens: number }, stats?: CompletionStats) => {
    served.requests++;
    served.generatedIds += usage.completion_tokens;
    metrics.add("k3:prompt_tokens_total", usage.prompt_tokens);
    metrics.add("k3:generation_tokens_total", usage.completion_tokens);
    if (stats) {
      metrics.add("k3:prompt_tokens_reused_total", stats.reused_prompt_ids, { source: stats.reused_from });
      if (usage.completion_tokens > 1) metrics.observe("k3:time_per_output_token_seconds", stats.decode_seconds / (usage.completion_tokens - 1));
    }
  };
  /** A generation's turn: how long it waited for it is observed. */
  const waitTurn = async (turn: { ready: Promise<() => void> }) => {
    const started = performance.now();
    const release = await turn.ready;
    metrics.observe("k3:request_queue_time_seconds", (performance.now() - started) / 1000);
    return release;
  };
  const scrape = () => {
    const b = source.batchStats;
    const read = options.bytesRead?.();
    return new Response(metrics.render({
      "k3:num_requests_running": queue.running, "k3:num_requests_waiting": queue.waiting,
      "k3:batch_rows_per_step": b && b.steps > 0 ? b.rows / b.steps : 0,
      "k3:bytes_read_total": read ?? 0,
      "k3:bytes_read_per_generated_token": read !== undefined && served.generatedIds > 0 ? read / served.generatedIds : 0,
      "k3:expert_cache_retention_ratio": (() => {
        const e = options.expertRetention?.();
        return e && e.requests > 0 ? e.retained / e.requests : 0;
      })(),
      process_resident_memory_bytes: process.memoryUsage.rss(),
    }), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } });
  };
  /**
   * /health: up or stopping; what the server generated (ids per second of the time anything
   * generated, and bytes read from disk per generated id); with --parallel, the batched steps.
   */
  const health = () => {
    const b = source.batchStats;
    const busy = queue.busySeconds;
    const read = options.bytesRead?.();
    return {
      status: closing ? "stopping" : "ok", parallel: options.parallel ?? 1,
      generation: {
        requests: served.requests, generated_ids: served.generatedIds, busy_seconds: Number(busy.toFixed(3)),
        ids_per_second: busy > 0 ? Number((served.generatedIds / busy).toFixed(3)) : 0,
        ...(read !== undefined && { bytes_read: read, bytes_per_generated_id: served.generatedIds > 0 ? Math.round(read / served.generatedIds) : 0 }),
      },
      ...(b && { batch: { steps: b.steps, sequences: b.sequences, rows: b.rows, max_sequences: b.maxSequences, max_rows: b.maxRows } }),
    };
  };
  // Admission: requests are parsed, rendered and encoded one at a time, so a flood of large
  // bodies costs one parse's memory, not one per connection; as many may wait as for a generation.
  const admission = new GenerationQueue(options.queue);
  const queueFull = () => errorResponse(apiError(429, "rate_limit_error", `the queue is full (${options.queue} waiting); try again`, "queue_full"), { "retry-after": "1" });
  /** Runs `parse` in its turn at admission (429 when too many wait), before the request may join the generation queue. */
  async function admitted<T>(parse: () => T | Promise<T>): Promise<T | Response> {
    const gate = admission.enter();
    if (!gate) return queueFull();
    const done = await gate.ready;
    try {
      return await parse();
    } catch (error) {
      return errorResponse(fromThrown(error));
    } finally {
      done();
    }
  }
  let closing = false;
  /** The drain's time ran out: generations still running stop at their next id, answered with an error. */
  let cut = false;
  /** Runs a generation; if data was dropped meanwhile (an expert read failed), its reply is refused whole. */
  const guardedRun = async <T>(run: () => Promise<T>): Promise<T> => {
    const before = options.dataLost?.().length ?? 0;
    const result = await run();
    const lost = options.dataLost?.().slice(before) ?? [];
    if (lost.length > 0) {
      throw runtimeError(`RUN INVALID: ${lost.length} routed expert load(s) failed during this request (${lost[0]}${lost.length > 1 ? ", ..." : ""}); its reply would be corrupt and is not returned`);
    }
    return result;
  };
  const cutError = () => runtimeError(`the server stopped: generation cut after the ${options.drainTimeoutSeconds ?? defaultDrainTimeoutSeconds} s drain (--drain-timeout)`);
  const created = Math.floor(Date.now() / 1000);
  const model = { id: options.modelName, object: "model", created, owned_by: "k3" };

  /**
   * The body, or the 413 answer when it is over --max-body (never read past the limit), or 408
   * when it has not all arrived within --body-timeout (a slow client holds no descriptor
   * longer). Once read, the connection's idle limit is lifted: a queued or generating request
   * may send nothing for minutes.
   */
  async function readBody(req: Request): Promise<Uint8Array | Response> {
    const tooLarge = () => errorResponse(apiError(413, "invalid_request_error", `the body is over the ${options.maxBodyBytes}-byte limit (--max-body)`, "body_too_large"));
    if (Number(req.headers.get("content-length") ?? "0") > options.maxBodyBytes) return tooLarge();
    const seconds = options.bodyTimeoutSeconds ?? defaultBodyTimeoutSeconds;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((resolve) => { timer = setTimeout(() => resolve("late"), seconds * 1000); });
    try {
      const body = await Promise.race([readBounded(req, options.maxBodyBytes), late]);
      if (body === "late") {
        return errorResponse(apiError(408, "invalid_request_error", `the body did not arrive within ${seconds} s (--body-timeout)`, "body_timeout"), { connection: "close" });
      }
      if (body === undefined) return tooLarge();
      server.timeout(req, 0);
      return body;
    } finally {
      clearTimeout(timer);
    }
  }

  const unknownModel = (name: string) =>
    errorResponse(apiError(404, "invalid_request_error", `model '${name}' does not exist; this server has '${options.modelName}'`, "model_not_found", "model"));

  /**
   * SSE framing shared by both completion kinds: progress comments (src/page/progress.ts), events,
   * a final error event, [DONE]. The first comment goes out at once, and with it the headers (Bun
   * sends them with the first bytes): a queued client knows it was accepted.
   */
  function sse(req: Request, ahead: number, framing: Pick<Door, "doneLine" | "streamError">, body: (send: SendEvent, progress: (p: PrefillProgress) => void) => Promise<void>): Response {
    const encoder = new TextEncoder();
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        const write = (text: string) => {
          if (req.signal.aborted) return;
          try {
            controller.enqueue(encoder.encode(text));
          } catch {
            // The client went away; `cancelled` stops the generation at the next chunk or token.
          }
        };
        const send: SendEvent = (data, event) => write(`${event === undefined ? "" : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`);
        const comment = (p: StreamProgress) => write(progressComment(p));
        comment({ kind: "queue", ahead });
        try {
          await body(send, (p) => comment({ kind: "prefill", ...p }));
          if (framing.doneLine && !req.signal.aborted) controller.enqueue(encoder.encode("data: [DONE]\n\n"));
        } catch (error) {
          framing.streamError(fromThrown(error), send);
        } finally {
          try {
            controller.close();
          } catch {
            // already closed by a departed client
          }
        }
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
  }

  /** `n` against the sequences this server decodes at once: each choice is one of them. */
  const parallel = options.parallel ?? 1;
  const checkChoices = (n: number) => {
    if (n > parallel) throw fieldError("n", `${n} choices, but this server decodes ${parallel} sequence${parallel === 1 ? "" : "s"} at once and each choice is one (start it with --parallel ${n} or more)`);
  };

  async function textCompletions(req: Request): Promise<Response> {
    const bytes = await readBody(req);
    if (bytes instanceof Response) return bytes;
    const request = await admitted((): TextRequest | Response => {
      const r = parseTextRequest(bytes, tokenizer, source.capacity);
      if (r.model !== undefined && r.model !== options.modelName) return unknownModel(r.model);
      checkChoices(r.choices);
      return r;
    });
    if (request instanceof Response) return request;
    const turn = queue.enter(request.choices);
    if (!turn) return queueFull();
    const head = { id: `cmpl-${crypto.randomUUID().replaceAll("-", "")}`, object: "text_completion", created: Math.floor(Date.now() / 1000), model: options.modelName };
    const cancelled = () => req.signal.aborted;
    const choiceOf = (c: TextChoice, entries = c.logprobs, offset = 0) => ({
      index: c.index, text: c.text, logprobs: entries ? legacyLogprobs(entries, tokenizer, offset) : null, finish_reason: c.finishReason,
    });
    if (!request.stream) {
      const release = await turn.ready;
      try {
        const c = await guardedRun(() => runTextCompletion(request, source, tokenizer, stopIdSet, { onText: () => {}, cancelled }));
        count(c.usage, c.stats);
        return Response.json({ ...head, choices: c.choices.map((choice) => choiceOf(choice)), usage: c.usage, k3: c.stats });
      } catch (error) {
        return errorResponse(fromThrown(error));
      } finally {
        release();
      }
    }
    return sse(req, turn.ahead, chatCompletionsDoor, async (send, progress) => {
      const release = await turn.ready;
      /** Characters each choice has streamed: where its next chunk's text_offset starts. */
      const sent: number[] = [];
      try {
        const c = await guardedRun(() => runTextCompletion(request, source, tokenizer, stopIdSet, {
          onText: (text, index, entries) => {
            const offset = sent[index] ?? 0;
            sent[index] = offset + text.length;
            send({ ...head, choices: [{ index, text, logprobs: entries ? legacyLogprobs(entries, tokenizer, offset) : null, finish_reason: null }] });
          },
          onChoiceEnd: (choice) => send({ ...head, choices: [choiceOf({ ...choice, text: "" }, choice.unsent, sent[choice.index] ?? 0)] }),
          cancelled, onPrefill: progress,
        }));
        count(c.usage, c.stats);
        if (request.includeUsage) send({ ...head, choices: [], usage: c.usage, k3: c.stats });
      } finally {
        release();
      }
    });
  }

  /**
   * A chat request through `door` (door-*.ts): its body read and checked at admission, its reply
   * budget and constraint prepared, its turn in the one queue, then the whole reply or its stream
   * in the door's shapes. Every chat door takes this one path, so no door has its own rules.
   */
  async function chatDoor(req: Request, door: Door): Promise<Response> {
    const arrived = performance.now();
    const bytes = await readBody(req);
    if (bytes instanceof Response) return bytes;
    const prepared = await admitted(async (): Promise<PreparedCompletion | Response> => {
      const request = door.parse(bytes);
      if (request.model !== undefined && request.model !== options.modelName) return unknownModel(request.model);
      checkChoices(request.choices);
      return await prepareCompletion(request, tokenizer, source.capacity, { defaultMaxTokens: options.defaultMaxTokens, clampMaxTokens: door.clampMaxTokens });
    });
    if (prepared instanceof Response) return prepared;
    const turn = queue.enter(prepared.request.choices);
    if (!turn) return queueFull();
    const head: ReplyHead = { id: replyId(door.idPrefix), created: Math.floor(Date.now() / 1000), model: options.modelName };
    const cancelled = () => req.signal.aborted || cut;
    let first = true;
    /** The first id of a reply is seen here, whichever choice and whether or not it streams. */
    const firstId = () => {
      if (first) metrics.observe("k3:time_to_first_token_seconds", (performance.now() - arrived) / 1000);
      first = false;
    };
    if (!prepared.request.stream) {
      const release = await waitTurn(turn);
      try {
        const c = await guardedRun(() => runCompletion(prepared, source, tokenizer, stopIdSet, { onDelta: () => {}, cancelled, onFirstId: firstId }));
        if (cut) throw cutError();
        count(c.usage, c.stats);
        return Response.json(door.body(head, prepared, c, tokenizer));
      } catch (error) {
        return errorResponse(fromThrown(error));
      } finally {
        release();
      }
    }
    return sse(req, turn.ahead, door, async (send, progress) => {
      const release = await waitTurn(turn);
      try {
        const writer = door.stream(head, prepared, send, tokenizer);
        const c = await guardedRun(() => runCompletion(prepared, source, tokenizer, stopIdSet, {
          onDelta: writer.delta, onChoiceEnd: writer.choiceEnd, cancelled, onFirstId: firstId,
          onPrefill: (p) => {
            progress(p);
            writer.prefill?.(p);
          },
        }));
        if (cut) throw cutError(); // the stream's last event is the error
        count(c.usage, c.stats);
        writer.end(c);
      } finally {
        release();
      }
    });
  }

  /** `POST /v1/messages/count_tokens`: the prompt ids of a Messages body, counted as its reply's usage counts them. */
  async function countTokens(req: Request): Promise<Response> {
    const bytes = await readBody(req);
    if (bytes instanceof Response) return bytes;
    return await admitted((): Response => {
      const request = parseMessagesRequest(bytes, "count").chat;
      if (request.model !== undefined && request.model !== options.modelName) return unknownModel(request.model);
      return Response.json({ input_tokens: renderChat(request, tokenizer, source.capacity).promptTokens });
    });
  }

  /** Set once the port is bound (a --port 0 server learns its port then). */
  let policy: OriginPolicy | undefined;

  /**
   * The Host and Origin checks (request-origin.ts) before anything else, a CORS preflight
   * answered for allowed origins, and the CORS headers on every answer to an allowed origin.
   */
  async function guarded(req: Request): Promise<Response> {
    // Anthropic's door answers every error in Anthropic's shape, whichever check refused it.
    const response = await checked(req);
    return new URL(req.url).pathname.startsWith("/v1/messages") ? asAnthropicError(response) : response;
  }

  async function checked(req: Request): Promise<Response> {
    const rules = policy as OriginPolicy;
    const host = req.headers.get("host");
    if (!hostAllowed(host, rules)) {
      return errorResponse(apiError(403, "invalid_request_error", `the Host header ${host === null ? "is missing" : excerpt(host)}: not a name of this server (add it with --allow-host NAME)`, "host_not_allowed"));
    }
    const origin = req.headers.get("origin");
    if (!originAllowed(origin, rules)) {
      return errorResponse(apiError(403, "invalid_request_error", `the Origin ${excerpt(origin ?? "")} may not use this server (allow it with --allow-origin ORIGIN)`, "origin_not_allowed"));
    }
    if (origin === null) return route(req);
    const cors = { "access-control-allow-origin": origin, vary: "Origin" };
    if (req.method === "OPTIONS") {
      return new Response(null, {
        status: 204,
        headers: { ...cors, "access-control-allow-methods": "GET, POST, OPTIONS", "access-control-allow-headers": "authorization, content-type, x-api-key, anthropic-version, anthropic-beta", "access-control-max-age": "600" },
      });
    }
    const response = await route(req);
    for (const [name, value] of Object.entries(cors)) response.headers.set(name, value);
    return response;
  }

  async function route(req: Request): Promise<Response> {
    const path = new URL(req.url).pathname;
    if (path === "/health") return req.method === "GET" ? Response.json(health()) : methodNotAllowed("GET");
    if (path === "/metrics" && options.metricsPublic) return req.method === "GET" ? scrape() : methodNotAllowed("GET");
    if (closing) return errorResponse(apiError(503, "server_error", "the server is shutting down", "shutting_down"), { "retry-after": "30" });
    if ((path.startsWith("/v1/") || path === "/metrics") && options.apiKey !== undefined && !keyOf(req, options.apiKey)) {
      return errorResponse(apiError(401, "invalid_request_error", "a missing or wrong API key (send Authorization: Bearer KEY, or x-api-key: KEY)", "invalid_api_key"));
    }
    if (path === "/metrics") return req.method === "GET" ? scrape() : methodNotAllowed("GET");
    if (path === "/v1/models") return req.method === "GET" ? Response.json({ object: "list", data: [model] }) : methodNotAllowed("GET");
    if (path.startsWith("/v1/models/")) {
      if (req.method !== "GET") return methodNotAllowed("GET");
      const wanted = decodeURIComponent(path.slice("/v1/models/".length));
      return wanted === options.modelName ? Response.json(model) : errorResponse(apiError(404, "invalid_request_error", `model '${wanted}' does not exist`, "model_not_found", "model"));
    }
    if (path === "/v1/chat/completions") return req.method === "POST" ? chatDoor(req, chatCompletionsDoor) : methodNotAllowed("POST");
    if (path === "/v1/completions") return req.method === "POST" ? textCompletions(req) : methodNotAllowed("POST");
    if (path === "/v1/messages") return req.method === "POST" ? chatDoor(req, anthropicMessagesDoor) : methodNotAllowed("POST");
    if (path === "/v1/responses") return req.method === "POST" ? chatDoor(req, responsesDoor) : methodNotAllowed("POST");
    if (path === "/v1/messages/count_tokens") return req.method === "POST" ? countTokens(req) : methodNotAllowed("POST");
    return errorResponse(apiError(404, "invalid_request_error", `no route ${req.method} ${path}`, "not_found"));
  }

  const server = listen(options.host, options.port, () => Bun.serve({
    hostname: options.host,
    port: options.port,
    // Far above --max-body, so that k3 answers an oversized body itself, with the OpenAI error
    // body, after reading no more than the limit (readBounded) instead of Bun refusing it bare.
    maxRequestBodySize: options.maxBodyBytes + 256 * 1024 * 1024,
    // Headers that do not arrive and keep-alive connections left idle are closed after this.
    idleTimeout: options.idleTimeoutSeconds ?? defaultIdleTimeoutSeconds,
    // Never share the port with another process (SO_REUSEPORT would split requests between them).
    reusePort: false,
    // Not Bun's development mode: no reloading page and no error pages with stack traces.
    development: false,
    // The chat page and its bundled assets (src/page/), built into the executable; no key needed
    // to load it, the API it talks to stays behind the key.
    routes: pageRoutes(chatPage),
    fetch: async (req) => {
      let response: Response;
      try {
        response = await guarded(req);
      } catch (error) {
        response = errorResponse(fromThrown(error));
      }
      metrics.add("k3:requests_total", 1, { endpoint: endpointOf(new URL(req.url).pathname), status: String(response.status) });
      return response;
    },
  }));
  policy = originPolicy(options.host, server.port ?? options.port, options.allowHosts ?? [], options.allowOrigins ?? []);
  return {
    server,
    url: `http://${options.host.includes(":") ? `[${options.host}]` : options.host}:${server.port}`,
    async stop() {
      closing = true;
      // Generations in flight finish, up to the drain timeout; then each is cut at its next id.
      let drain: ReturnType<typeof setTimeout> | undefined;
      const expired = new Promise<void>((resolve) => { drain = setTimeout(resolve, (options.drainTimeoutSeconds ?? defaultDrainTimeoutSeconds) * 1000); });
      await Promise.race([queue.idle(), expired]);
      clearTimeout(drain);
      cut = true;
      await queue.idle();
      // In-flight responses get a grace period to be written; idle keep-alive connections
      // would otherwise keep the process alive, so whatever is left is then closed.
      // The grace timer is cleared once they drain: a pending timer would keep the process
      // alive for the whole period after the server has stopped.
      let grace: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([server.stop(false), new Promise<void>((resolve) => { grace = setTimeout(resolve, shutdownGraceMs); })]);
      clearTimeout(grace);
      await server.stop(true);
    },
  };
}

/** Runs `bind` (a Bun.serve), with a port another process holds refused by name (exit 1) instead of shared or thrown raw. */
function listen<T>(host: string, port: number, bind: () => T): T {
  try {
    return bind();
  } catch (error) {
    if ((error as { code?: string }).code === "EADDRINUSE") throw portInUse(host, port);
    throw error;
  }
}

const portInUse = (host: string, port: number) => runtimeError(`serve: port ${port} on ${host} is in use (another server listens there): stop it or pick another --port`);

/**
 * Fails at once, before a model is loaded, when the port is taken: binds it and lets it go.
 * The real bind, after loading, refuses the same way if another process took it meanwhile.
 */
export function checkPortFree(host: string, port: number): void {
  if (port === 0) return;
  const probe = listen(host, port, () => Bun.serve({ hostname: host, port, reusePort: false, fetch: () => new Response(null, { status: 503 }) }));
  probe.stop(true);
}

/** The body, read chunk by chunk and given up on past `limit` bytes (undefined then). */
async function readBounded(req: Request, limit: number): Promise<Uint8Array | undefined> {
  if (!req.body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of req.body) {
    total += chunk.byteLength;
    if (total > limit) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

function methodNotAllowed(allowed: string): Response {
  return errorResponse(apiError(405, "invalid_request_error", `method not allowed (use ${allowed})`, "method_not_allowed"), { allow: allowed });
}


