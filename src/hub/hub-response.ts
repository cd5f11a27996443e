/**
 * What the Hugging Face Hub answers, checked strictly: the revision info (its immutable commit
 * sha), the recursive tree listing (every file's path, size, git oid and LFS sha256), the Link
 * header that pages the listing, and the Content-Range of a resumed transfer.
 *
 * Every function here is pure: text or parsed JSON in, a checked value out, or a HubResponseError
 * naming what was wrong. Nothing else may escape, whatever the input, so each is a fuzz target as
 * it stands (`hubResponseParsers` lists them). A mirror or a proxy can answer anything; a path
 * that climbs out of the destination, a size that is not a byte count or a hash that is not hex
 * is refused before it reaches the filesystem.
 *
 * Shapes (huggingface_hub's HfApi.model_info, list_repo_tree and its paginate):
 *   GET /api/models/{repo}/revision/{rev}            -> { "sha": "<40 hex>", ... }
 *   GET /api/models/{repo}/tree/{sha}?recursive=true -> [ { "type": "file" | "directory",
 *       "path", "size", "oid": "<git blob sha1>", "lfs"?: { "oid": "<sha256>", "size",
 *       "pointerSize" } }, ... ], continued by `Link: <url>; rel="next"`
 */
import { ExitCode, K3Error, excerpt } from "../errors.ts";
import { inputLimits } from "../input-limits.ts";
import { JsonSyntaxError, jsonRefusal, parseJsonData } from "../json.ts";

export class HubResponseError extends K3Error {
  constructor(message: string) {
    super(ExitCode.runtime, message);
    this.name = "HubResponseError";
  }
}

/** One file of the repository at the pinned commit. */
export interface HubFile {
  /** Relative path inside the repository, `/`-separated, checked safe to join to a directory. */
  path: string;
  size: number;
  /** The git blob sha1 (40 hex): for a file in git, sha1("blob <size>\0" + bytes). */
  gitOid: string;
  /** The LFS object's sha256 (64 hex), for files stored with LFS; undefined for files in git. */
  lfsSha256: string | undefined;
}

/** The most entries a listing may hold: the release has about a hundred. */
export const maxListedFiles = 100_000;
/** Longest repository path accepted, in UTF-16 units. */
export const maxPathLength = 1024;
/** A listed size beyond this (1 PB) is not a file anyone serves. */
export const maxFileBytes = 1e15;

const hex40 = /^[0-9a-f]{40}$/;
const hex64 = /^[0-9a-f]{64}$/;

/** A value from the answer as a message quotes it: short, escaped, one line. */
const describe = (value: unknown): string => {
  if (typeof value === "string") return excerpt(value);
  if (value === null || typeof value === "number" || typeof value === "boolean") return String(value);
  return Array.isArray(value) ? "an array" : typeof value === "object" ? "an object" : typeof value;
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Parses a response body with k3's strict JSON reader (duplicate keys refused, depth bounded);
 * `what` names the request for the message.
 */
export function parseJsonText(text: string, what: string): unknown {
  try {
    return parseJsonData(text, { maxChars: inputLimits.hubAnswerBytes });
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw new HubResponseError(`${what}: the Hub's answer is ${jsonRefusal(error)}`);
    throw error;
  }
}

/** The commit sha a revision (branch, tag or sha) resolves to. */
export function parseRevisionInfo(body: unknown, what: string): { sha: string } {
  if (!isRecord(body)) throw new HubResponseError(`${what}: the revision info is not a JSON object`);
  const sha = body.sha;
  if (typeof sha !== "string" || !hex40.test(sha)) {
    throw new HubResponseError(`${what}: the revision info has no commit sha (40 lowercase hex), got ${describe(sha)}`);
  }
  return { sha };
}

/**
 * Why a repository path cannot be written under a destination directory, or undefined when it
 * can: relative, `/`-separated, no empty, `.` or `..` segment, no backslash, drive letter or
 * control character.
 */
export function unsafePathReason(path: string): string | undefined {
  if (path.length === 0) return "it is empty";
  if (path.length > maxPathLength) return `it is longer than ${maxPathLength} characters`;
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(path)) return "it contains a control character";
  if (path.includes("\\")) return "it contains a backslash";
  if (path.startsWith("/")) return "it is absolute";
  if (/^[A-Za-z]:/.test(path)) return "it starts with a drive letter";
  if (path.split("/").some((s) => s === "" || s === "." || s === "..")) return "it has an empty, '.' or '..' segment";
  if (!path.isWellFormed()) return "it is not well-formed Unicode";
  return undefined;
}

