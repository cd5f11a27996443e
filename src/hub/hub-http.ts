/**
 * HTTP to the Hub. The token (HF_TOKEN) goes only to the Hub's own origin, over https or to
 * loopback: redirects are followed here, hop by hop, so a redirect to a CDN or anywhere else never
 * carries it. Nothing here prints a header, and no message built here contains the token.
 *
 * Answers are sorted into three kinds: success; a clear stop (401, 403, 404 and other client
 * errors, with a message saying what to do); and transient trouble (429, 5xx, a dropped or
 * refused connection), which the caller retries with backoff.
 */
import { ExitCode, K3Error } from "../errors.ts";
import { mayCarryToken, repoPageUrl, type HubEndpoint } from "./hub-endpoint.ts";
import { inputLimits } from "../input-limits.ts";
import { HubResponseError, parseJsonText, parseRetryAfterSeconds } from "./hub-response.ts";

export interface RetryPolicy {
  /** Tries per request, the first included. */
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { attempts: 6, baseDelayMs: 500, maxDelayMs: 20_000 };

/** A Retry-After longer than this is waited for only this long, then retried. */
const maxRetryAfterSeconds = 60;
const maxRedirects = 10;
/** API answers (revision info, a listing page) are small; larger is a broken or hostile server. */
export const maxJsonBytes = inputLimits.hubAnswerBytes;
const apiTimeoutMs = 60_000;

/** Trouble worth another try: the server or the network, not the request. */
export class TransientError extends Error {
  /** Seconds the server asked us to wait (Retry-After), if it did. */
  readonly retryAfterSeconds: number | undefined;

  constructor(message: string, retryAfterSeconds?: number) {
    super(message);
    this.name = "TransientError";
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** A short, token-free description of a failed fetch (its errno code where Bun gives one). */
export function networkErrorText(error: unknown): string {
  const code = (error as { code?: unknown } | undefined)?.code;
  if (typeof code === "string" && /^[A-Za-z_]{2,40}$/.test(code)) return code === "ABORT_ERR" ? "timed out" : code;
  if ((error as Error | undefined)?.name === "TimeoutError" || (error as Error | undefined)?.name === "AbortError") return "timed out";
  return "connection failed";
}

/** The delay before try `attempt` (1-based count of failures so far). */
export function backoffMs(policy: RetryPolicy, failures: number, retryAfterSeconds: number | undefined): number {
  if (retryAfterSeconds !== undefined) return retryAfterSeconds * 1000;
  return Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (failures - 1));
}

export interface StatusContext {
  /** What was being fetched, for the message: "revision main of moonshotai/Kimi-K3", a file path. */
  what: string;
  repo: string;
  /** The kind of thing a 404 means is missing. */
  subject: "repo" | "revision" | "file";
  revision?: string;
  commit?: string;
}

const redirectStatuses = new Set([301, 302, 303, 307, 308]);

export class HubClient {
  readonly endpoint: HubEndpoint;
  readonly #token: string | undefined;
  readonly #userAgent: string;

  constructor(endpoint: HubEndpoint, token: string | undefined, userAgent: string) {
    this.endpoint = endpoint;
    this.#token = token;
    this.#userAgent = userAgent;
  }

  get hasToken(): boolean {
    return this.#token !== undefined;
  }

  /** Replaces the token wherever it appears in `text` (a hostile server could echo it back). */
  redact(text: string): string {
    return this.#token ? text.split(this.#token).join("<HF_TOKEN>") : text;
  }

