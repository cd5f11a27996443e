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

  constructor(exitCode: ExitCodeValue, message: string, detail?: string) {
    super(message);
    this.name = "K3Error";
    this.exitCode = exitCode;
    this.detail = detail;
  }
}

export function usageError(message: string, detail?: string): K3Error {
  return new K3Error(ExitCode.usage, message, detail);
}

export function runtimeError(message: string): K3Error {
  return new K3Error(ExitCode.runtime, message);
}
