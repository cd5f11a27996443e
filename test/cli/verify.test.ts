/**
 * `k3 verify` through dist/k3: on a directory with the release's exact sizes (sparse shards,
 * test/support/fake-release.ts) it must pass clean and catch a missing shard, a truncated one,
 * two shards wrong by equal and opposite amounts (the total still matches) and a broken index;
 * with --hash, on a repository downloaded from the fake Hub, a single flipped byte.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { appendFileSync, openSync, readFileSync, closeSync, rmSync, truncateSync, writeFileSync, writeSync, statSync } from "node:fs";
import { join } from "node:path";
import { downloadRecordName } from "../../src/fetch/download-record.ts";
import { releaseShards, releaseTotalBytes } from "../../src/fetch/release-shards.ts";
import { FakeHub } from "../support/fake-hub.ts";
import { modelDir } from "../support/fixtures.ts";
import { writeSparseRelease } from "../support/fake-release.ts";
import { k3 } from "../support/k3.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

const shard = (n: number) => releaseShards[n - 1]!.name;

describe("k3 verify against the release table", () => {
  test("a directory with every shard at its published size passes, headers and index included", () => {
    const dir = writeSparseRelease();
    const run = k3(["verify", dir]);
    expect(run.stdout).toContain("  shards : 96 (expect 96)");
    expect(run.stdout).toContain(`  bytes  : ${releaseTotalBytes} (expect ${releaseTotalBytes})`);
    expect(run.stdout).toContain("  shards : all 96 match their published sizes individually");
    expect(run.stdout).toMatch(/headers: 96 of 96 parsed, \d+ tensors/);
    expect(run.stdout).toMatch(/tensors: all \d+ the model's table names \(config.json\) are present with their shapes/);
    expect(run.stdout).toContain("  RESULT : byte-exact match");
    expect(run.stdout).not.toContain("BAD");
    expect(run.code).toBe(0);
  });

  test("a missing shard and a truncated one are named, with the delta", () => {
    const dir = writeSparseRelease();
    rmSync(join(dir, shard(7)));
    truncateSync(join(dir, shard(50)), releaseShards[49]!.bytes - 4096);
    truncateSync(join(dir, shard(1)), 100);
    const run = k3(["verify", dir]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("  shards : 95 (expect 96)");
    const delta = releaseShards[6]!.bytes + 4096 + (releaseShards[0]!.bytes - 100);
    expect(run.stdout).toContain(`delta -${delta}`);
    expect(run.stdout).toContain(`BAD ${shard(7)}: missing (expect ${releaseShards[6]!.bytes} bytes)`);
    expect(run.stdout).toContain(`BAD ${shard(50)}: ${releaseShards[49]!.bytes - 4096} bytes, expect ${releaseShards[49]!.bytes} (-4096)`);
    expect(run.stdout).toContain(`BAD ${shard(1)}: 100 bytes`);
    // Shard 1 lost its header's tail too: the header check names it.
    expect(run.stdout).toMatch(new RegExp(`BAD ${shard(1)}: not a valid safetensors shard`));
    expect(run.stdout).toContain("RESULT : NOT a byte-exact match");
  });

  test("two shards wrong by equal and opposite amounts pass the total and fail individually", () => {
    const dir = writeSparseRelease();
    truncateSync(join(dir, shard(3)), releaseShards[2]!.bytes - 1000);
    appendFileSync(join(dir, shard(4)), new Uint8Array(1000));
    const run = k3(["verify", dir]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(`  bytes  : ${releaseTotalBytes} (expect ${releaseTotalBytes})\n`);
    expect(run.stdout).toContain(`BAD ${shard(3)}: ${releaseShards[2]!.bytes - 1000} bytes, expect ${releaseShards[2]!.bytes} (-1000)`);
    expect(run.stdout).toContain(`BAD ${shard(4)}: ${releaseShards[3]!.bytes + 1000} bytes, expect ${releaseShards[3]!.bytes} (+1000)`);
    expect(run.stdout).toContain("  shards : 2 of 96 do not match");
  });

  test("an index that misses a tensor, a stray shard and a missing config are BAD", () => {
    const dir = writeSparseRelease();
    const indexPath = join(dir, "model.safetensors.index.json");
    const index = JSON.parse(readFileSync(indexPath, "utf8"));
    const dropped = Object.keys(index.weight_map)[5]!;
    delete index.weight_map[dropped];
    writeFileSync(indexPath, JSON.stringify(index));
    writeFileSync(join(dir, "model-00097-of-000096.safetensors"), "x");
    rmSync(join(dir, "config.json"));
    const run = k3(["verify", dir]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain(`BAD model.safetensors.index.json: ${dropped} (in `);
    expect(run.stdout).toContain("BAD model-00097-of-000096.safetensors: not a shard of the release");
    expect(run.stdout).toContain("BAD config.json: missing");
  });

  test("shards a download left out with --exclude are reported as left out, not missing", () => {
    const dir = writeSparseRelease();
    rmSync(join(dir, shard(95)));
    rmSync(join(dir, shard(96)));
    const record = {
      format: "k3-download", version: 1, repo: "moonshotai/Kimi-K3", revision: "main", commit: "a".repeat(40),
      endpoint: "https://huggingface.co", include: [], exclude: ["model-0009[56]-*"],
      excluded: [95, 96].map((n) => ({ path: shard(n), size: releaseShards[n - 1]!.bytes })), files: [], updated_at: "",
    };
    writeFileSync(join(dir, downloadRecordName), JSON.stringify(record));
    // Their tensors are still in the index: that is expected, they are skipped.
    const run = k3(["verify", dir]);
    expect(run.stdout).toContain(`  shards : 94 (expect 94, 2 left out by the download: ${shard(95)} ${shard(96)})`);
    expect(run.stdout).toContain("RESULT : byte-exact match, except 2 file(s) left out when downloading");
  });
});

describe("k3 verify --hash after k3 download", () => {
  const repo = "test-org/tiny-k3";
  const commit = "89abcdef0123456789abcdef0123456789abcdef";
  const source = modelDir("nested14");
  const files = ["config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    .map((path) => ({ path, bytes: new Uint8Array(readFileSync(join(source, path))), lfs: path.endsWith(".safetensors") }));
  const hub = new FakeHub({ repo, commit, files });
  afterAll(() => hub.stop());

  test("every byte is checked: clean passes, one flipped byte fails and is named", async () => {
    const dir = join(tempDir("verify-hash"), "model");
    const got = await k3Async(["download", dir, "--repo", repo], { env: { K3_HUB_URL: hub.url, HF_TOKEN: undefined } });
    expect(got.code).toBe(0);
    const clean = await k3Async(["verify", dir, "--hash"]);
    expect(clean.stdout).toContain(`against the listing of ${repo} at ${commit}`);
    expect(clean.stdout).toContain(`  hashes : 4 of 4 files match the sha256 recorded for ${repo} at ${commit}`);
    expect(clean.stdout).toContain(`  RESULT : checksum-verified snapshot at ${commit}`);
    expect(clean.code).toBe(0);
    expect(clean.stderr).toMatch(/hashing .* 4\/4 files/);

    const target = join(dir, "model-00002-of-00002.safetensors");
    const at = statSync(target).size - 10;
    const fd = openSync(target, "r+");
    const byte = Buffer.alloc(1);
    const { readSync } = await import("node:fs");
    readSync(fd, byte, 0, 1, at);
    byte[0] = byte[0]! ^ 0x40;
    writeSync(fd, byte, 0, 1, at);
    closeSync(fd);
    const sizesOnly = await k3Async(["verify", dir]);
    expect(sizesOnly.code).toBe(0);
    const flipped = await k3Async(["verify", dir, "--hash"]);
    expect(flipped.code).toBe(1);
    expect(flipped.stdout).toMatch(/BAD model-00002-of-00002\.safetensors: sha256 [0-9a-f]{64}, the record says [0-9a-f]{64}/);
    expect(flipped.stdout).toContain("  hashes : 3 of 4 files match");
  }, 60_000);

  test("--hash without a download record cannot pass", () => {
    const run = k3(["verify", modelDir("nested14"), "--hash"]);
    expect(run.code).toBe(1);
    expect(run.stdout).toContain("BAD .k3-download.json: missing, so there are no hashes to check against");
  });
});
