/**
 * Where a run's outputs go, through dist/k3 (issue 15, defects 4, 6 and 7): regular files are
 * replaced whole by a rename, devices and FIFOs are written in place, a symlink's target is what
 * gets replaced; a path that cannot be written is refused before the model loads; an output that
 * fails after the run leaves no results and no temporary behind.
 */
import { describe, expect, test } from "bun:test";
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir } from "../support/fixtures.ts";
import { k3 } from "../support/k3.ts";
import { smallFsUnavailable, withSmallFs } from "../support/small-fs.ts";
import { tempDir } from "../support/tmp.ts";

const tiny = modelDir("tiny13");
const want = expectation("tiny13");
const ids = want.prompt_ids.join(",");
const vocab = 256;
const run = (extra: string[], options: { timeoutMs?: number } = {}) => k3([tiny, "--ids", ids, "--gen", "2", ...extra], options);

/**
 * A character device to write to. Root makes one of its own in a test directory (the same
 * device numbers), so a k3 that replaced it would replace only that node, never the real one;
 * anyone else cannot replace /dev/null anyway and gets the real one.
 */
function charDevice(name: "null" | "full"): string {
  const path = join(tempDir("dev"), name);
  const made = Bun.spawnSync(["mknod", "-m", "666", path, "c", "1", name === "null" ? "3" : "7"], { stderr: "ignore" });
  return made.exitCode === 0 ? path : `/dev/${name}`;
}

const temporaries = (dir: string) => readdirSync(dir).filter((name) => name.endsWith(".tmp"));
const lastLine = (text: string) => text.trimEnd().split("\n").at(-1);

describe("special files are written in place, never replaced", () => {
  test("--out to a character device writes through it and the device stays a device", () => {
    const dev = charDevice("null");
    const r = run(["--out", dev]);
    expect(r.code).toBe(0);
    expect(lstatSync(dev).isCharacterDevice()).toBe(true);
    expect(r.stderr).toContain(`wrote ${dev}`);
  });

  test("--out to a full device fails with ENOSPC naming the flag (exit 1); the device stays", () => {
    const dev = charDevice("full");
    const r = run(["--out", dev]);
    expect(r.code).toBe(1);
    expect(lastLine(r.stderr)).toBe(`k3: --out ${dev}: cannot write the JSON results: no space left on device (ENOSPC)`);
    expect(r.stderr).not.toContain("internal error");
    expect(lstatSync(dev).isCharacterDevice()).toBe(true);
  });

  test("--out /dev/stdout and /dev/fd/1 write through the descriptor k3 was given (here a socket)", () => {
    for (const path of ["/dev/stdout", "/dev/fd/1"]) {
      const r = run(["--out", path]);
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout).generated_ids).toEqual(want.generated_ids.slice(0, 2));
    }
  });

  test("--out to a FIFO sends the results through it; the FIFO stays a FIFO", async () => {
    const fifo = join(tempDir("fifo"), "results.fifo");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    const reader = Bun.spawn(["cat", fifo], { stdout: "pipe" });
    try {
      const r = run(["--out", fifo], { timeoutMs: 60_000 });
      expect(r.code).toBe(0);
      expect(lstatSync(fifo).isFIFO()).toBe(true);
      const text = await new Response(reader.stdout).text();
      expect(JSON.parse(text).generated_ids).toEqual(want.generated_ids.slice(0, 2));
    } finally {
      reader.kill(); // a k3 that replaced the FIFO would leave cat waiting for a writer
    }
  });

  test("--out to a symlink replaces the file it points to; the link stays a link", () => {
    const dir = tempDir("link");
    mkdirSync(join(dir, "real"));
    writeFileSync(join(dir, "real", "run.json"), "old results");
    const link = join(dir, "run.json");
    symlinkSync("real/run.json", link);
    const r = run(["--out", link]);
    expect(r.code).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe("real/run.json");
    expect(JSON.parse(readFileSync(join(dir, "real", "run.json"), "utf8")).generated_ids).toEqual(want.generated_ids.slice(0, 2));
    expect(temporaries(dir)).toEqual([]);
    expect(temporaries(join(dir, "real"))).toEqual([]);
  });

  test("a dangling symlink gets its target created; --dump-logits follows links too", () => {
    const dir = tempDir("dangling");
    const link = join(dir, "out.json");
    symlinkSync("made.json", link);
    const logitsLink = join(dir, "logits.f32");
    symlinkSync("real-logits.f32", logitsLink);
    const r = run(["--out", link, "--dump-logits", logitsLink]);
    expect(r.code).toBe(0);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(JSON.parse(readFileSync(join(dir, "made.json"), "utf8")).prompt_ids).toEqual(want.prompt_ids);
    expect(lstatSync(logitsLink).isSymbolicLink()).toBe(true);
    expect(readFileSync(join(dir, "real-logits.f32")).length).toBe(vocab * 4);
    expect(readdirSync(dir).sort()).toEqual(["logits.f32", "made.json", "out.json", "real-logits.f32"]);
  });

  test("--dump-logits - writes the raw logits to stdout, the same bytes as a file", () => {
    const dir = tempDir("logits-stdout");
    const file = join(dir, "l.f32");
    expect(run(["--dump-logits", file, "--out", join(dir, "a.json")]).code).toBe(0);
    const r = run(["--dump-logits", "-", "--out", join(dir, "b.json")]);
    expect(r.code).toBe(0);
    expect(Buffer.from(r.stdoutBytes as Uint8Array).equals(readFileSync(file))).toBe(true);
    const both = run(["--dump-logits", "-", "--out", "-"]);
    expect(both.code).toBe(2);
    expect(both.stderr).toBe("k3: --out and --dump-logits both write to stdout; give them different paths\n");
  });
});

