/**
 * `k3 verify <model_dir> [--hash]`: is this directory exactly the release (runtime.md 11.2)?
 *
 *   1. the shard count and the total bytes, against the per-shard table;
 *   2. every shard against its own entry, each mismatch a `BAD` line (two shards wrong by equal
 *      and opposite amounts pass the total but not this);
 *   3. every shard's header parsed, every tensor the model's table names (config.json) present
 *      with its shape, and model.safetensors.index.json mapping each tensor to the shard that
 *      holds it;
 *   4. with --hash, the sha256 of every file against the record `k3 download` wrote.
 *
 * The table is the release's (src/fetch/release-shards.ts), unless the download record says the
 * directory is another repository; then the record's listing is the table. Shards the download
 * left out on purpose (--exclude) are reported as left out, not as missing.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { readShardHeader, type TensorEntry } from "../checkpoint/safetensors.ts";
import { allTensors } from "../checkpoint/tensor-names.ts";
import { K3Error, displayName } from "../errors.ts";
import { readCapped } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { JsonSyntaxError, jsonRefusal, parseJsonData } from "../json.ts";
import { releaseRepo } from "../hub/hub-endpoint.ts";
import { downloadRecordName, readDownloadRecord, type DownloadRecord } from "./download-record.ts";
import { hashFile } from "./file-hash.ts";
import { ByteProgress } from "./progress.ts";
import { releaseShards } from "./release-shards.ts";

export const indexJsonName = "model.safetensors.index.json";

export interface ShardTable {
  /** What the table is, for the report's first line. */
  source: string;
  shards: readonly { name: string; bytes: number }[];
  /** Shards the download's patterns left out. */
  leftOut: ReadonlySet<string>;
  isRelease: boolean;
}

export interface VerifyResult {
  /** The report, line by line (BAD lines among them). */
  lines: string[];
  bad: number;
  ok: boolean;
}

const signed = (n: number) => (n > 0 ? `+${n}` : `${n}`);

/** The table a directory is checked against: the release's, or its download record's listing. */
export function shardTable(record: DownloadRecord | undefined): ShardTable {
  const leftOut = new Set((record?.excluded ?? []).map((e) => e.path));
  if (record && record.repo !== releaseRepo) {
    const shards = record.files.filter((f) => f.path.endsWith(".safetensors")).map((f) => ({ name: f.path, bytes: f.size }));
    const leftOutShards = [...leftOut].filter((p) => p.endsWith(".safetensors"));
    return { source: `the listing of ${record.repo} at ${record.commit} (from ${downloadRecordName}; not the Kimi K3 release)`, shards, leftOut: new Set(leftOutShards), isRelease: false };
  }
  return { source: `the Kimi K3 release table (${releaseShards.length} shards)`, shards: releaseShards, leftOut, isRelease: true };
}

function sizeOf(path: string): number | undefined {
  try {
    const s = statSync(path);
    return s.isFile() ? s.size : undefined;
  } catch {
    return undefined;
  }
}

/** Steps 1 and 2: count, total, and every shard against its entry. */
function checkSizes(dir: string, table: ShardTable, bad: (line: string) => void, say: (line: string) => void): string[] {
  const expected = table.shards.filter((s) => !table.leftOut.has(s.name));
  const expectedNames = new Set(table.shards.map((s) => s.name));
  const present = readdirSync(dir).filter((n) => n.endsWith(".safetensors")).sort();
  const extra = present.filter((n) => !expectedNames.has(n) && !table.leftOut.has(n));
  const leftOutNote = table.leftOut.size > 0 ? `, ${table.leftOut.size} left out by the download: ${[...table.leftOut].join(" ")}` : "";
  const onDisk = expected.map((s) => ({ ...s, size: sizeOf(join(dir, s.name)) }));
  const found = onDisk.filter((s) => s.size !== undefined);
  say(`  shards : ${found.length + extra.length} (expect ${expected.length}${leftOutNote})`);
  const totalBytes = [...found.map((s) => s.size as number), ...extra.map((n) => sizeOf(join(dir, n)) ?? 0)].reduce((a, b) => a + b, 0);
  const expectedBytes = expected.reduce((a, s) => a + s.bytes, 0);
  say(`  bytes  : ${totalBytes} (expect ${expectedBytes})${totalBytes === expectedBytes ? "" : ` delta ${signed(totalBytes - expectedBytes)}`}`);
  let wrong = 0;
  for (const s of onDisk) {
    if (s.size === undefined) {
      bad(`BAD ${s.name}: missing (expect ${s.bytes} bytes)`);
      wrong++;
    } else if (s.size !== s.bytes) {
      bad(`BAD ${s.name}: ${s.size} bytes, expect ${s.bytes} (${signed(s.size - s.bytes)})`);
      wrong++;
    }
  }
  for (const name of extra) {
    bad(`BAD ${name}: not a shard of ${table.isRelease ? "the release" : "the recorded listing"}`);
    wrong++;
  }
  say(wrong === 0 ? `  shards : all ${expected.length} match their published sizes individually` : `  shards : ${wrong} of ${expected.length + extra.length} do not match`);
  return found.map((s) => s.name);
}

