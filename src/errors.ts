import { inputLimits } from "./input-limits.ts";

/** Exit codes k3 documents (runtime.md section 1.7). One table; nothing else picks numbers. */
export const ExitCode = {
  ok: 0,
  /** Runtime failure: unreadable shards, missing tensors, refused plan, failed read. */
  runtime: 1,
  /** Usage error, invalid request, or a config that could not be read with confidence. */
  usage: 2,
  /** The run finished but a routed expert failed to load: the ids are corrupt. */
  corruptTokens: 4,
  /** Stopped by SIGINT (Ctrl-C), 128 + 2 as a shell reports it; nothing was written. */
  interrupted: 130,
  /** Stopped by SIGTERM, 128 + 15; nothing was written. */
  terminated: 143,
} as const;

export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

/**
 * The one error type k3 raises for anything a user can cause. It carries the exit code and a
 * message that names the file, field or flag; the CLI prints it on one line, never a stack.
 */
export class K3Error extends Error {
  readonly exitCode: ExitCodeValue;
  /** Extra lines printed after the message (usage text, preset list). */
  readonly detail: string | undefined;
  /** The request field (or flag) refused, as data: an HTTP error's `param`. */
  readonly field: string | undefined;
  /** What kind of refusal, as data, when a client may act on it: an HTTP error's `code`. */
  readonly kind: RefusalKind | undefined;

  constructor(exitCode: ExitCodeValue, message: string, detail?: string, field?: string, kind?: RefusalKind) {
    super(message);
    this.name = "K3Error";
    this.exitCode = exitCode;
    this.detail = detail;
    this.field = field;
    this.kind = kind;
  }
}

export function usageError(message: string, detail?: string): K3Error {
  return new K3Error(ExitCode.usage, message, detail);
}

/** A usage error about one field: the message names it first (`field: reason`), and it is kept as data. */
/** Refusals a client can act on, by OpenAI's codes: `context_length_exceeded` (shorten the conversation). */
export type RefusalKind = "context_length_exceeded";

export function fieldError(field: string, reason: string, kind?: RefusalKind): K3Error {
  return new K3Error(ExitCode.usage, `${field}: ${reason}`, undefined, field, kind);
}

export function runtimeError(message: string): K3Error {
  return new K3Error(ExitCode.runtime, message);
}

/**
 * Input text as a message quotes it: JSON-escaped, so no control character or line break can
 * split the one-line message, and at most `inputLimits.excerptChars` code points, "..." marking a
 * cut, so a 20 MB input gives a short line.
 */
export function excerpt(text: string): string {
  const limit = inputLimits.excerptChars;
  if (text.length <= limit) return JSON.stringify(text);
  const points = Array.from(text.slice(0, 2 * limit + 1));
  return JSON.stringify(points.length > limit ? `${points.slice(0, limit).join("")}...` : text);
}

/**
 * A name from an input (a tensor, a key) as a message shows it: as it is when it is short and
 * plain (printable ASCII, no quote), else as an excerpt.
 */
export function displayName(name: string): string {
  return /^[\x21\x23-\x7e]{1,200}$/.test(name) ? name : excerpt(name);
}

/**
 * A command-line or environment value as a message quotes it: 'as typed' when short and
 * printable, else as an excerpt (a value can hold line breaks and be 128 KB long).
 */
export function quoteArgument(raw: string): string {
  return /^[\x20-\x26\x28-\x7e]{0,60}$/.test(raw) ? `'${raw}'` : excerpt(raw);
}

/** A token of the command line as a message names it: as typed when short and plain, else an excerpt. */
export function argumentName(raw: string): string {
  return /^[\x21-\x7e]{1,60}$/.test(raw) ? raw : excerpt(raw);
}
