/**
 * src/fs.ts, the one place outputs are written: what every writer (results, dumps, the pack,
 * chat's /save, the demo's files) gets. test/cli/outputs.test.ts shows the same through dist/k3.
 */
import { describe, expect, test } from "bun:test";
import { lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync, writeSync } from "node:fs";
import { basename, join } from "node:path";
import { ExitCode, K3Error } from "../../src/errors.ts";
import { allowUnnamedStaging, checkOutputDir, provideUnnamedLinker, checkOutputFile, commitAll, outputTarget, stageBytes, stageWrite, temporaryPathFor, writeAtomically } from "../../src/fs.ts";
import { linkUnnamed } from "../../src/native/unnamed-link.ts";
import { tempDir } from "../support/tmp.ts";

// What loading libk3 does in a run (src/native/library.ts).
provideUnnamedLinker(linkUnnamed);

function failure(run: () => unknown): K3Error {
  try {
    run();
  } catch (error) {
    if (error instanceof K3Error) return error;
    throw error;
  }
  throw new Error("expected a K3Error");
}

describe("staged writes", () => {
  test("nothing is visible until commit (an unnamed O_TMPFILE file here on tmpfs); discard leaves nothing", () => {
    const dir = tempDir("fs-stage");
    const path = join(dir, "a.json");
    const staged = stageBytes({ path, what: "a" }, "new");
    expect(readdirSync(dir)).toEqual([]);
    staged.commit();
    expect(readFileSync(path, "utf8")).toBe("new");
    stageBytes({ path, what: "a" }, "newer").discard();
    expect(readdirSync(dir)).toEqual(["a.json"]);
    expect(readFileSync(path, "utf8")).toBe("new");
    // check() reads the staged bytes before anything is visible.
    let seen = "";
    stageWrite({ path, what: "a" }, (fd) => writeSync(fd, "checked"), (temporary) => { seen = readFileSync(temporary, "utf8"); }).commit();
    expect(seen).toBe("checked");
    expect(readFileSync(path, "utf8")).toBe("checked");
  });

  test("where O_TMPFILE is refused the write goes through <name>.<pid>.tmp, renamed at commit", () => {
    allowUnnamedStaging(false);
    try {
      const dir = tempDir("fs-stage-named");
      const path = join(dir, "a.json");
      const staged = stageBytes({ path, what: "a" }, "new");
      expect(readdirSync(dir)).toEqual([basename(temporaryPathFor(path))]);
      staged.commit();
      expect(readdirSync(dir)).toEqual(["a.json"]);
      expect(readFileSync(path, "utf8")).toBe("new");
      stageBytes({ path, what: "a" }, "newer").discard();
      expect(readdirSync(dir)).toEqual(["a.json"]);
    } finally {
      allowUnnamedStaging(true);
    }
  });

  test("commitAll stops at the first failing rename and discards the rest: the last write never appears", () => {
    const dir = tempDir("fs-commit");
    const first = stageBytes({ path: join(dir, "first"), what: "the first" }, "1");
    const blocked = stageBytes({ path: join(dir, "blocked"), what: "the second", flag: "--second" }, "2");
    const last = stageBytes({ path: join(dir, "results.json"), what: "the results" }, "3");
    mkdirSync(join(dir, "blocked", "inside"), { recursive: true }); // a rename cannot replace a non-empty directory
    const error = failure(() => commitAll([first, blocked, last]));
    expect(error.exitCode).toBe(ExitCode.runtime);
    expect(error.message).toMatch(new RegExp(`^--second ${dir}/blocked: cannot write the second: .*\\((EISDIR|ENOTEMPTY|EEXIST)\\)$`));
    expect(readdirSync(dir).sort()).toEqual(["blocked", "first"]);
  });

  test("a failing fill or check leaves no temporary and names the file", () => {
    const dir = tempDir("fs-fill");
    const path = join(dir, "x.bin");
    const error = failure(() => stageWrite({ path, what: "x" }, () => { throw Object.assign(new Error("full"), { code: "ENOSPC" }); }));
    expect(error.message).toBe(`${path}: cannot write x: no space left on device (ENOSPC)`);
    const checked = failure(() => stageWrite({ path, what: "x" }, () => {}, () => { throw new K3Error(ExitCode.runtime, "read back differently"); }));
    expect(checked.message).toBe("read back differently");
    expect(readdirSync(dir)).toEqual([]);
  });

  test("a name too long for its temporary suffix gets a shortened temporary, within NAME_MAX", () => {
    const dir = tempDir("fs-long");
    const path = join(dir, "é".repeat(127)); // 254 bytes
    const temporary = basename(temporaryPathFor(path));
    expect(Buffer.byteLength(temporary)).toBeLessThanOrEqual(255);
    expect(temporary.endsWith(`.${process.pid}.tmp`)).toBe(true);
    expect(temporary).not.toContain("\uFFFD"); // not cut inside a UTF-8 sequence
    writeAtomically(path, "x", "x");
    expect(readdirSync(dir)).toEqual([basename(path)]);
  });
});

describe("what an output path names", () => {
  test("symlinks are followed (relative to the link's directory) to what gets replaced", () => {
    const dir = tempDir("fs-links");
    mkdirSync(join(dir, "real"));
    mkdirSync(join(dir, "links"));
    symlinkSync("../real/a.json", join(dir, "links", "a.json"));
    symlinkSync("a.json", join(dir, "links", "b.json")); // a chain
    expect(outputTarget(join(dir, "links", "b.json"))).toEqual({ path: join(dir, "real", "a.json"), kind: "absent" });
    writeAtomically(join(dir, "links", "b.json"), "through two links", "b");
    expect(readFileSync(join(dir, "real", "a.json"), "utf8")).toBe("through two links");
    expect(readlinkSync(join(dir, "links", "b.json"))).toBe("a.json");
    expect(lstatSync(join(dir, "links", "a.json")).isSymbolicLink()).toBe(true);
    symlinkSync("loop2", join(dir, "loop1"));
    symlinkSync("loop1", join(dir, "loop2"));
    expect(failure(() => checkOutputFile(join(dir, "loop1"), "--out")).message).toBe(`--out ${join(dir, "loop1")}: too many levels of symbolic links (ELOOP)`);
  });

  test("devices, FIFOs and /dev/stdout are written in place; directories are refused", () => {
    expect(outputTarget("/dev/null").kind).toBe("in-place");
    expect(outputTarget("/dev/stdout")).toEqual({ path: "/proc/self/fd/1", kind: "in-place", fd: 1 }); // whatever it is open on
    const dir = tempDir("fs-kinds");
    expect(outputTarget(dir).kind).toBe("directory");
    expect(failure(() => writeAtomically(dir, "x", "x")).message).toBe(`${dir}: cannot write x: is a directory (EISDIR)`);
  });

  test("output directories: must exist unless created, must be directories", () => {
    const dir = tempDir("fs-dirs");
    writeFileSync(join(dir, "file"), "x");
    checkOutputDir(join(dir, "new", "deeper"), "<dir>", { create: true });
    expect(failure(() => checkOutputDir(join(dir, "new"), "--d", { create: false })).message).toBe(`--d ${join(dir, "new")}: directory does not exist`);
    expect(failure(() => checkOutputDir(join(dir, "file"), "--d", { create: true })).message).toBe(`--d ${join(dir, "file")}: is not a directory`);
    expect(failure(() => checkOutputDir(join(dir, "file"), "--d", { create: true })).exitCode).toBe(ExitCode.usage);
  });
});