function parseLfs(raw: unknown, path: string, size: number, what: string): string | undefined {
  if (raw === undefined || raw === null) return undefined;
  if (!isRecord(raw)) throw new HubResponseError(`${what}: ${path}: "lfs" is not an object`);
  const { oid, size: lfsSize } = raw;
  if (typeof oid !== "string" || !hex64.test(oid)) {
    throw new HubResponseError(`${what}: ${path}: the LFS sha256 is not 64 lowercase hex, got ${describe(oid)}`);
  }
  if (lfsSize !== size) throw new HubResponseError(`${what}: ${path}: the LFS size ${describe(lfsSize)} differs from the file size ${size}`);
  return oid;
}

function parseEntry(raw: unknown, index: number, what: string): HubFile | undefined {
  if (!isRecord(raw)) throw new HubResponseError(`${what}: entry ${index} is not an object`);
  const { type, path, size, oid } = raw;
  if (typeof path !== "string") throw new HubResponseError(`${what}: entry ${index} has no path`);
  const shown = describe(path);
  const unsafe = unsafePathReason(path);
  if (unsafe) throw new HubResponseError(`${what}: entry ${index} has the path ${shown}, refused because ${unsafe}`);
  if (type === "directory") return undefined;
  if (type !== "file") throw new HubResponseError(`${what}: ${shown}: unknown entry type ${describe(type)}`);
  if (!Number.isSafeInteger(size) || (size as number) < 0 || (size as number) > maxFileBytes) {
    throw new HubResponseError(`${what}: ${shown}: the size ${describe(size)} is not a byte count`);
  }
  if (typeof oid !== "string" || !hex40.test(oid)) throw new HubResponseError(`${what}: ${shown}: the git oid is not 40 lowercase hex, got ${describe(oid)}`);
  const bytes = size as number;
  return { path, size: bytes, gitOid: oid, lfsSha256: parseLfs(raw.lfs, path, bytes, what) };
}

/** One page of the tree listing: its files (directories are dropped). */
export function parseTreePage(body: unknown, what: string): HubFile[] {
  if (!Array.isArray(body)) throw new HubResponseError(`${what}: the tree listing is not a JSON array`);
  if (body.length > maxListedFiles) throw new HubResponseError(`${what}: the tree listing has more than ${maxListedFiles} entries`);
  const files: HubFile[] = [];
  body.forEach((raw, i) => {
    const file = parseEntry(raw, i, what);
    if (file) files.push(file);
  });
  return files;
}

/**
 * The pages of a listing joined and checked as a whole: no path twice, no path that is another's
 * temporary name (`<path>.part`) or one of k3's own files (`reserved`), no file where another
 * file needs a directory.
 */
