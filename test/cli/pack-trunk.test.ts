/** `k3 pack-trunk` and the checks a packed trunk must pass before k3 streams from it. */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir } from "../support/fixtures.ts";
import { k3Async } from "../support/k3-async.ts";
import { smallFsUnavailable, withSmallFs } from "../support/small-fs.ts";
import { tempDir } from "../support/tmp.ts";

// The tests are independent dist/k3 runs and run concurrently; a test's time includes the others'.
setDefaultTimeout(60_000);

const dir = modelDir("nested14");
const want = expectation("nested14");
const run = (trunk: string) => k3Async([dir, "--ids", want.prompt_ids.join(","), "--gen", "3", "--trunk", trunk, "--trunk-gb", "0", "--out", "-"]);

async function packed(): Promise<string> {
  const out = join(tempDir("pack"), "trunk");
  const r = await k3Async(["pack-trunk", dir, out]);
  expect(r.code).toBe(0);
  expect(r.stderr).toContain("wrote trunk.bin");
  expect(r.stderr).toContain("verified");
  return out;
}

describe.concurrent("k3 pack-trunk --compress", () => {
  test("stores fewer bytes, streams the same ids, packs again as a no-op and never replaces a plain pack unasked", async () => {
    const out = join(tempDir("pack-compressed"), "trunk");
    const r = await k3Async(["pack-trunk", dir, out, "--compress"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/wrote trunk\.bin: [\d.]+ [KM]B across 14 layers, stored in [\d.]+ [KM]B \([\d.]+%, bf16-planes\), verified/);
    const manifest = JSON.parse(readFileSync(join(out, "trunk.json"), "utf8"));
    expect(manifest.codec).toEqual({ name: "bf16-planes", block_bytes: 262144 });
    const stored = manifest.layers.reduce((sum: number, l: { stored_bytes: number }) => sum + l.stored_bytes, 0);
    const payload = manifest.layers.reduce((sum: number, l: { payload_bytes: number }) => sum + l.payload_bytes, 0);
    expect(stored).toBeLessThan(payload);
    expect(statSync(join(out, "trunk.bin")).size).toBe(manifest.layers.reduce((sum: number, l: { nbytes: number }) => sum + l.nbytes, 0));
    const streamed = await run(out);
    expect(streamed.code).toBe(0);
    const results = JSON.parse(streamed.stdout);
    expect(results.generated_ids).toEqual(want.generated_ids.slice(0, 3));
    // Read as stored, decoded to the plain layers.
    expect(results.trunk_stats.bytes_decoded).toBeGreaterThan(results.trunk_stats.bytes_read);
    expect(streamed.stderr).toMatch(/decoded [\d.]+ [KM]B of compressed layers/);
    const again = await k3Async(["pack-trunk", dir, out, "--compress"]);
    expect(again.stderr).toContain("already holds this pack");
    const plain = await k3Async(["pack-trunk", dir, out]);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain("already holds a different or incomplete packed trunk; pass --force");
  });

  test("a damaged block is refused with one line naming the layer, the block and its tensor", async () => {
    const out = join(tempDir("pack-compressed-damaged"), "trunk");
    expect((await k3Async(["pack-trunk", dir, out, "--compress"])).code).toBe(0);
    const manifest = JSON.parse(readFileSync(join(out, "trunk.json"), "utf8"));
    const bin = join(out, "trunk.bin");
    const bytes = readFileSync(bin);
    const at = manifest.layers[5].file_off + 16 + 200; // inside layer 5's one block, after the table
    bytes[at] = (bytes[at] as number) ^ 0x40;
    writeFileSync(bin, bytes);
    const r = await run(out);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/\nk3: \S+trunk\.bin: layer 5 block 0 \(bytes \[0, \d+\) of the layer, in language_model\.model\.layers\.5\.\S+ and \d+ more tensors\) is damaged: its entry, header or checksum is wrong; re-run 'k3 pack-trunk --compress'; the run stopped at step 0 and wrote no results\n$/);
    expect(r.stdout).toBe("");
  });
});

