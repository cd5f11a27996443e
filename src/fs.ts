/**
 * The filesystem rules every writer and reader in k3 follows: nothing a user owns is left
 * half-written (a temporary file, then a rename), and a failure names the file and the errno.
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { runtimeError } from "./errors.ts";

/** The errno code of a failed filesystem call (ENOENT, EACCES, ...), or "error". */
export function errnoCode(error: unknown): string {
  return (error as NodeJS.ErrnoException | undefined)?.code ?? "error";
}

/** Writes `data` to `path` through a temporary file and a rename, so no half file is left. */
export function writeAtomically(path: string, data: string | Uint8Array, what: string): void {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    writeFileSync(temporary, data);
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw runtimeError(`${path}: cannot write ${what} (${errnoCode(error)})`);
  }
}

/** The whole file, or a runtime error (exit 1) naming it and, if given, what it was for. */
export function readOrFail(path: string, what?: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw runtimeError(`${path}: cannot read${what ? ` ${what}` : ""} (${errnoCode(error)})`);
  }
}
