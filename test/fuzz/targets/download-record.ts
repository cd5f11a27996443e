/**
 * The record k3 download keeps in the destination (src/fetch/download-record.ts): a file on the
 * user's disk, read by every later download and by k3 verify --hash. In process only (through
 * the binary it is one more JSON file under the same strict checks).
 */
import { parseDownloadRecord } from "../../../src/fetch/download-record.ts";
import { text, utf8 } from "../fixtures.ts";
import type { FuzzTarget, Seed } from "../harness.ts";
import { mutateJson } from "../mutate.ts";

const sha = "0123456789abcdef0123456789abcdef01234567";
const sha256 = "d88b0d6a6ff9c3f8151f9d3228f57092aaea997f09af009eefd7373a77b5abb9";
const record = JSON.stringify({
  format: "k3-download", version: 1, repo: "moonshotai/Kimi-K3", revision: "main", commit: sha, endpoint: "https://huggingface.co",
  include: [], exclude: ["model-0009[56]-*"], excluded: [{ path: "model-00095-of-000096.safetensors", size: 92289328 }],
  files: [
    { path: "config.json", size: 554, git_oid: sha, lfs_sha256: null, sha256, verified_at: "2026-01-01T00:00:00.000Z" },
    { path: "model-00001-of-000096.safetensors", size: 2341216112, git_oid: sha, lfs_sha256: sha256, sha256: null, verified_at: null },
  ],
  updated_at: "2026-01-01T00:00:00.000Z",
}, null, 1);

export const downloadRecordTarget: FuzzTarget = {
  name: "download-record",
  about: ".k3-download.json: parseDownloadRecord (commit, paths, sizes, hashes, duplicates)",
  seeds: () => [{ label: ".k3-download.json", bytes: utf8(record) }] as Seed[],
  mutate: (input, rng, seeds) => mutateJson(input, rng, seeds.map((s) => s.bytes)),
  parse: (input, seed) => JSON.stringify(parseDownloadRecord(text(input), seed.label)),
};
