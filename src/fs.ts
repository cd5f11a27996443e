/**
 * The filesystem rules every writer and reader in k3 follows: nothing a user owns is left
 * half-written (a temporary file beside it, then a rename), a special file is never replaced (a
 * device or FIFO is written in place, a symlink's target is what gets replaced), a failed write
 * leaves no temporary behind, and a failure names the file (and the flag) and the errno. Where
 * the filesystem allows (Linux, O_TMPFILE), the content is staged in an unnamed file that gets a
 * name only at commit, so even a SIGKILL mid-write leaves nothing beside the target (the link
 * call comes from src/native once libk3 is loaded, which every command that writes large files does).
 */
import { accessSync, closeSync, constants, copyFileSync, fstatSync, lstatSync, openSync, readlinkSync, readSync, realpathSync, renameSync, statSync, unlinkSync, writeSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { ExitCode, K3Error, runtimeError, usageError, type ExitCodeValue } from "./errors.ts";

/** The errno code of a failed filesystem call (ENOENT, EACCES, ...), or "error". */
export function errnoCode(error: unknown): string {
  return (error as NodeJS.ErrnoException | undefined)?.code ?? "error";
}

const errnoWords: Record<string, string> = {
  ENOENT: "no such file or directory",
  EACCES: "permission denied",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENOSPC: "no space left on device",
  EDQUOT: "disk quota exceeded",
  EFBIG: "file too large",
  EIO: "input/output error",
  EISDIR: "is a directory",
  ENOTDIR: "a component of the path is not a directory",
  ENAMETOOLONG: "name too long",
  ELOOP: "too many levels of symbolic links",
  EEXIST: "already exists",
  ETXTBSY: "text file busy",
};

/** "no space left on device (ENOSPC)": what a failed call means, and its code. */
export function errnoReason(error: unknown): string {
  const code = errnoCode(error);
  return errnoWords[code] ? `${errnoWords[code]} (${code})` : `(${code})`;
}

/** Linux's NAME_MAX: the longest single file name, in bytes. */
const maxNameBytes = 255;
/** Linux's MAXSYMLINKS: more links than this in a chain is a loop (ELOOP). */
const maxSymlinkHops = 40;
/** What rename temporaries end with; an interrupted write leaves only such a name behind. */
const temporarySuffix = ".tmp";

function errnoError(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(code), { code });
}

/**
 * Where `path` is written before its rename: `<path>.<pid>.tmp`, its name shortened when that
 * would pass NAME_MAX. A crash leaves only this name behind.
 */
export function temporaryPathFor(path: string): string {
  const suffix = `.${process.pid}${temporarySuffix}`;
  const name = basename(path);
  const room = maxNameBytes - Buffer.byteLength(suffix);
  if (Buffer.byteLength(name) <= room) return `${path}${suffix}`;
  const shortened = Buffer.from(name).subarray(0, room).toString("utf8").replace(/\uFFFD+$/, "");
  return join(dirname(path), `${shortened}${suffix}`);
}

/**
 * What writing `path` means. A regular file (or none yet) is replaced by a rename; a character
 * device or FIFO (/dev/null, /dev/stdout, a pipe) is written in place; a symlink is followed to
 * the file it names, so the link stays a link. `path` here is that final file.
 */
export interface OutputTarget {
  path: string;
  kind: "absent" | "regular" | "in-place" | "directory" | "other";
  /** One of this process's open descriptors (/dev/stdout, /dev/fd/N): written through directly, since a socket cannot be reopened. */
  fd?: number;
}