/** Step 3: headers, the model's tensors, the index file. */
function checkTensors(dir: string, shardNames: string[], table: ShardTable, bad: (line: string) => void, say: (line: string) => void): void {
  const tensors = new Map<string, { entry: TensorEntry; shard: string }>();
  let parsed = 0;
  shardNames.forEach((name, i) => {
    try {
      const { tensors: entries } = readShardHeader(join(dir, name), i);
      parsed++;
      for (const entry of entries) {
        const other = tensors.get(entry.name);
        if (other) bad(`BAD ${name}: tensor ${entry.name} is also in ${other.shard}`);
        else tensors.set(entry.name, { entry, shard: name });
      }
    } catch (error) {
      if (!(error instanceof K3Error)) throw error;
      bad(`BAD ${name}: ${error.message.replace(`${join(dir, name)}: `, "")}`);
    }
  });
  say(`  headers: ${parsed} of ${shardNames.length} parsed, ${tensors.size} tensors`);
  const configPath = join(dir, "config.json");
  if (!existsSync(configPath)) {
    bad("BAD config.json: missing, so the model's tensors cannot be checked");
  } else {
    try {
      const { config } = loadConfig(configPath);
      const needed = allTensors(config);
      const missing = needed.filter((spec) => !tensors.has(spec.name));
      const misshapen = needed.filter((spec) => {
        const found = tensors.get(spec.name);
        return found && found.entry.shape.join("x") !== spec.shape.join("x");
      });
      const show = (specs: typeof needed) => specs.slice(0, 3).map((s) => s.name).join(", ") + (specs.length > 3 ? `, ... (${specs.length})` : "");
      if (missing.length > 0) bad(`BAD tensors: ${missing.length} of the ${needed.length} the model needs are in no shard: ${show(missing)}`);
      for (const spec of misshapen.slice(0, 10)) bad(`BAD ${tensors.get(spec.name)?.shard}: tensor ${spec.name} has shape [${tensors.get(spec.name)?.entry.shape.join(", ")}], the model needs [${spec.shape.join(", ")}]`);
      if (missing.length === 0 && misshapen.length === 0) say(`  tensors: all ${needed.length} the model's table names (config.json) are present with their shapes`);
    } catch (error) {
      if (!(error instanceof K3Error)) throw error;
      bad(`BAD config.json: ${error.message.replace(`${configPath}: `, "")}`);
    }
  }
  checkIndexJson(dir, tensors, table, bad, say);
}

