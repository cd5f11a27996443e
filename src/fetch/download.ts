/**
 * `k3 download`: a repository from the Hub into a directory, pinned to one commit, every file
 * checked before it gets its name.
 *
 *   1. The revision resolves to an immutable commit sha; the listing of that commit gives every
 *      file's size, git oid and LFS sha256 (hub/).
 *   2. Files already verified (by the record) or already present with the listed hash are kept;
 *      the rest must fit in the free space, or nothing starts.
 *   3. Workers fetch files in parallel, each into `<name>.part`, resuming a partial file with an
 *      HTTP Range request. Bytes are hashed as they are written. A dropped connection, a stall
 *      or a 5xx is retried with backoff from where the file stands; a size or hash that does not
 *      match the listing refuses that file (its `.part` is removed); 401, 403 and 404 stop
 *      everything with a message saying what to do.
 *   4. Only a file whose size and hash match is fsynced and renamed to its final name, and then
 *      recorded. So a final name always means verified bytes, whenever the process dies.
 */
import { closeSync, existsSync, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, renameSync, rmSync, statSync, statfsSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { errnoCode } from "../fs.ts";
import { ExitCode, K3Error, runtimeError } from "../errors.ts";
import { releaseRepo, resolveUrl, revisionUrl, treeUrl, type HubEndpoint } from "../hub/hub-endpoint.ts";
import { HubClient, TransientError, backoffMs, networkErrorText, type RetryPolicy, type StatusContext } from "../hub/hub-http.ts";
import {
  HubResponseError, joinTreePages, parseContentLength, parseContentRange, parseNextLink, parseRevisionInfo, parseTreePage, type HubFile,
} from "../hub/hub-response.ts";
import { log } from "../report/log.ts";
import { formatBytes } from "../units.ts";
import { downloadRecordName, downloadRecordVersion, readDownloadRecord, writeDownloadRecord, type DownloadRecord, type RecordedFile } from "./download-record.ts";
import { FileDigests, hashFile, readFileInto } from "./file-hash.ts";
import { isSelected, type FileSelection } from "./file-patterns.ts";
import { ByteProgress, formatDuration, formatRate } from "./progress.ts";

export const defaultWorkers = 8;
export const maxWorkers = 64;
export const defaultStallSeconds = 60;
/** Listing pages followed at most (the release needs one). */
const maxListingPages = 10_000;
/** An attempt that moved at least this much resets the failure count: the file is progressing. */
const progressResetBytes = 1 << 20;
/** What packing the release's trunk needs on top of the checkpoint (runtime.md 11.2). */
const releaseTrunkNote = "packing the trunk afterwards needs another ~109 GB";

export interface DownloadOptions {
  dest: string;
  repo: string;
  revision: string;
  workers: number;
  selection: FileSelection;
  endpoint: HubEndpoint;
  token: string | undefined;
  stallSeconds: number;
  retry: RetryPolicy;
  userAgent: string;
  /** Aborted on Ctrl-C: workers stop, partial files stay for the next run. */
  signal: AbortSignal;
}

export interface DownloadOutcome {
  commit: string;
  fetchedFiles: number;
  fetchedBytes: number;
  keptFiles: number;
  /** One line per file that could not be downloaded. */
  failures: string[];
  interrupted: boolean;
}

/** A clear stop (401, 403, 404, ...): every worker ends, the message is the run's. */
class StopError extends Error {
  readonly reason: K3Error;
  constructor(reason: K3Error) {
    super(reason.message);
    this.reason = reason;
  }
}

interface Job {
  file: HubFile;
  final: string;
  part: string;
  /** Bytes already in `<name>.part` when the run started. */
  partBytes: number;
}

const partPath = (final: string) => `${final}.part`;

function fileStatus(path: string): { size: number; isFile: boolean } | undefined {
  try {
    const s = statSync(path);
    return { size: s.size, isFile: s.isFile() };
  } catch {
    return undefined;
  }
}

function recordEntry(file: HubFile, previous: RecordedFile | undefined): RecordedFile {
  const same = previous && previous.size === file.size && previous.git_oid === file.gitOid && previous.lfs_sha256 === (file.lfsSha256 ?? null);
  return {
    path: file.path, size: file.size, git_oid: file.gitOid, lfs_sha256: file.lfsSha256 ?? null,
    sha256: same ? previous.sha256 : null, verified_at: same ? previous.verified_at : null,
  };
}

/** True when `digests` are the bytes the listing describes. */
function matchesListing(file: HubFile, digest: { sha256: string; gitOid: string }): boolean {
  return file.lfsSha256 !== undefined ? digest.sha256 === file.lfsSha256 : digest.gitOid === file.gitOid;
}

const listedDigest = (file: HubFile) => (file.lfsSha256 !== undefined ? `sha256 ${file.lfsSha256}` : `git oid ${file.gitOid}`);

export class Downloader {
  readonly #o: DownloadOptions;
  readonly #client: HubClient;
  #record!: DownloadRecord;
  #commit = "";
  #progress: ByteProgress | undefined;
  readonly #stop = new AbortController();
  #stopError: K3Error | undefined;

  constructor(options: DownloadOptions) {
    this.#o = options;
    this.#client = new HubClient(options.endpoint, options.token, options.userAgent);
    options.signal.addEventListener("abort", () => this.#stop.abort(), { once: true });
  }

  /** Replaces the token wherever it could appear in text k3 prints. */
  redact(text: string): string {
    return this.#client.redact(text);
  }

  #say(text: string): void {
    this.#progress?.interrupt();
    log.info(this.redact(text));
  }

  #warn(text: string): void {
    this.#progress?.interrupt();
    log.warn(this.redact(text));
  }

  #context(what: string, subject: StatusContext["subject"]): StatusContext {
    return { what, repo: this.#o.repo, subject, revision: this.#o.revision, commit: this.#commit };
  }

  async #resolveCommit(): Promise<string> {
    const what = `${this.#o.repo} revision ${this.#o.revision}`;
    const { body } = await this.#client.getJson(revisionUrl(this.#o.endpoint, this.#o.repo, this.#o.revision), this.#context(what, "revision"), this.#o.retry);
    return parseRevisionInfo(body, what).sha;
  }

  async #listFiles(): Promise<HubFile[]> {
    const pages: HubFile[][] = [];
    let url: string | undefined = treeUrl(this.#o.endpoint, this.#o.repo, this.#commit);
    for (let page = 1; url !== undefined; page++) {
      if (page > maxListingPages) throw new HubResponseError(`the listing of ${this.#o.repo} has more than ${maxListingPages} pages`);
      const what = `the listing of ${this.#o.repo} at ${this.#commit}${page > 1 ? ` (page ${page})` : ""}`;
      const { body, headers } = await this.#client.getJson(url, this.#context(what, "revision"), this.#o.retry);
      pages.push(parseTreePage(body, what));
      const next = parseNextLink(headers.get("link"), url, what);
      // The next page gets the token too, so it must be the Hub's own.
      if (next !== undefined && new URL(next).origin !== this.#o.endpoint.origin) {
        throw new HubResponseError(`${what}: the next page is on another host (${new URL(next).host}); refused`);
      }
      url = next;
    }
    const reserved = [downloadRecordName];
    const files = joinTreePages(pages, reserved, `the listing of ${this.#o.repo}`);
    for (const f of files) {
      if (f.path.startsWith(`${downloadRecordName}.`)) throw new HubResponseError(`the listing of ${this.#o.repo}: ${f.path} is a name k3 keeps for itself`);
    }
    return files;
  }

  #openRecord(previous: DownloadRecord | undefined, selected: HubFile[], excluded: HubFile[]): void {
    const before = new Map(previous?.files.map((f) => [f.path, f]) ?? []);
    this.#record = {
      format: "k3-download", version: downloadRecordVersion, repo: this.#o.repo, revision: this.#o.revision, commit: this.#commit,
      endpoint: this.#o.endpoint.base, include: this.#o.selection.includeText, exclude: this.#o.selection.excludeText,
      excluded: excluded.map((f) => ({ path: f.path, size: f.size })),
      files: selected.map((f) => recordEntry(f, before.get(f.path))), updated_at: "",
    };
  }

  #entry(path: string): RecordedFile {
    return this.#record.files.find((f) => f.path === path) as RecordedFile;
  }

  #markVerified(path: string, sha256: string): void {
    const entry = this.#entry(path);
    entry.sha256 = sha256;
    entry.verified_at = new Date().toISOString();
    writeDownloadRecord(this.#o.dest, this.#record);
  }

  /**
   * Sorts the selected files into kept (verified before, or present with the listed hash),
   * conflicts (a file of the user's with the final name and other bytes) and jobs.
   */
  async #plan(selected: HubFile[], previous: DownloadRecord | undefined): Promise<{ jobs: Job[]; kept: HubFile[]; conflicts: string[] }> {
    const jobs: Job[] = [];
    const kept: HubFile[] = [];
    const conflicts: string[] = [];
    const unknown: { file: HubFile; final: string }[] = [];
    // Files k3 itself verified at that name before: those it may replace. Anything else with a
    // final name is the user's, kept if its bytes are the listing's, otherwise left alone.
    const ours = new Set(previous?.files.filter((f) => f.sha256 !== null).map((f) => f.path) ?? []);
    const conflict = (file: HubFile) => conflicts.push(`${file.path}: a file with this name and other bytes is already there; move it away and re-run`);
    const job = (file: HubFile, final: string) => {
      const part = partPath(final);
      const partStatus = fileStatus(part);
      jobs.push({ file, final, part, partBytes: partStatus?.isFile ? partStatus.size : 0 });
    };
    for (const file of selected) {
      const final = join(this.#o.dest, file.path);
      const status = fileStatus(final);
      const entry = this.#entry(file.path);
      if (status && !status.isFile) conflicts.push(`${file.path}: exists and is not a file; move it away and re-run`);
      else if (status && status.size === file.size && entry.sha256 !== null) kept.push(file);
      else if (status && status.size === file.size) unknown.push({ file, final });
      else if (status && !ours.has(file.path)) conflict(file);
      else job(file, final);
    }
    if (unknown.length > 0) {
      const bytes = unknown.reduce((s, u) => s + u.file.size, 0);
      this.#say(`checking ${unknown.length} file(s) already in ${this.#o.dest} (${formatBytes(bytes)}) against the listing`);
      const progress = new ByteProgress("checking", bytes, unknown.length);
      this.#progress = progress;
      for (const { file, final } of unknown) {
        const digest = await hashFile(final, file.size, (n) => progress.add(n), this.#stop.signal);
        progress.fileDone();
        if (matchesListing(file, digest)) {
          kept.push(file);
          this.#markVerified(file.path, digest.sha256);
        } else if (ours.has(file.path)) {
          job(file, final);
        } else {
          conflict(file);
        }
      }
      progress.finish();
      this.#progress = undefined;
    }
    return { jobs, kept, conflicts };
  }

  #checkFreeSpace(jobs: Job[]): void {
    const needed = jobs.reduce((sum, j) => sum + Math.max(0, j.file.size - j.partBytes), 0);
    let free: number;
    try {
      const s = statfsSync(this.#o.dest);
      free = s.bavail * s.bsize;
    } catch (error) {
      this.#warn(`${this.#o.dest}: cannot read the free space (${errnoCode(error)}); starting anyway`);
      return;
    }
    const note = this.#o.repo === releaseRepo ? `; ${releaseTrunkNote}` : "";
    if (needed > free) {
      throw runtimeError(
        `${this.#o.dest}: not enough free space: ${formatBytes(needed)} still to download, ${formatBytes(free)} free ` +
          `(short by ${formatBytes(needed - free)})${note}`,
      );
    }
    this.#say(`free space at ${this.#o.dest}: ${formatBytes(free)}, ${formatBytes(needed)} to download${note}`);
  }

  /** Downloads one file to `<name>.part`, checks it, and renames it to its final name. */
  async #fetch(job: Job, progress: ByteProgress): Promise<void> {
    const { file, part, final } = job;
    mkdirSync(dirname(final), { recursive: true });
    let fd: number;
    try {
      fd = openSync(part, existsSync(part) ? "r+" : "w+");
    } catch (error) {
      throw runtimeError(`${part}: cannot open for writing (${errnoCode(error)})`);
    }
    let closed = false;
    const close = () => {
      if (!closed) closeSync(fd);
      closed = true;
    };
    try {
      let digests = new FileDigests(file.size);
      let offset = fstatSync(fd).size;
      if (offset > file.size) {
        this.#say(`${file.path}: the partial file is larger than the listed ${file.size} bytes; starting over`);
        ftruncateSync(fd, 0);
        progress.debit(offset);
        offset = 0;
      }
      if (offset > 0) await readFileInto(part, offset, (bytes) => digests.update(bytes), this.#stop.signal);
      const restart = (at: number) => {
        ftruncateSync(fd, 0);
        progress.debit(at);
        digests = new FileDigests(file.size);
      };
      await this.#transfer(job, fd, offset, () => digests, restart, progress);
      const onDisk = fstatSync(fd).size;
      if (onDisk !== file.size) throw runtimeError(`${file.path}: ${onDisk} bytes on disk after the transfer, ${file.size} listed`);
      const digest = digests.digest();
      if (!matchesListing(file, digest)) {
        close();
        rmSync(part, { force: true });
        progress.debit(file.size);
        const got = file.lfsSha256 !== undefined ? `sha256 ${digest.sha256}` : `git oid ${digest.gitOid}`;
        throw runtimeError(`${file.path}: the downloaded bytes have ${got}, the listing says ${listedDigest(file)}; refused, the partial file was removed (re-run to fetch it again)`);
      }
      fsyncSync(fd);
      close();
      renameSync(part, final);
      this.#markVerified(file.path, digest.sha256);
      progress.fileDone();
    } finally {
      close();
    }
  }

  /** Moves bytes until the file is complete; returns the final offset. Retries what is transient. */
  async #transfer(job: Job, fd: number, start: number, digests: () => FileDigests, restart: (at: number) => void, progress: ByteProgress): Promise<number> {
    const { file } = job;
    const url = resolveUrl(this.#o.endpoint, this.#o.repo, this.#commit, file.path);
    const context = this.#context(file.path, "file");
    let offset = start;
    let failures = 0;
    while (offset < file.size) {
      if (this.#stop.signal.aborted) throw new StopError(this.#stopError ?? runtimeError("stopped"));
      const attemptStart = offset;
      const attempt = new AbortController();
      const signal = AbortSignal.any([attempt.signal, this.#stop.signal]);
      let stalled = false;
      let timer: ReturnType<typeof setTimeout> | undefined;
      const arm = () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          stalled = true;
          attempt.abort();
        }, this.#o.stallSeconds * 1000);
      };
      try {
        arm();
        const response = await this.#client.get(url, { range: offset, signal });
        if (response.status === 416) {
          void response.body?.cancel().catch(() => {});
          // The server has fewer bytes than the partial file: it cannot be a prefix of them.
          this.#say(`${file.path}: the server cannot serve bytes from ${offset} (416); starting over`);
          restart(offset);
          offset = 0;
          throw new TransientError("HTTP 416");
        }
        if (response.status !== 200 && response.status !== 206) {
          const error = this.#client.statusError(response, context);
          if (error instanceof K3Error) throw new StopError(error);
          throw error;
        }
        if (response.status === 206) {
          const range = parseContentRange(response.headers.get("content-range"), file.path);
          if (range === undefined || range.start !== offset) {
            void response.body?.cancel().catch(() => {});
            throw runtimeError(`${file.path}: asked for bytes from ${offset}, the server answered with ${range ? `bytes from ${range.start}` : "no Content-Range"}`);
          }
          if (range.total !== undefined && range.total !== file.size) {
            void response.body?.cancel().catch(() => {});
            throw runtimeError(`${file.path}: the server says the file has ${range.total} bytes, the listing says ${file.size}; refused`);
          }
        } else {
          if (offset > 0) {
            this.#say(`${file.path}: the server ignored the range request; starting over from byte 0`);
            restart(offset);
            offset = 0;
          }
          const length = parseContentLength(response.headers.get("content-length"), file.path);
          if (length !== undefined && length !== file.size) {
            void response.body?.cancel().catch(() => {});
            throw runtimeError(`${file.path}: the server says the file has ${length} bytes, the listing says ${file.size}; refused`);
          }
        }
        const reader = response.body?.getReader();
        if (!reader) throw new TransientError("an empty answer");
        for (;;) {
          let chunk: Awaited<ReturnType<typeof reader.read>>;
          try {
            chunk = await reader.read();
          } catch (error) {
            throw new TransientError(stalled ? `no data for ${this.#o.stallSeconds} s` : networkErrorText(error));
          }
          if (chunk.done) break;
          arm();
          const bytes = chunk.value;
          if (offset + bytes.byteLength > file.size) {
            await reader.cancel().catch(() => {});
            restart(offset);
            throw runtimeError(`${file.path}: the server sent more than the listed ${file.size} bytes; refused, the partial file was cleared`);
          }
          writeAll(fd, bytes, offset, job.part);
          digests().update(bytes);
          offset += bytes.byteLength;
          progress.add(bytes.byteLength);
        }
        if (offset < file.size) throw new TransientError(`the connection closed at byte ${offset} of ${file.size}`);
      } catch (error) {
        if (error instanceof StopError) throw error;
        if (this.#stop.signal.aborted) throw new StopError(this.#stopError ?? runtimeError("stopped"));
        const transient = error instanceof TransientError ? error : stalled ? new TransientError(`no data for ${this.#o.stallSeconds} s`) : undefined;
        if (!transient) throw error;
        if (offset - attemptStart >= progressResetBytes) failures = 0;
        failures++;
        if (failures >= this.#o.retry.attempts) {
          throw runtimeError(`${file.path}: gave up after ${failures} attempts (last: ${transient.message}); the partial file is kept, re-run to resume`);
        }
        const delay = backoffMs(this.#o.retry, failures, transient.retryAfterSeconds);
        this.#say(`${file.path}: ${transient.message}; retrying from byte ${offset} in ${(delay / 1000).toFixed(1)} s`);
        await sleepUnlessStopped(delay, this.#stop.signal);
      } finally {
        clearTimeout(timer);
      }
    }
    return offset;
  }

  async run(): Promise<DownloadOutcome> {
    const o = this.#o;
    try {
      mkdirSync(o.dest, { recursive: true });
    } catch (error) {
      throw runtimeError(`${o.dest}: cannot create the destination (${errnoCode(error)})`);
    }
    if (!statSync(o.dest).isDirectory()) throw runtimeError(`${o.dest}: not a directory`);
    const previous = readDownloadRecord(o.dest);
    if (previous && previous.repo !== o.repo) {
      throw runtimeError(`${o.dest} holds a download of ${previous.repo}, not ${o.repo}; choose another directory`);
    }
    this.#commit = await this.#resolveCommit();
    const moved = previous && previous.commit !== this.#commit ? ` (the record had ${previous.commit})` : "";
    this.#say(`${o.repo} at ${o.revision}: commit ${this.#commit}${moved}, from ${o.endpoint.base}`);
    const listed = await this.#listFiles();
    const selected = listed.filter((f) => isSelected(f.path, o.selection));
    const excluded = listed.filter((f) => !isSelected(f.path, o.selection));
    if (selected.length === 0) throw new K3Error(ExitCode.usage, `no file of ${o.repo} matches --include/--exclude (${listed.length} listed)`);
    const total = (files: HubFile[]) => formatBytes(files.reduce((s, f) => s + f.size, 0));
    this.#say(`listing: ${listed.length} files, ${total(listed)}` + (excluded.length > 0 ? `; ${excluded.length} left out by the patterns (${total(excluded)})` : ""));
    this.#openRecord(previous, selected, excluded);
    const { jobs, kept, conflicts } = await this.#plan(selected, previous);
    if (kept.length > 0) this.#say(`already verified: ${kept.length} file(s), ${total(kept)}`);
    const resumed = jobs.filter((j) => j.partBytes > 0);
    if (resumed.length > 0) this.#say(`resuming ${resumed.length} partial file(s) (${formatBytes(resumed.reduce((s, j) => s + j.partBytes, 0))} already on disk)`);
    this.#checkFreeSpace(jobs);
    writeDownloadRecord(o.dest, this.#record);

    const failures = [...conflicts];
    const progress = new ByteProgress("download", jobs.reduce((s, j) => s + j.file.size, 0), jobs.length);
    this.#progress = progress;
    for (const job of jobs) progress.credit(Math.min(job.partBytes, job.file.size));
    const queue = [...jobs];
    let fetchedFiles = 0;
    const worker = async () => {
      for (let job = queue.shift(); job !== undefined && !this.#stop.signal.aborted; job = queue.shift()) {
        try {
          await this.#fetch(job, progress);
          fetchedFiles++;
        } catch (error) {
          if (error instanceof StopError) {
            if (!this.#stopError && !o.signal.aborted) {
              this.#stopError = error.reason;
              this.#stop.abort();
            }
            return;
          }
          if (!(error instanceof K3Error)) throw error;
          failures.push(error.message);
          this.#warn(error.message);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, Math.min(o.workers, jobs.length)) }, worker));
    progress.finish();
    this.#progress = undefined;
    if (this.#stopError) throw this.#stopError;
    const seconds = progress.seconds;
    if (jobs.length > 0) {
      this.#say(`moved ${formatBytes(progress.movedBytes)} in ${formatDuration(seconds)} (${formatRate(progress.movedBytes / Math.max(seconds, 1e-3))}), ${o.workers} worker(s)`);
    }
    return { commit: this.#commit, fetchedFiles, fetchedBytes: progress.movedBytes, keptFiles: kept.length, failures, interrupted: o.signal.aborted };
  }
}

function writeAll(fd: number, bytes: Uint8Array, position: number, path: string): void {
  let done = 0;
  try {
    while (done < bytes.byteLength) done += writeSync(fd, bytes, done, bytes.byteLength - done, position + done);
  } catch (error) {
    throw runtimeError(`${path}: write failed (${errnoCode(error)})`);
  }
}

function sleepUnlessStopped(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