/** Follows `path` through its symlinks (also dangling ones) to what a write would change; errno errors escape. */
export function outputTarget(path: string): OutputTarget {
  let current = path;
  for (let hop = 0; hop <= maxSymlinkHops; hop++) {
    let stats;
    try {
      stats = lstatSync(current);
    } catch (error) {
      if (errnoCode(error) === "ENOENT") return { path: current, kind: "absent" };
      throw error;
    }
    if (stats.isSymbolicLink()) {
      // Relative links are relative to the directory that holds the link, wherever it really is.
      const linkDir = realpathSync(dirname(current));
      // /proc/<pid>/fd/N (behind /dev/stdout, /dev/fd/N) names an open descriptor, not a path
      // (its text may be "pipe:[…]"): whatever it leads to is written in place through it.
      if (linkDir.startsWith("/proc/")) {
        const kind = classify(statSync(current), "in-place");
        const own = new RegExp(`^/proc/${process.pid}/fd$`).test(linkDir) && kind !== "directory";
        return own ? { path: current, kind: "in-place", fd: Number(basename(current)) } : { path: current, kind };
      }
      current = resolve(linkDir, readlinkSync(current));
      continue;
    }
    return { path: current, kind: classify(stats, "regular") };
  }
  throw errnoError("ELOOP");
}

function classify(stats: { isFile(): boolean; isCharacterDevice(): boolean; isFIFO(): boolean; isDirectory(): boolean }, regular: OutputTarget["kind"]): OutputTarget["kind"] {
  if (stats.isFile()) return regular;
  if (stats.isCharacterDevice() || stats.isFIFO()) return "in-place";
  return stats.isDirectory() ? "directory" : "other";
}

/** "--out x.json" or "x.json": how messages about an output name it. */
const outputName = (path: string, flag?: string) => (flag ? `${flag} ${path}` : path);

/**
 * Checks, before any work, that `path` can be written as an output: what it names is a regular
 * file, a device or a FIFO (not a directory), its directory exists and is writable, and its
 * name fits. A refusal is a usage error (exit 2) naming the flag and the path. "-" (stdout) passes.
 */
export function checkOutputFile(path: string, flag: string): void {
  if (path === "-") return;
  const refuse = (reason: string) => usageError(`${outputName(path, flag)}: ${reason}`);
  let target: OutputTarget;
  try {
    target = outputTarget(path);
  } catch (error) {
    throw refuse(errnoReason(error));
  }
  if (target.kind === "directory") throw refuse("is a directory; give a file name");
  if (target.kind === "other") throw refuse("is not a regular file, a character device or a FIFO");
  if (Buffer.byteLength(basename(target.path)) > maxNameBytes) throw refuse(errnoReason(errnoError("ENAMETOOLONG")));
  const dir = dirname(target.path);
  if (target.kind === "absent") {
    let dirStats;
    try {
      dirStats = statSync(dir);
    } catch (error) {
      throw refuse(errnoCode(error) === "ENOENT" ? `directory ${dir} does not exist` : `directory ${dir}: ${errnoReason(error)}`);
    }
    if (!dirStats.isDirectory()) throw refuse(`${dir} is not a directory`);
  }
  // In place needs the file writable; a rename needs its directory writable (access() also says EROFS).
  const mustWrite = target.kind === "in-place" ? target.path : dir;
  try {
    accessSync(mustWrite, constants.W_OK);
  } catch (error) {
    throw refuse(`${mustWrite === target.path ? "" : `directory ${dir} is `}not writable: ${errnoReason(error)}`);
  }
}

/**
 * Checks, before any work, that `dir` can hold outputs: an existing writable directory or, with
 * `create`, a path whose nearest existing ancestor is a writable directory. Usage error otherwise.
 */