function checkIndexJson(dir: string, tensors: Map<string, { shard: string }>, table: ShardTable, bad: (line: string) => void, say: (line: string) => void): void {
  const path = join(dir, indexJsonName);
  if (!existsSync(path)) {
    if (table.isRelease) bad(`BAD ${indexJsonName}: missing (the release has one)`);
    else say(`  index  : no ${indexJsonName} (the listing has none)`);
    return;
  }
  let map: Record<string, unknown>;
  try {
    const raw = parseJsonData(readCapped(path, inputLimits.indexJsonBytes, "the index").toString("utf8")) as { weight_map?: unknown } | null;
    if (typeof raw?.weight_map !== "object" || raw.weight_map === null || Array.isArray(raw.weight_map)) throw new Error("it has no weight_map object");
    map = raw.weight_map as Record<string, unknown>;
  } catch (error) {
    const why = error instanceof JsonSyntaxError ? jsonRefusal(error) : (error as Error).message.replace(`${path}: `, "");
    bad(`BAD ${indexJsonName}: not a safetensors index: ${why}`);
    return;
  }
  const problems: string[] = [];
  let skipped = 0;
  for (const [name, shard] of Object.entries(map)) {
    if (typeof shard !== "string") problems.push(`${displayName(name)} maps to something that is not a file name`);
    else if (table.leftOut.has(shard)) skipped++;
    else if (!tensors.has(name)) problems.push(`${name} -> ${shard}, but no shard holds it`);
    else if (tensors.get(name)?.shard !== shard) problems.push(`${name} -> ${shard}, but it is in ${tensors.get(name)?.shard}`);
  }
  for (const [name, { shard }] of tensors) if (!Object.hasOwn(map, name)) problems.push(`${name} (in ${shard}) is not in the index`);
  for (const problem of problems.slice(0, 10)) bad(`BAD ${indexJsonName}: ${problem}`);
  if (problems.length > 10) bad(`BAD ${indexJsonName}: ... ${problems.length - 10} more`);
  if (problems.length === 0) {
    say(`  index  : ${indexJsonName} maps all ${tensors.size} tensors to the shards that hold them${skipped > 0 ? ` (${skipped} in left-out shards)` : ""}`);
  }
}

/** Step 4: every recorded file hashed against the record. */
async function checkHashes(dir: string, record: DownloadRecord | undefined, bad: (line: string) => void, say: (line: string) => void): Promise<void> {
  if (!record) {
    bad(`BAD ${downloadRecordName}: missing, so there are no hashes to check against (k3 download writes it)`);
    return;
  }
  const present = record.files.filter((f) => sizeOf(join(dir, f.path)) === f.size);
  for (const f of record.files) {
    if (sizeOf(join(dir, f.path)) === undefined) bad(`BAD ${f.path}: missing`);
    else if (sizeOf(join(dir, f.path)) !== f.size) bad(`BAD ${f.path}: ${sizeOf(join(dir, f.path))} bytes, the record says ${f.size}`);
  }
  const progress = new ByteProgress("hashing", present.reduce((s, f) => s + f.size, 0), present.length);
  let matched = 0;
  for (const f of present) {
    const digest = await hashFile(join(dir, f.path), f.size, (n) => progress.add(n));
    progress.fileDone();
    const expected = f.sha256 ?? f.lfs_sha256;
    if (expected === null) {
      bad(`BAD ${f.path}: the record has no hash for it (its download never finished): re-run k3 download`);
    } else if (digest.sha256 !== expected) {
      progress.interrupt();
      bad(`BAD ${f.path}: sha256 ${digest.sha256}, the record says ${expected}`);
    } else if (f.lfs_sha256 === null && digest.gitOid !== f.git_oid) {
      bad(`BAD ${f.path}: git oid ${digest.gitOid}, the listing says ${f.git_oid}`);
    } else {
      matched++;
    }
  }
  progress.finish();
  say(`  hashes : ${matched} of ${record.files.length} files match the sha256 recorded for ${record.repo} at ${record.commit}`);
}

export async function verifyModel(dir: string, options: { hash: boolean }, emitLine: (line: string) => void): Promise<VerifyResult> {
  const lines: string[] = [];
  let bad = 0;
  const say = (line: string) => {
    lines.push(line);
    emitLine(line);
  };
  const badLine = (line: string) => {
    bad++;
    say(line);
  };
  const record = readDownloadRecord(dir);
  const table = shardTable(record);
  say(`verifying ${dir} against ${table.source}`);
  const present = checkSizes(dir, table, badLine, say);
  checkTensors(dir, present, table, badLine, say);
  if (options.hash) await checkHashes(dir, record, badLine, say);
  const leftOut = table.leftOut.size > 0 ? `, except ${table.leftOut.size} file(s) left out when downloading` : "";
  if (bad > 0) say(`  RESULT : NOT a byte-exact match (${bad} problem(s) above)`);
  else if (options.hash && record) say(`  RESULT : checksum-verified snapshot at ${record.commit}${leftOut}`);
  else say(`  RESULT : byte-exact match${leftOut}${options.hash ? "" : " (sizes and headers; --hash also checks every byte)"}`);
  return { lines, bad, ok: bad === 0 };
}