export function joinTreePages(pages: readonly HubFile[][], reserved: readonly string[], what: string): HubFile[] {
  const files = pages.flat();
  if (files.length > maxListedFiles) throw new HubResponseError(`${what}: the tree listing has more than ${maxListedFiles} files`);
  const paths = new Set<string>();
  for (const file of files) {
    if (paths.has(file.path)) throw new HubResponseError(`${what}: ${describe(file.path)} is listed twice`);
    paths.add(file.path);
  }
  for (const file of files) {
    if (reserved.includes(file.path)) throw new HubResponseError(`${what}: ${describe(file.path)} is a name k3 keeps for itself`);
    if (paths.has(`${file.path}.part`)) throw new HubResponseError(`${what}: ${describe(`${file.path}.part`)} collides with the temporary name of ${describe(file.path)}`);
    const segments = file.path.split("/");
    for (let i = 1; i < segments.length; i++) {
      const parent = segments.slice(0, i).join("/");
      if (paths.has(parent)) throw new HubResponseError(`${what}: ${describe(file.path)} needs ${describe(parent)} to be a directory, but it is a file`);
    }
  }
  return files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** The rel="next" target of a Link header, resolved against `base`; undefined when there is none. */
export function parseNextLink(header: string | null, base: string, what: string): string | undefined {
  if (header === null || header.trim() === "") return undefined;
  for (const part of header.split(/,(?=\s*<)/)) {
    const match = part.match(/^\s*<([^>]*)>(.*)$/s);
    if (!match) throw new HubResponseError(`${what}: the Link header is malformed`);
    const params = match[2] as string;
    const rel = params.match(/;\s*rel\s*=\s*(?:"([^"]*)"|([^;\s]+))/i);
    const rels = (rel?.[1] ?? rel?.[2] ?? "").toLowerCase().split(/\s+/);
    if (!rels.includes("next")) continue;
    try {
      return new URL(match[1] as string, base).href;
    } catch {
      throw new HubResponseError(`${what}: the Link header's next page is not a URL`);
    }
  }
  return undefined;
}

export interface ContentRange {
  start: number;
  /** Inclusive, as HTTP writes it. */
  end: number;
  /** The whole object's size, when the server states it. */
  total: number | undefined;
}

/** `bytes <start>-<end>/<total|*>`; undefined when absent; refused when malformed. */
export function parseContentRange(header: string | null, what: string): ContentRange | undefined {
  if (header === null) return undefined;
  const match = header.trim().match(/^bytes\s+(\d{1,15})-(\d{1,15})\/(\d{1,15}|\*)$/i);
  if (!match) throw new HubResponseError(`${what}: the Content-Range ${describe(header)} is malformed`);
  const start = Number(match[1]);
  const end = Number(match[2]);
  const total = match[3] === "*" ? undefined : Number(match[3]);
  if (end < start || (total !== undefined && end >= total)) throw new HubResponseError(`${what}: the Content-Range ${describe(header)} is inconsistent`);
  return { start, end, total };
}

/** A Content-Length header as a byte count; undefined when absent; refused when malformed. */
export function parseContentLength(header: string | null, what: string): number | undefined {
  if (header === null) return undefined;
  if (!/^\s*\d{1,15}\s*$/.test(header)) throw new HubResponseError(`${what}: the Content-Length ${describe(header)} is malformed`);
  return Number(header);
}

/** Retry-After in seconds (delta-seconds only; a date or garbage reads as undefined), capped. */
export function parseRetryAfterSeconds(header: string | null, capSeconds: number): number | undefined {
  if (header === null || !/^\s*\d{1,9}\s*$/.test(header)) return undefined;
  return Math.min(Number(header), capSeconds);
}

/**
 * The parsers the fuzz harness should drive, each taking one string (JSON text for the bodies,
 * header text for the headers). Any input must give a value or a HubResponseError, nothing else.
 */
export const hubResponseParsers: Readonly<Record<string, (input: string) => unknown>> = {
  revision: (text) => parseRevisionInfo(parseJsonText(text, "fuzz"), "fuzz"),
  tree: (text) => joinTreePages([parseTreePage(parseJsonText(text, "fuzz"), "fuzz")], [], "fuzz"),
  link: (text) => parseNextLink(text, "https://huggingface.co/api/models/a/b/tree/main", "fuzz"),
  contentRange: (text) => parseContentRange(text, "fuzz"),
  contentLength: (text) => parseContentLength(text, "fuzz"),
  retryAfter: (text) => parseRetryAfterSeconds(text, 60),
};