export function checkOutputDir(dir: string, flag: string, options: { create: boolean }): void {
  const refuse = (reason: string) => usageError(`${outputName(dir, flag)}: ${reason}`);
  let existing = dir;
  for (;;) {
    let stats;
    try {
      stats = statSync(existing);
    } catch (error) {
      const code = errnoCode(error);
      if (code !== "ENOENT") throw refuse(existing === dir ? errnoReason(error) : `${existing}: ${errnoReason(error)}`);
      if (!options.create) throw refuse("directory does not exist");
      const parent = dirname(existing);
      if (parent === existing) throw refuse("directory does not exist");
      if (Buffer.byteLength(basename(existing)) > maxNameBytes) throw refuse(errnoReason(errnoError("ENAMETOOLONG")));
      existing = parent;
      continue;
    }
    if (!stats.isDirectory()) throw refuse(existing === dir ? "is not a directory" : `${existing} is not a directory`);
    break;
  }
  try {
    accessSync(existing, constants.W_OK);
  } catch (error) {
    throw refuse(`${existing === dir ? "" : `directory ${existing} is `}not writable: ${errnoReason(error)}`);
  }
}

/** Removes a temporary if it is there; never throws (a failure to clean up must not hide the first error). */
function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Gone already, or the filesystem refuses even that: the first error is the one to report.
  }
}

/** Writes all of `bytes` at `position` (or at the current offset), however many calls it takes. */
export function writeFully(fd: number, bytes: Uint8Array, position?: number): void {
  let done = 0;
  while (done < bytes.byteLength) {
    done += writeSync(fd, bytes, done, bytes.byteLength - done, position === undefined ? null : position + done);
  }
}

/** Linux's O_TMPFILE (__O_TMPFILE | O_DIRECTORY; Node does not export it): an unnamed file in a directory. */
const openUnnamedFlag = 0o20000000 | constants.O_DIRECTORY;

/** Gives an open unnamed file a name (linkat); false when it cannot. */
export type UnnamedLinker = (fd: number, path: string) => boolean;
let linker: UnnamedLinker | undefined;

/**
 * src/native provides the link call when libk3 loads (bun:ffi stays there). Until then, and
 * where it is missing, staged writes use a named temporary.
 */
export function provideUnnamedLinker(link: UnnamedLinker): void {
  linker = link;
}

let unnamedAllowed = true;

/** Tests: stage in named temporaries only (`false`), as on a filesystem without O_TMPFILE; `true` restores. */
export function allowUnnamedStaging(allowed: boolean): void {
  unnamedAllowed = allowed;
}

/** An unnamed file in `dir` open for writing, or undefined where the kernel or filesystem refuses O_TMPFILE. */
function openUnnamed(dir: string): number | undefined {
  if (!unnamedAllowed || !linker || process.platform !== "linux") return undefined;
  try {
    return openSync(dir, openUnnamedFlag | constants.O_WRONLY, 0o666);
  } catch {
    return undefined; // EOPNOTSUPP, EISDIR (kernels before 3.11), ...: the named temporary instead
  }
}

/** What is being written, for the messages: the file, what it holds, and the flag that named it. */
export interface OutputSpec {
  path: string;
  what: string;
  flag?: string;
}

/**
 * A write prepared but not yet visible. For a regular file the bytes sit complete in the
 * temporary and `commit` renames it into place; for a device or FIFO `commit` writes them then.
 * `discard` removes the temporary; after a failed `commit` there is nothing to discard.
 */
export interface StagedWrite {
  readonly path: string;
  commit(): void;
  discard(): void;
}

const writeFailure = (spec: OutputSpec, error: unknown): K3Error =>
  error instanceof K3Error ? error : runtimeError(`${outputName(spec.path, spec.flag)}: cannot write ${spec.what}: ${errnoReason(error)}`);

function fillFile(path: string, flags: string, fill: (fd: number) => void): void {
  const fd = openSync(path, flags);
  try {
    fill(fd);
  } finally {
    closeSync(fd);
  }
}

/** A staged write whose commit and discard take effect once between them: the first call wins. */
function once(path: string, commit: () => void, discard: () => void): StagedWrite {
  let done = false;
  const first = (action: () => void) => () => {
    if (done) return;
    done = true;
    action();
  };
  return { path, commit: first(commit), discard: first(discard) };
}

/**
 * Prepares `spec.path`: `fill` writes the content through a descriptor, `check` may read the
 * finished temporary back (and throw) before anything is visible. On any failure nothing is
 * left behind and the error (exit 1) names the file, the flag and the errno.
 */
