/**
 * `k3 download` end to end through dist/k3 against a fake Hub on loopback (test/support/
 * fake-hub.ts) serving a small repository: git files, LFS files behind a CDN redirect, a nested
 * path. Every test also checks the invariant that matters most: a file with its final name holds
 * exactly the repository's bytes, whatever went wrong.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { downloadRecordName } from "../../src/fetch/download-record.ts";
import { FakeHub, pseudoRandomBytes, sha256Hex, type FakeFile, type FakeHubOptions } from "../support/fake-hub.ts";
import { modelDir } from "../support/fixtures.ts";
import { k3Async, spawnK3 } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

const repo = "test-org/tiny-k3";
const commit = "0123456789abcdef0123456789abcdef01234567";
const tiny = modelDir("tiny13");
const bigPath = "weights/big.bin";

const files: FakeFile[] = [
  { path: "config.json", bytes: new Uint8Array(readFileSync(join(tiny, "config.json"))), lfs: false },
  { path: "model.safetensors.index.json", bytes: new Uint8Array(readFileSync(join(tiny, "model.safetensors.index.json"))), lfs: false },
  { path: "model-00001-of-00001.safetensors", bytes: new Uint8Array(readFileSync(join(tiny, "model-00001-of-00001.safetensors"))), lfs: true },
  { path: bigPath, bytes: pseudoRandomBytes(3 * 1024 * 1024 + 123, 7), lfs: true },
  { path: "notes/readme.txt", bytes: new TextEncoder().encode("a file kept in git, in a folder\n"), lfs: false },
];
const byPath = new Map(files.map((f) => [f.path, f]));

let hubs: FakeHub[] = [];
afterEach(() => {
  for (const hub of hubs) hub.stop();
  hubs = [];
});

function fakeHub(options: Partial<FakeHubOptions> = {}): FakeHub {
  const hub = new FakeHub({ repo, commit, files, ...options });
  hubs.push(hub);
  return hub;
}

function download(hub: FakeHub, dest: string, extra: string[] = [], env: Record<string, string | undefined> = {}) {
  return k3Async(["download", dest, "--repo", repo, ...extra], { env: { K3_HUB_URL: hub.url, HF_TOKEN: undefined, ...env }, timeoutMs: 60_000 });
}

/** Every path under `dest`, relative. */
function listDest(dest: string): string[] {
  const out: string[] = [];
  const visit = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) visit(path);
      else out.push(relative(dest, path));
    }
  };
  visit(dest);
  return out.sort();
}

/** No file with a final name holds anything but the repository's bytes. */
function expectOnlyVerifiedFinalNames(dest: string): void {
  for (const path of listDest(dest)) {
    if (path.endsWith(".part") || path === downloadRecordName) continue;
    const file = byPath.get(path);
    expect(file, `unexpected file ${path}`).toBeDefined();
    expect(sha256Hex(readFileSync(join(dest, path)))).toBe(sha256Hex(file!.bytes));
  }
}

function record(dest: string) {
  return JSON.parse(readFileSync(join(dest, downloadRecordName), "utf8"));
}

