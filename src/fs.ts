/**
 * The filesystem rules every writer and reader in k3 follows: nothing a user owns is left
 * half-written (a temporary file beside it, then a rename), and a failure names the file and the
 * errno.
 */
import { closeSync, fstatSync, openSync, readSync, renameSync, rmSync, writeSync } from "node:fs";
import { ExitCode, K3Error, runtimeError, type ExitCodeValue } from "./errors.ts";

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

/** Bytes asked of one read call while a capped read fills its buffer. */
const readChunkBytes = 1024 * 1024;

/**
 * All of `source` (a path, or 0 for standard input), at most `maxBytes` of it: a longer input is
 * refused as soon as it is seen to be longer (a regular file by its size, a pipe or device such
 * as /dev/zero after `maxBytes + 1` bytes), so no input can make k3 read or allocate without
 * bound. Every failure is a K3Error with `exitCode` naming the file and what it was for.
 */
export function readCapped(source: string | 0, maxBytes: number, what: string, exitCode: ExitCodeValue = ExitCode.runtime): Buffer {
  const name = source === 0 ? "standard input" : source;
  const fail = (detail: string) => new K3Error(exitCode, `${name}: cannot read ${what}: ${detail}`);
  const failed = (error: unknown) => new K3Error(exitCode, `${name}: cannot read ${what} (${errnoCode(error)})`);
  let fd: number;
  try {
    fd = source === 0 ? 0 : openSync(source, "r");
  } catch (error) {
    throw failed(error);
  }
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw fail("it is a directory");
    if (stat.isFile() && stat.size > maxBytes) throw fail(`${stat.size} bytes, more than the ${maxBytes}-byte limit`);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(readChunkBytes, maxBytes + 1 - total));
      let n: number;
      try {
        n = readSync(fd, chunk, 0, chunk.length, null);
      } catch (error) {
        if (errnoCode(error) === "EAGAIN") {
          Bun.sleepSync(1); // a non-blocking standard input with nothing yet
          continue;
        }
        throw failed(error);
      }
      if (n === 0) break;
      chunks.push(chunk.subarray(0, n));
      total += n;
      if (total > maxBytes) throw fail(`more than the ${maxBytes}-byte limit`);
    }
    return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, total);
  } catch (error) {
    if (error instanceof K3Error) throw error;
    throw failed(error);
  } finally {
    if (fd !== 0) closeSync(fd);
  }
}

/** The whole file at most `maxBytes` long, or a runtime error (exit 1) naming it and what it was for. */
export function readOrFail(path: string, what: string, maxBytes: number): Buffer {
  return readCapped(path, maxBytes, what);
}