export function stageWrite(spec: OutputSpec, fill: (fd: number) => void, check?: (temporary: string) => void): StagedWrite {
  let target: OutputTarget;
  try {
    target = outputTarget(spec.path);
  } catch (error) {
    throw writeFailure(spec, error);
  }
  if (target.kind === "directory") throw writeFailure(spec, errnoError("EISDIR"));
  if (target.kind === "other" || (target.kind === "in-place" && check)) {
    throw runtimeError(`${outputName(spec.path, spec.flag)}: cannot write ${spec.what}: not a regular file`);
  }
  if (target.kind === "in-place") {
    const { path, fd } = target;
    return once(path, () => {
      try {
        if (fd === undefined) fillFile(path, "w", fill);
        else fill(fd); // ours, open already: not reopened, not closed
      } catch (error) {
        throw writeFailure(spec, error);
      }
    }, () => {});
  }
  const unnamed = openUnnamed(dirname(target.path));
  if (unnamed !== undefined) return stageUnnamed(spec, target.path, unnamed, fill, check);
  const temporary = temporaryPathFor(target.path);
  try {
    fillFile(temporary, "w", fill);
    check?.(temporary);
  } catch (error) {
    removeQuietly(temporary);
    throw writeFailure(spec, error);
  }
  const path = target.path;
  return once(path, () => {
    try {
      renameSync(temporary, path);
    } catch (error) {
      removeQuietly(temporary);
      throw writeFailure(spec, error);
    }
  }, () => removeQuietly(temporary));
}

/**
 * `stageWrite` into an unnamed file (`fd`, O_TMPFILE): `check` reads it through /proc/self/fd;
 * commit links it beside `path` and renames it over (a name exists only between the two calls);
 * discard, or a kill at any point before commit, leaves nothing.
 */
function stageUnnamed(spec: OutputSpec, path: string, fd: number, fill: (fd: number) => void, check?: (temporary: string) => void): StagedWrite {
  const self = `/proc/self/fd/${fd}`;
  try {
    fill(fd);
    check?.(self);
  } catch (error) {
    closeSync(fd);
    throw writeFailure(spec, error);
  }
  return once(path, () => {
    const temporary = temporaryPathFor(path);
    try {
      // linkat can fail where the open worked (no /proc): then the content is copied to the name.
      if (!(linker as UnnamedLinker)(fd, temporary)) copyFileSync(self, temporary);
      renameSync(temporary, path);
    } catch (error) {
      removeQuietly(temporary);
      throw writeFailure(spec, error);
    } finally {
      closeSync(fd);
    }
  }, () => closeSync(fd));
}

/** `bytes` (or UTF-8 text) as a staged write. */
export function stageBytes(spec: OutputSpec, data: string | Uint8Array): StagedWrite {
  return stageWrite(spec, (fd) => writeFully(fd, typeof data === "string" ? Buffer.from(data, "utf8") : data));
}

/**
 * Commits staged writes in order, so the last one (a run's results) appears only when all
 * the others did. The first failure discards everything not yet committed and is rethrown.
 */
export function commitAll(writes: readonly StagedWrite[]): void {
  let next = 0;
  try {
    for (; next < writes.length; next++) writes[next]!.commit();
  } finally {
    for (const write of writes.slice(next)) write.discard();
  }
}

/** Writes `path` through a temporary file (see `stageWrite`); on any failure `path` is untouched. */
export function writeFileAtomically(path: string, what: string, fill: (fd: number) => void, check?: (temporary: string) => void): void {
  stageWrite({ path, what }, fill, check).commit();
}

/** Writes `data` to `path` whole or not at all (a device or FIFO: in place). */
export function writeAtomically(path: string, data: string | Uint8Array, what: string, flag?: string): void {
  stageBytes({ path, what, flag }, data).commit();
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