describe("k3 download against a fake Hub", () => {
  test("a clean download pins the commit, fetches every file, hashes and records it; a re-run fetches nothing", async () => {
    const hub = fakeHub({ pageSize: 2 });
    const dest = join(tempDir("dl-clean"), "model");
    const run = await download(hub, dest);
    expect(run.stderr).toContain(`commit ${commit}`);
    expect(run.code).toBe(0);
    expect(listDest(dest)).toEqual([...files.map((f) => f.path), downloadRecordName].sort());
    expectOnlyVerifiedFinalNames(dest);
    const rec = record(dest);
    expect(rec.commit).toBe(commit);
    expect(rec.revision).toBe("main");
    expect(rec.files.map((f: { path: string; sha256: string }) => [f.path, f.sha256]).sort())
      .toEqual(files.map((f) => [f.path, sha256Hex(f.bytes)]).sort());
    // Every byte request named the commit, never the branch; paging was followed.
    expect(hub.requests.filter((r) => r.path === "tree").length).toBe(Math.ceil(hub.listingEntries().length / 2));
    expect(run.stderr).toMatch(/download .* of .*MB\/s.*ETA.*files/);
    for (const f of files) expect(hub.transfers(f.path).length).toBe(1);
    expect(run.stderr).toContain("next: k3 verify");

    const again = await download(hub, dest);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain(`already verified: ${files.length} file(s)`);
    for (const f of files) expect(hub.transfers(f.path).length).toBe(1);
  }, 60_000);

  test("a transfer cut by a killed process is resumed by the next run without fetching its bytes again", async () => {
    const hub = fakeHub({ faults: { [bigPath]: { stall: { times: 1, afterBytes: 1024 * 1024 } } } });
    const dest = join(tempDir("dl-kill"), "model");
    const child = spawnK3(["download", dest, "--repo", repo, "--workers", "2"], { env: { K3_HUB_URL: hub.url, HF_TOKEN: undefined } });
    const part = join(dest, `${bigPath}.part`);
    const deadline = performance.now() + 30_000;
    while (performance.now() < deadline && !(existsSync(part) && statSync(part).size >= 1024 * 1024)) await Bun.sleep(20);
    expect(statSync(part).size).toBe(1024 * 1024);
    child.kill("SIGKILL");
    await child.exited;
    expect(existsSync(join(dest, bigPath))).toBe(false);
    expectOnlyVerifiedFinalNames(dest);
    const servedBefore = hub.servedBytes.get(bigPath) ?? 0;

    const run = await download(hub, dest);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain("resuming 1 partial file(s)");
    const resumed = hub.transfers(bigPath).at(-1)!;
    expect(resumed.range).toBe(`bytes=${1024 * 1024}-`);
    const big = byPath.get(bigPath)!;
    expect((hub.servedBytes.get(bigPath) ?? 0) - servedBefore).toBe(big.bytes.byteLength - 1024 * 1024);
    expect(existsSync(part)).toBe(false);
    expectOnlyVerifiedFinalNames(dest);
    expect(listDest(dest).length).toBe(files.length + 1);
  }, 60_000);

  test("Ctrl-C stops the workers, keeps the partial files and says how to resume", async () => {
    const hub = fakeHub({ faults: { [bigPath]: { stall: { times: 1, afterBytes: 512 * 1024 } } } });
    const dest = join(tempDir("dl-sigint"), "model");
    const child = spawnK3(["download", dest, "--repo", repo], { env: { K3_HUB_URL: hub.url, HF_TOKEN: undefined } });
    const part = join(dest, `${bigPath}.part`);
    const deadline = performance.now() + 30_000;
    while (performance.now() < deadline && !(existsSync(part) && statSync(part).size >= 512 * 1024)) await Bun.sleep(20);
    child.kill("SIGINT");
    const [stderr, code] = await Promise.all([new Response(child.stderr).text(), child.exited]);
    expect(code).toBe(130);
    expect(stderr).toContain("stopping: partial files are kept, re-run to resume");
    expect(stderr).toContain("interrupted:");
    expect(statSync(part).size).toBe(512 * 1024);
    expectOnlyVerifiedFinalNames(dest);
    const run = await download(hub, dest);
    expect(run.code).toBe(0);
    expect(hub.transfers(bigPath).at(-1)!.range).toBe(`bytes=${512 * 1024}-`);
    expectOnlyVerifiedFinalNames(dest);
  }, 60_000);

  test("a connection dropped mid-file, a reset and a stall are resumed with Range in the same run", async () => {
    const hub = fakeHub({
      faults: {
        [bigPath]: { cut: { times: 1, afterBytes: 500_000 } },
        "model-00001-of-00001.safetensors": { cut: { times: 1, afterBytes: 200_000, reset: true } },
        "notes/readme.txt": { stall: { times: 1, afterBytes: 10 }, stream: true },
      },
    });
    const dest = join(tempDir("dl-drop"), "model");
    const run = await download(hub, dest, ["--stall-seconds", "1"]);
    expect(run.code).toBe(0);
    expect(hub.transfers(bigPath).map((r) => r.range)).toEqual([null, "bytes=500000-"]);
    expect(hub.transfers("model-00001-of-00001.safetensors").map((r) => r.range)).toEqual([null, "bytes=200000-"]);
    expect(hub.transfers("notes/readme.txt").map((r) => r.range)).toEqual([null, "bytes=10-"]);
    expect(run.stderr).toContain("no data for 1 s");
    expectOnlyVerifiedFinalNames(dest);
    expect(listDest(dest).length).toBe(files.length + 1);
  }, 60_000);

  test("500s, a 503 with Retry-After and a 503 on the revision API succeed on retry", async () => {
    const hub = fakeHub({
      revisionFail: { times: 1, status: 503 },
      faults: { "config.json": { fail: { times: 2, status: 500 } }, [bigPath]: { fail: { times: 1, status: 503, retryAfter: 1 } } },
    });
    const dest = join(tempDir("dl-500"), "model");
    const run = await download(hub, dest);
    expect(run.code).toBe(0);
    expect(hub.transfers("config.json").map((r) => r.status)).toEqual([500, 500, 200]);
    expect(hub.transfers(bigPath).map((r) => r.status)).toEqual([503, 200]);
    expect(run.stderr).toContain("config.json: HTTP 500; retrying from byte 0");
    expectOnlyVerifiedFinalNames(dest);
  }, 60_000);

  test("a server that lies about a size is refused and the file never gets its final name", async () => {
    const big = byPath.get(bigPath)!;
    const longer = new Uint8Array(big.bytes.byteLength + 1000);
    longer.set(big.bytes);
    const hub = fakeHub({ faults: { [bigPath]: { serve: longer }, "notes/readme.txt": { serve: new TextEncoder().encode("a file kept in git, in a folder\nand more"), stream: true } } });
    const dest = join(tempDir("dl-lie"), "model");
    const run = await download(hub, dest);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`${bigPath}: the server says the file has ${longer.byteLength} bytes, the listing says ${big.bytes.byteLength}; refused`);
    expect(run.stderr).toContain("notes/readme.txt: the server sent more than the listed");
    expect(existsSync(join(dest, bigPath))).toBe(false);
    expect(existsSync(join(dest, "notes/readme.txt"))).toBe(false);
    expect(existsSync(join(dest, "config.json"))).toBe(true);
    expectOnlyVerifiedFinalNames(dest);
  }, 60_000);

  test("bytes that do not match the listed sha256 (LFS) or git oid are refused; the .part never gets the final name", async () => {
    const big = byPath.get(bigPath)!;
    const flipped = big.bytes.slice();
    flipped[123_456] = (flipped[123_456] as number) ^ 0x01;
    const config = byPath.get("config.json")!;
    const wrongConfig = config.bytes.slice();
    wrongConfig[3] = (wrongConfig[3] as number) ^ 0x20;
    const hub = fakeHub({ faults: { [bigPath]: { serve: flipped }, "config.json": { serve: wrongConfig } } });
    const dest = join(tempDir("dl-hash"), "model");
    const run = await download(hub, dest);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`${bigPath}: the downloaded bytes have sha256 ${sha256Hex(flipped)}, the listing says sha256 ${sha256Hex(big.bytes)}; refused`);
    expect(run.stderr).toMatch(/config\.json: the downloaded bytes have git oid [0-9a-f]{40}, the listing says git oid/);
    expect(run.stderr).toContain("2 file(s) not downloaded");
    expect(existsSync(join(dest, bigPath))).toBe(false);
    expect(existsSync(join(dest, `${bigPath}.part`))).toBe(false);
    expect(existsSync(join(dest, "config.json"))).toBe(false);
    expectOnlyVerifiedFinalNames(dest);
    // Fixed on the server, a re-run fetches just those two.
    hub.options.faults = {};
    const again = await download(hub, dest);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain(`already verified: ${files.length - 2} file(s)`);
    expectOnlyVerifiedFinalNames(dest);
  }, 60_000);

  test("401 without a token and with a wrong one, 403 and 404 stop with what to do, and the token is never shown", async () => {
    const token = "hf_fakeSecretToken1234567890";
    const hub = fakeHub({ token });
    const dest = join(tempDir("dl-401"), "model");
    const none = await download(hub, dest);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`${repo} revision main: the Hub asks for authentication (401)`);
    expect(none.stderr).toContain("set HF_TOKEN");
    const wrong = await download(hub, dest, [], { HF_TOKEN: "hf_wrongWrongWrong" });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain("the Hub refused the token in HF_TOKEN (401)");
    expect(wrong.stderr + wrong.stdout).not.toContain("hf_wrongWrongWrong");

    const gone = fakeHub({ token, faults: { [bigPath]: { status: 404 } } });
    const missing = await download(gone, dest, [], { HF_TOKEN: token });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain(`k3: ${bigPath}: not found at commit ${commit} (404)`);
    expect(existsSync(join(dest, bigPath))).toBe(false);
    expectOnlyVerifiedFinalNames(dest);

    const gated = fakeHub({ token, faults: { "config.json": { status: 403 } } });
    const denied = await download(gated, join(tempDir("dl-403"), "model"), [], { HF_TOKEN: token });
    expect(denied.code).toBe(1);
    expect(denied.stderr).toContain("config.json: access denied (403): accept its terms at");

    const noRevision = await download(hub, dest, ["--revision", "v9"], { HF_TOKEN: token });
    expect(noRevision.code).toBe(1);
    expect(noRevision.stderr).toContain("revision 'v9' does not exist in test-org/tiny-k3 (404)");

    const ok = await download(hub, dest, [], { HF_TOKEN: token });
    expect(ok.code).toBe(0);
    expectOnlyVerifiedFinalNames(dest);
    for (const run of [none, wrong, missing, denied, noRevision, ok]) expect(run.stdout + run.stderr).not.toContain(token);
    expect(readFileSync(join(dest, downloadRecordName), "utf8")).not.toContain(token);
    // The token went to the Hub and never to the CDN the LFS files redirect to.
    const hubAuth = [...hub.requests, ...gone.requests, ...gated.requests].filter((r) => r.server === "hub" && r.authorization === `Bearer ${token}`);
    expect(hubAuth.length).toBeGreaterThan(0);
    const cdn = [...hub.requests, ...gone.requests, ...gated.requests].filter((r) => r.server === "cdn");
    expect(cdn.length).toBeGreaterThan(0);
    expect(cdn.every((r) => r.authorization === null)).toBe(true);
  }, 60_000);

  test("the free-space preflight refuses a repository larger than the disk before fetching anything", async () => {
    const hub = fakeHub({
      listing: (entries) => entries.map((e) => (e.path === bigPath ? { ...e, size: 9e14, lfs: { oid: "a".repeat(64), size: 9e14, pointerSize: 134 } } : e)),
    });
    const dest = join(tempDir("dl-space"), "model");
    const run = await download(hub, dest);
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/not enough free space: .* still to download, .* free \(short by /);
    expect(hub.requests.filter((r) => r.path.startsWith("file:"))).toEqual([]);
  }, 60_000);

  test("--exclude and --include select files; the record names what was left out", async () => {
    const hub = fakeHub();
    const dest = join(tempDir("dl-select"), "model");
    const run = await download(hub, dest, ["--exclude", "weights/*,*.txt"]);
    expect(run.code).toBe(0);
    expect(listDest(dest)).toEqual(["config.json", "model-00001-of-00001.safetensors", "model.safetensors.index.json", downloadRecordName].sort());
    expect(record(dest).excluded.map((e: { path: string }) => e.path).sort()).toEqual(["notes/readme.txt", bigPath]);
    const only = await download(hub, join(tempDir("dl-include"), "model"), ["--include", "*.json"]);
    expect(only.code).toBe(0);
    const none = await download(hub, join(tempDir("dl-none"), "model"), ["--include", "*.gguf"]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("no file of test-org/tiny-k3 matches --include/--exclude");
    const bad = await download(hub, dest, ["--exclude", "[abc"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("--exclude: '[abc' has a '[' without its ']'");
  }, 60_000);

  test("a hostile listing (a path that climbs out, a next page on another host) is refused before anything is written", async () => {
    const climbing = fakeHub({ listing: (entries) => [...entries, { type: "file", path: "../escape.txt", size: 3, oid: "b".repeat(40) }] });
    const parent = tempDir("dl-hostile");
    const dest = join(parent, "model");
    const run = await download(climbing, dest);
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(`has the path "../escape.txt", refused because it has an empty, '.' or '..' segment`);
    expect(existsSync(join(parent, "escape.txt"))).toBe(false);
    expect(climbing.requests.filter((r) => r.path.startsWith("file:"))).toEqual([]);

    const elsewhere = fakeHub({ pageSize: 2, linkOrigin: "http://127.0.0.1:9" });
    const paged = await download(elsewhere, join(parent, "other"));
    expect(paged.code).toBe(1);
    expect(paged.stderr).toContain("the next page is on another host (127.0.0.1:9); refused");
  }, 60_000);

  test("a branch that moved: the new commit is pinned, changed files are replaced, unchanged ones kept", async () => {
    const first = fakeHub();
    const dest = join(tempDir("dl-moved"), "model");
    expect((await download(first, dest)).code).toBe(0);
    const newCommit = "fedcba9876543210fedcba9876543210fedcba98";
    const changed = files.map((f) => (f.path === "config.json" ? { ...f, bytes: new TextEncoder().encode("{\"changed\": 1}\n") } : f));
    const second = new FakeHub({ repo, commit: newCommit, files: changed });
    hubs.push(second);
    const run = await download(second, dest);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain(`commit ${newCommit} (the record had ${commit})`);
    expect(run.stderr).toContain(`already verified: ${files.length - 1} file(s)`);
    expect(second.transfers("config.json").length).toBe(1);
    expect(second.transfers(bigPath)).toEqual([]);
    expect(readFileSync(join(dest, "config.json"), "utf8")).toBe("{\"changed\": 1}\n");
    expect(record(dest).commit).toBe(newCommit);
  }, 60_000);

  test("files already there: the listing's bytes are kept unfetched, a user's other bytes are never overwritten", async () => {
    const hub = fakeHub();
    const dest = join(tempDir("dl-user"), "model");
    mkdirSync(join(dest, "weights"), { recursive: true });
    writeFileSync(join(dest, "config.json"), "{\"mine\": true}\n");
    writeFileSync(join(dest, bigPath), byPath.get(bigPath)!.bytes);
    for (let i = 0; i < 2; i++) {
      const run = await download(hub, dest);
      expect(run.code).toBe(1);
      expect(run.stderr).toContain("FAILED config.json: a file with this name and other bytes is already there; move it away and re-run");
      expect(readFileSync(join(dest, "config.json"), "utf8")).toBe("{\"mine\": true}\n");
    }
    expect(hub.transfers(bigPath)).toEqual([]);
    expect(hub.transfers("config.json")).toEqual([]);
    expect(record(dest).files.find((f: { path: string }) => f.path === bigPath).sha256).toBe(sha256Hex(byPath.get(bigPath)!.bytes));
    expect(existsSync(join(dest, "model-00001-of-00001.safetensors"))).toBe(true);
  }, 60_000);
});