describe("outputs are checked before the model loads (exit 2, one line naming the flag and path)", () => {
  const refused = (extra: string[], message: string) => {
    const r = run(extra);
    expect(r.stderr).toBe(`k3: ${message}\n`); // one line: nothing was planned or loaded
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
  };

  test("a missing directory, a directory, a file used as a directory", () => {
    const dir = tempDir("refuse");
    writeFileSync(join(dir, "file"), "x");
    refused(["--out", "/nonexistent/dir/r.json"], "--out /nonexistent/dir/r.json: directory /nonexistent/dir does not exist");
    refused(["--out", dir], `--out ${dir}: is a directory; give a file name`);
    refused(["--out", join(dir, "file", "r.json")], `--out ${join(dir, "file", "r.json")}: a component of the path is not a directory (ENOTDIR)`);
    refused(["--out", "-", "--dump-logits", dir], `--dump-logits ${dir}: is a directory; give a file name`);
    refused(["--out", "-", "--dump-cache-trace", join(dir, "file")], `--dump-cache-trace ${join(dir, "file")}: is not a directory`);
  });

  test("a name longer than NAME_MAX is refused (ENAMETOOLONG); one that fits leaves no temporary", () => {
    const dir = tempDir("names");
    const long = join(dir, `${"a".repeat(256)}.json`);
    refused(["--out", long], `--out ${long}: name too long (ENAMETOOLONG)`);
    const fits = join(dir, `${"b".repeat(250)}.json`); // 255 bytes: no room for ".<pid>.tmp" after it
    const r = run(["--out", fits]);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toContain("internal error");
    expect(readdirSync(dir)).toEqual([`${"b".repeat(250)}.json`]);
  });

  test("two outputs naming the same file are refused", () => {
    const dir = tempDir("same");
    refused(["--out", join(dir, "x"), "--dump-logits", `${dir}/./x`], `--out and --dump-logits both write ${dir}/./x; give them different paths`);
  });

  test.skipIf(smallFsUnavailable() !== undefined)("a read-only filesystem is refused before the run (EROFS)", () => {
    const r = withSmallFs(65536, `"$K3" "${tiny}" --ids ${ids} --gen 2 --out "$MNT/r.json"`, { readOnly: true });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^k3: --out \S+\/r\.json: directory \S+ is not writable: read-only file system \(EROFS\)\n$/);
  });
});

describe("an output that fails after the run leaves no results and no temporaries", () => {
  test("--dump-logits to a full device: exit 1 naming the flag, and no results file", () => {
    const dir = tempDir("logits-full");
    const dev = charDevice("full");
    const out = join(dir, "run.json");
    const r = run(["--dump-logits", dev, "--out", out]);
    expect(r.code).toBe(1);
    expect(lastLine(r.stderr)).toBe(`k3: --dump-logits ${dev}: cannot write the logits: no space left on device (ENOSPC)`);
    expect(readdirSync(dir)).toEqual([]);
    expect(lstatSync(dev).isCharacterDevice()).toBe(true);
  });

  test.skipIf(smallFsUnavailable() !== undefined)("--dump-cache-trace on a full disk: exit 1 naming the file, no results, nothing left in DIR", () => {
    const outDir = tempDir("trace-full-out");
    // One 4 KB page: the histogram fits, the trace of 40 tokens (40 x 12 layers x top-2 x 8 bytes) does not.
    const r = withSmallFs(4096, `"$K3" "${tiny}" --ids ${ids} --gen 40 --dump-cache-trace "$MNT" --out "${outDir}/run.json"; code=$?; echo "left: $(ls -A "$MNT")"; exit $code`);
    expect(r.code).toBe(1);
    expect(lastLine(r.stderr)).toMatch(/^k3: --dump-cache-trace \S+\/expert_trace\.bin: cannot write the expert trace: no space left on device \(ENOSPC\)$/);
    expect(r.stdout).toBe("left: \n");
    expect(readdirSync(outDir)).toEqual([]);
  });

  test.skipIf(smallFsUnavailable() !== undefined)("--out on a full disk: exit 1 naming the flag, nothing left behind", () => {
    const r = withSmallFs(4096, `"$K3" "${tiny}" --ids ${ids} --gen 40 --out "$MNT/run.json"; code=$?; echo "left: $(ls -A "$MNT")"; exit $code`);
    expect(r.code).toBe(1);
    expect(lastLine(r.stderr)).toMatch(/^k3: --out \S+\/run\.json: cannot write the JSON results: no space left on device \(ENOSPC\)$/);
    expect(r.stdout).toBe("left: \n");
  });
});