describe.concurrent("k3 pack-trunk", () => {
  test("writes trunk.bin with each layer 4096-aligned and trunk.json describing it", async () => {
    const out = await packed();
    const manifest = JSON.parse(readFileSync(join(out, "trunk.json"), "utf8"));
    expect(manifest.n_layers).toBe(14);
    for (const layer of manifest.layers) {
      expect(layer.file_off % 4096).toBe(0);
      expect(layer.nbytes % 4096).toBe(0);
    }
    expect(readdirSync(out).sort()).toEqual(["trunk.bin", "trunk.json"]);
    expect(JSON.parse((await run(out)).stdout).generated_ids).toEqual(want.generated_ids.slice(0, 3));
  });

  test("packing again into the same directory is a no-op; a different pack is not overwritten", async () => {
    const out = await packed();
    const again = await k3Async(["pack-trunk", dir, out]);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain("already holds this pack");
    const different = await k3Async(["pack-trunk", dir, out, "--layers", "3"]);
    expect(different.code).toBe(1);
    expect(different.stderr).toBe(`k3: ${out} already holds a different or incomplete packed trunk; pass --force to replace it\n`);
    const forced = await k3Async(["pack-trunk", dir, out, "--layers", "3", "--force"]);
    expect(forced.code).toBe(0);
    expect(JSON.parse(readFileSync(join(out, "trunk.json"), "utf8")).n_layers).toBe(3);
  });

  test("a corrupted trunk.bin is refused when the layer is first read", async () => {
    const out = await packed();
    const bin = join(out, "trunk.bin");
    const bytes = readFileSync(bin);
    const manifest = JSON.parse(readFileSync(join(out, "trunk.json"), "utf8"));
    const at = manifest.layers[5].file_off + 100;
    bytes[at] = (bytes[at] as number) ^ 0xff;
    writeFileSync(bin, bytes);
    const r = await run(out);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`k3: ${bin}: layer 5 does not match its recorded hash (corrupted?); re-run 'k3 pack-trunk'`);
  });

  test("a truncated trunk.bin is refused before anything runs", async () => {
    const out = await packed();
    const bin = join(out, "trunk.bin");
    truncateSync(bin, readFileSync(bin).length - 5000);
    const r = await run(out);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^k3: ${bin}: not a usable packed trunk: layer 13 ends at byte \\d+ but the file has \\d+ \\(truncated\\?\\)\\n$`));
  });

  test("a pack killed mid-write (SIGKILL) leaves nothing beside the target, and the next pack works", async () => {
    const out = join(tempDir("interrupted"), "trunk");
    const killed = await k3Async(["pack-trunk", dir, out], { env: { K3_PACK_KILL_AFTER_LAYERS: "4" } });
    expect(killed.code).not.toBe(0);
    expect(killed.stderr).toContain("packed 4/14 layers");
    expect(existsSync(join(out, "trunk.json"))).toBe(false);
    expect(existsSync(join(out, "trunk.bin"))).toBe(false);
    // The pack was staged in an unnamed file (O_TMPFILE; the test directories are on tmpfs, which has it): nothing is left.
    expect(readdirSync(out)).toEqual([]);
    const r = await run(out);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("trunk.json is missing (pack it with 'k3 pack-trunk')");
    expect((await k3Async(["pack-trunk", dir, out])).code).toBe(0);
    expect(readdirSync(out).sort()).toEqual(["trunk.bin", "trunk.json"]);
  });

  test("a packed trunk from another checkpoint is refused", async () => {
    const other = join(tempDir("other"), "trunk");
    expect((await k3Async(["pack-trunk", modelDir("tiny13"), other])).code).toBe(0);
    const short = await run(other);
    expect(short.code).toBe(1);
    expect(short.stderr).toContain("the packed trunk holds 13 layers, 14 are needed");
    const r = await k3Async([dir, "--ids", "1,2", "--gen", "1", "--layers", "13", "--trunk", other, "--out", "-"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`k3: ${other}: layer 0 of the packed trunk does not match this checkpoint; re-run 'k3 pack-trunk'`);
  });

  test("usage errors exit 2", async () => {
    expect((await k3Async(["pack-trunk", dir])).code).toBe(2);
    expect((await k3Async(["pack-trunk", dir, "x", "--layers", "abc"])).stderr).toBe("k3: --layers expects a whole number from 1 to 1024, got 'abc'\n");
  });
});

describe.concurrent("k3 pack-trunk on paths and disks that refuse the write", () => {
  test("a <trunk_dir> that cannot be a directory is refused before the checkpoint is read (exit 2)", async () => {
    const base = tempDir("pack-paths");
    const file = join(base, "file");
    writeFileSync(file, "mine");
    const long = join(base, "x".repeat(256));
    for (const [target, reason] of [
      [file, "is not a directory"],
      [join(file, "trunk"), "a component of the path is not a directory (ENOTDIR)"],
      [long, "name too long (ENAMETOOLONG)"],
    ] as const) {
      const r = await k3Async(["pack-trunk", "/nonexistent-model", target]);
      expect(r.stderr).toBe(`k3: <trunk_dir> ${target}: ${reason}\n`);
      expect(r.code).toBe(2);
    }
    expect(readFileSync(file, "utf8")).toBe("mine");
  });

  test.skipIf(smallFsUnavailable() !== undefined)("a read-only filesystem is refused before packing (EROFS, exit 2)", () => {
    const r = withSmallFs(65536, `"$K3" pack-trunk "${dir}" "$MNT/trunk"`, { readOnly: true });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^k3: <trunk_dir> \S+\/trunk: directory \S+ is not writable: read-only file system \(EROFS\)\n$/);
  });

  test.skipIf(smallFsUnavailable() !== undefined)("a disk too small for trunk.bin: ENOSPC named, nothing left filling the disk", () => {
    const r = withSmallFs(1 << 20, `"$K3" pack-trunk "${dir}" "$MNT/trunk"; code=$?; echo "left: $(ls -A "$MNT/trunk")"; exit $code`);
    expect(r.code).toBe(1);
    expect(r.stderr.trimEnd().split("\n").at(-1)).toMatch(/^k3: \S+\/trunk\/trunk\.bin: cannot write the packed trunk: no space left on device \(ENOSPC\)$/);
    expect(r.stdout).toBe("left: \n");
  });

  test.skipIf(smallFsUnavailable() !== undefined)("ENOSPC on trunk.json leaves nothing; after freeing space the same command packs, no --force", async () => {
    const reference = await packed();
    const binBytes = statSync(join(reference, "trunk.bin")).size;
    const jsonBytes = statSync(join(reference, "trunk.json")).size;
    expect(jsonBytes).toBeGreaterThan(8192);
    // Room for trunk.bin and one page of trunk.json: the manifest is what runs out of space. The
    // rest of the disk is a file of the user's, removed to free the space (a remount needs root).
    const size = 64 << 20;
    const filler = size - (Math.ceil(binBytes / 4096) + 1) * 4096;
    const r = withSmallFs(size, [
      `head -c ${filler} /dev/zero > "$MNT/filler"`,
      `"$K3" pack-trunk "${dir}" "$MNT/trunk"; echo "first: $?"; echo "left: $(ls -A "$MNT/trunk")"`,
      `rm "$MNT/filler"`,
      `"$K3" pack-trunk "${dir}" "$MNT/trunk"; echo "second: $?"; echo "after: $(ls -A "$MNT/trunk" | tr '\\n' ' ')"`,
      `"$K3" "${dir}" --ids ${want.prompt_ids.join(",")} --gen 3 --trunk "$MNT/trunk" --trunk-gb 0 --out -`,
    ].join("\n"));
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines.slice(0, 4)).toEqual(["first: 1", "left: ", "second: 0", "after: trunk.bin trunk.json "]);
    expect(r.stderr).toMatch(/k3: \S+\/trunk\/trunk\.json: cannot write the trunk manifest: no space left on device \(ENOSPC\)\n/);
    expect(r.stderr).not.toContain("--force");
    expect(JSON.parse(lines[4] as string).generated_ids).toEqual(want.generated_ids.slice(0, 3));
  });
});
