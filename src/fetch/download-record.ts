/**
 * The record `k3 download` keeps in the destination (`.k3-download.json`): the repository, the
 * revision asked for and the immutable commit it resolved to, and for every selected file its
 * size, git oid and LFS sha256 from the listing, plus the sha256 of the bytes on disk once they
 * were checked and given their final name. A re-run reads it to skip verified files; `k3 verify
 * --hash` hashes every file against it. It is rewritten whole through a temporary file after
 * every finished file, so a crash leaves the previous record.
 *
 * It is a file on the user's disk, so it is parsed as strictly as anything from the network
 * (`parseDownloadRecord` is pure and a fuzz target).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { readCapped, writeAtomically } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { JsonSyntaxError, jsonRefusal, parseJsonData } from "../json.ts";
import { ExitCode, K3Error } from "../errors.ts";
import { unsafePathReason } from "../hub/hub-response.ts";

export const downloadRecordName = ".k3-download.json";
export const downloadRecordVersion = 1;

export interface RecordedFile {
  path: string;
  size: number;
  git_oid: string;
  /** The listing's LFS sha256; null for a file kept in git. */
  lfs_sha256: string | null;
  /** sha256 of the bytes on disk, set when they were checked and renamed to the final name. */
  sha256: string | null;
  verified_at: string | null;
}

export interface DownloadRecord {
  format: "k3-download";
  version: number;
  repo: string;
  revision: string;
  commit: string;
  endpoint: string;
  include: string[];
  exclude: string[];
  /** Files of the listing the patterns left out: not downloaded, not expected by verify. */
  excluded: { path: string; size: number }[];
  files: RecordedFile[];
  updated_at: string;
}

function bad(path: string, detail: string): K3Error {
  return new K3Error(ExitCode.runtime, `${path}: not a valid k3 download record: ${detail} (delete it to start the download over)`);
}

const hex = (length: number) => new RegExp(`^[0-9a-f]{${length}}$`);
const isHex = (value: unknown, length: number): value is string => typeof value === "string" && hex(length).test(value);
const isBytes = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;
const isStrings = (value: unknown): value is string[] => Array.isArray(value) && value.every((v) => typeof v === "string");
const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

function checkPath(value: unknown, where: string, path: string): string {
  if (typeof value !== "string") throw bad(path, `${where}.path is not a string`);
  const unsafe = unsafePathReason(value);
  if (unsafe) throw bad(path, `${where}.path is refused because ${unsafe}`);
  return value;
}

function parseFile(raw: unknown, i: number, path: string): RecordedFile {
  const where = `files[${i}]`;
  if (!isRecord(raw)) throw bad(path, `${where} is not an object`);
  const file: RecordedFile = {
    path: checkPath(raw.path, where, path),
    size: raw.size as number,
    git_oid: raw.git_oid as string,
    lfs_sha256: raw.lfs_sha256 as string | null,
    sha256: raw.sha256 as string | null,
    verified_at: raw.verified_at as string | null,
  };
  if (!isBytes(file.size)) throw bad(path, `${where}.size is not a byte count`);
  if (!isHex(file.git_oid, 40)) throw bad(path, `${where}.git_oid is not 40 hex`);
  if (file.lfs_sha256 !== null && !isHex(file.lfs_sha256, 64)) throw bad(path, `${where}.lfs_sha256 is not 64 hex or null`);
  if (file.sha256 !== null && !isHex(file.sha256, 64)) throw bad(path, `${where}.sha256 is not 64 hex or null`);
  if (file.verified_at !== null && typeof file.verified_at !== "string") throw bad(path, `${where}.verified_at is not a string or null`);
  return file;
}

/** The record in `text`; `path` names the file in messages. */
export function parseDownloadRecord(text: string, path: string): DownloadRecord {
  let raw: unknown;
  try {
    raw = parseJsonData(text, { maxChars: inputLimits.downloadRecordBytes });
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw bad(path, jsonRefusal(error));
    throw error;
  }
  if (!isRecord(raw)) throw bad(path, "not a JSON object");
  if (raw.format !== "k3-download") throw bad(path, "format is not k3-download");
  if (raw.version !== downloadRecordVersion) throw bad(path, `version is not ${downloadRecordVersion}`);
  for (const key of ["repo", "revision", "endpoint", "updated_at"] as const) {
    if (typeof raw[key] !== "string") throw bad(path, `${key} is not a string`);
  }
  if (!isHex(raw.commit, 40)) throw bad(path, "commit is not 40 hex");
  if (!isStrings(raw.include) || !isStrings(raw.exclude)) throw bad(path, "include and exclude must be lists of strings");
  if (!Array.isArray(raw.files)) throw bad(path, "files is not a list");
  if (!Array.isArray(raw.excluded)) throw bad(path, "excluded is not a list");
  const files = raw.files.map((f, i) => parseFile(f, i, path));
  const excluded = raw.excluded.map((e, i) => {
    if (!isRecord(e) || !isBytes(e.size)) throw bad(path, `excluded[${i}] is not a path and size`);
    return { path: checkPath(e.path, `excluded[${i}]`, path), size: e.size };
  });
  const seen = new Set<string>();
  for (const f of [...files, ...excluded]) {
    if (seen.has(f.path)) throw bad(path, `${f.path} is listed twice`);
    seen.add(f.path);
  }
  return {
    format: "k3-download", version: downloadRecordVersion,
    repo: raw.repo as string, revision: raw.revision as string, commit: raw.commit, endpoint: raw.endpoint as string,
    include: raw.include, exclude: raw.exclude, excluded, files, updated_at: raw.updated_at as string,
  };
}

/** The record of `dir`, or undefined when there is none. */
export function readDownloadRecord(dir: string): DownloadRecord | undefined {
  const path = join(dir, downloadRecordName);
  if (!existsSync(path)) return undefined;
  const text = readCapped(path, inputLimits.downloadRecordBytes, "the download record").toString("utf8");
  return parseDownloadRecord(text, path);
}

export function writeDownloadRecord(dir: string, record: DownloadRecord): void {
  record.updated_at = new Date().toISOString();
  writeAtomically(join(dir, downloadRecordName), `${JSON.stringify(record, null, 1)}\n`, "the download record");
}
