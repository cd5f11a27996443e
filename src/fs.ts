/**
 * The filesystem rules every writer and reader in k3 follows: nothing a user owns is left
 * half-written (a temporary file beside it, then a rename), and a failure names the file and the
 * errno.
 */
import { closeSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { K3Error, runtimeError } from "./errors.ts";

/** The errno code of a failed filesystem call (ENOENT, EACCES, ...), or "error". */
export function errnoCode(error: unknown): string {
  return (error as NodeJS.ErrnoException | undefined)?.code ?? "error";
}

/** Where `path` is written before its rename; a crash leaves only this name behind. */
export const temporaryPathFor = (path: string): string => `${path}.${process.pid}.tmp`;

/**
 * Writes `path` through a temporary file: `fill` writes it through the descriptor, `check` may
 * read the finished temporary back (and throw) before the rename makes it visible. On any
 * failure the temporary is removed and `path` is untouched.
 */
export function writeFileAtomically(path: string, what: string, fill: (fd: number) => void, check?: (temporary: string) => void): void {
  const temporary = temporaryPathFor(path);
  const fail = (error: unknown) => {
    rmSync(temporary, { force: true });
    return error instanceof K3Error ? error : runtimeError(`${path}: cannot write ${what} (${errnoCode(error)})`);
  };
  try {
    const fd = openSync(temporary, "w");
    try {
      fill(fd);
    } finally {
      closeSync(fd);
    }
    check?.(temporary);
    renameSync(temporary, path);
  } catch (error) {
    throw fail(error);
  }
}

/** Writes all of `bytes` at `position` (or at the current offset), however many calls it takes. */
export function writeFully(fd: number, bytes: Uint8Array, position?: number): void {
  let done = 0;
  while (done < bytes.byteLength) {
    done += writeSync(fd, bytes, done, bytes.byteLength - done, position === undefined ? null : position + done);
  }
}

/** Writes `data` to `path` whole or not at all. */
export function writeAtomically(path: string, data: string | Uint8Array, what: string): void {
  writeFileAtomically(path, what, (fd) => writeFully(fd, typeof data === "string" ? Buffer.from(data, "utf8") : data));
}

/** The whole file, or a runtime error (exit 1) naming it and, if given, what it was for. */
export function readOrFail(path: string, what?: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw runtimeError(`${path}: cannot read${what ? ` ${what}` : ""} (${errnoCode(error)})`);
  }
}