  /**
   * GET `url`, following redirects here; the token rides only on hops to the Hub's origin.
   * Network failures become TransientError; statuses are the caller's to judge.
   */
  async get(url: string, options: { range?: number; signal?: AbortSignal } = {}): Promise<Response> {
    let current = new URL(url);
    for (let hop = 0; ; hop++) {
      const headers: Record<string, string> = { "user-agent": this.#userAgent, "accept-encoding": "identity" };
      if (this.#token !== undefined && mayCarryToken(current, this.endpoint)) headers.authorization = `Bearer ${this.#token}`;
      if (options.range !== undefined && options.range > 0) headers.range = `bytes=${options.range}-`;
      let response: Response;
      try {
        response = await fetch(current, { headers, redirect: "manual", signal: options.signal, decompress: false });
      } catch (error) {
        throw new TransientError(networkErrorText(error));
      }
      if (!redirectStatuses.has(response.status)) return response;
      const location = response.headers.get("location");
      await response.body?.cancel().catch(() => {});
      if (location === null) throw new HubResponseError(`${current.pathname}: a redirect (${response.status}) without a Location`);
      if (hop + 1 >= maxRedirects) throw new HubResponseError(`${url}: more than ${maxRedirects} redirects`);
      let next: URL;
      try {
        next = new URL(location, current);
      } catch {
        throw new HubResponseError(`${current.pathname}: a redirect to something that is not a URL`);
      }
      if (next.protocol !== "https:" && next.protocol !== "http:") throw new HubResponseError(`${current.pathname}: a redirect to a ${next.protocol} URL`);
      current = next;
    }
  }

  /** GET a JSON answer of the API, retried on transient trouble; a clear stop on 4xx. */
  async getJson(url: string, context: StatusContext, policy: RetryPolicy): Promise<{ body: unknown; headers: Headers }> {
    return withRetries(policy, context.what, async () => {
      const response = await this.get(url, { signal: AbortSignal.timeout(apiTimeoutMs) });
      if (!response.ok) throw this.statusError(response, context);
      const text = await readTextCapped(response, maxJsonBytes, context.what);
      return { body: parseJsonText(text, context.what), headers: response.headers };
    });
  }

  /**
   * The error for an unsuccessful status: TransientError for 408, 429 and 5xx; otherwise a
   * K3Error (exit 1) saying what is wrong and what to do.
   */
  statusError(response: Response, context: StatusContext): Error {
    const { status } = response;
    void response.body?.cancel().catch(() => {});
    if (status === 408 || status === 429 || status >= 500) {
      return new TransientError(`HTTP ${status}`, parseRetryAfterSeconds(response.headers.get("retry-after"), maxRetryAfterSeconds));
    }
    const code = response.headers.get("x-error-code") ?? "";
    const page = repoPageUrl(this.endpoint, context.repo);
    const { what } = context;
    let message: string;
    if (status === 401) {
      message = this.#token
        ? `${what}: the Hub refused the token in HF_TOKEN (401): check that it is valid and can read ${context.repo}`
        : `${what}: the Hub asks for authentication (401): ${context.repo} may be private, gated or misspelled; ` +
          `set HF_TOKEN to an access token that can read it`;
    } else if (status === 403) {
      message = `${what}: access denied (403)${code === "GatedRepo" ? ", the repository is gated" : ""}: ` +
        `accept its terms at ${page} with the account of HF_TOKEN, or use a token with read access`;
    } else if (status === 404) {
      if (code === "RepoNotFound" || context.subject === "repo") message = `${what}: ${context.repo} was not found (404): check --repo`;
      else if (code === "RevisionNotFound" || context.subject === "revision") {
        message = `${what}: revision '${context.revision ?? "?"}' does not exist in ${context.repo} (404): check --revision`;
      } else {
        message = `${what}: not found at commit ${context.commit ?? "?"} (404), although the listing names it: ` +
          `re-run later, or download from ${page}`;
      }
    } else {
      message = `${what}: the Hub answered HTTP ${status}`;
    }
    return new K3Error(ExitCode.runtime, message);
  }
}

/** Reads a body as text, refusing more than `maxBytes`. */
export async function readTextCapped(response: Response, maxBytes: number, what: string): Promise<string> {
  const declared = Number(response.headers.get("content-length") ?? "0");
  if (declared > maxBytes) throw new HubResponseError(`${what}: the answer is larger than ${maxBytes} bytes`);
  const reader = response.body?.getReader();
  if (!reader) return "";
  const chunks: Uint8Array[] = [];
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > maxBytes) {
        await reader.cancel().catch(() => {});
        throw new HubResponseError(`${what}: the answer is larger than ${maxBytes} bytes`);
      }
      chunks.push(value);
    }
  } catch (error) {
    if (error instanceof K3Error) throw error;
    throw new TransientError(networkErrorText(error));
  }
  const text = new TextDecoder("utf-8", { fatal: false }).decode(Buffer.concat(chunks));
  return text;
}

/** Runs `attempt` until it succeeds, retrying TransientError with backoff up to the policy. */
export async function withRetries<T>(policy: RetryPolicy, what: string, attempt: () => Promise<T>, onRetry?: (text: string, delayMs: number) => void): Promise<T> {
  for (let failures = 0; ; ) {
    try {
      return await attempt();
    } catch (error) {
      if (!(error instanceof TransientError)) throw error;
      failures++;
      if (failures >= policy.attempts) {
        throw new K3Error(ExitCode.runtime, `${what}: gave up after ${failures} attempts (last: ${error.message})`);
      }
      const delay = backoffMs(policy, failures, error.retryAfterSeconds);
      onRetry?.(error.message, delay);
      await Bun.sleep(delay);
    }
  }
}
