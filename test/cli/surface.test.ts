import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import presetTable from "../../presets/presets.json" with { type: "json" };
import { tinyConfig } from "../support/configs.ts";
import { writeTestCheckpoint } from "../support/checkpoints.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

// Every test is independent dist/k3 runs, so they run concurrently (a test's time includes the
// others', hence the timeout).
setDefaultTimeout(60_000);

describe.concurrent("dist/k3 alone in an empty directory", () => {
  test("--help prints usage generated from the option table, exit 0", async () => {
    const r = await k3Async(["--help"], { isolated: true });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("USAGE k3 [OPTIONS] [MODEL_DIR]");
    for (const flag of ["--ids", "--gen", "--config", "--list-presets", "--version", "--help"]) expect(r.stdout).toContain(flag);
    expect(r.stdout).not.toContain("\u001b[");
    expect(r.stderr).toBe("");
  });

  test("--version prints the package version and the kernel variant, exit 0", async () => {
    const r = await k3Async(["--version"], { isolated: true });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^k3 ${pkg.version.replace(/\./g, "\\.")}\nkernels: \\w+ \\([^)]+\\); this machine runs [\\w, ]+ \\(K3_ISA forces one\\)\n$`));
    expect(r.stderr).toBe("");
  });

  test("--list-presets prints every preset with its budgets and note", async () => {
    const r = await k3Async(["--list-presets"], { isolated: true });
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toBe("presets (trunk / expert-cache, in GB):");
    for (const p of presetTable.presets) {
      const line = lines.find((l) => l.trimStart().startsWith(`${p.name} `));
      expect(line).toBeDefined();
      expect(line).toContain(`${p.trunkGb.toFixed(2)} / `);
      expect(line).toContain(p.cacheGb.toFixed(2));
      expect(line).toContain(p.note);
    }
    expect(r.stdout).toContain("auto");
  });

  test("info flags are answered anywhere on the line, before other checks", async () => {
    expect((await k3Async(["/no/such/dir", "--gen", "abc", "--help"], { isolated: true })).code).toBe(0);
    expect((await k3Async(["/no/such/dir", "--version"], { isolated: true })).stdout).toStartWith(`k3 ${pkg.version}\nkernels: `);
  });

  test("an info flag given as an option's value is the value, not a request", async () => {
    const r = await k3Async(["/no/such/dir", "--ids", "1", "--config", "--help"], { isolated: true });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("k3: --help: cannot read the model config (ENOENT)\n");
  });
});

describe.concurrent("usage errors exit 2 with a one-line message naming the flag", () => {
  const cases: [string, string[], string][] = [
    ["no arguments", [], "k3: missing <model_dir>"],
    ["an option before the model dir", ["--ids", "1"], "k3: the first argument must be the model directory, got --ids"],
    ["an unknown option", ["m", "--ids", "1", "--bogus"], "k3: unknown option --bogus"],
    ["--spec 0", ["m", "--ids", "1", "--spec", "0"], "k3: --spec must be from 1 to 1000000, got 0"],
    ["a malformed budget", ["m", "--ids", "1", "--trunk-gb", "x"], "k3: --trunk-gb expects a size in GB (a number such as 16 or 0.5), got 'x'"],
    ["--gen abc", ["m", "--ids", "1", "--gen", "abc"], "k3: --gen expects a whole number from 0 to 4096, got 'abc'"],
    ["--gen -1", ["m", "--ids", "1", "--gen", "-1"], "k3: --gen must be from 0 to 4096, got -1"],
    ["--gen beyond the ceiling", ["m", "--ids", "1", "--gen", "4097"], "k3: --gen must be from 0 to 4096, got 4097"],
    ["--gen 1.5", ["m", "--ids", "1", "--gen=1.5"], "k3: --gen expects a whole number from 0 to 4096, got '1.5'"],
    ["a value option with no value", ["m", "--ids"], "k3: --ids needs a value (1,2,3)"],
    ["a malformed id", ["m", "--ids", "1,x,3"], 'k3: --ids: "x" is not a token id (ids are whole numbers >= 0)'],
    ["a negative id", ["m", "--ids", "1,-3"], 'k3: --ids: "-3" is not a token id (ids are whole numbers >= 0)'],
    ["an empty id list", ["m", "--ids", " , "], "k3: --ids: no prompt ids parsed"],
    ["no prompt source", ["m", "--gen", "3"], "k3: a prompt is required: give one of --ids, --prompt, --prompt-file (or resume with --load-state)"],
    ["two prompt sources", ["m", "--ids", "1", "--prompt", "hi"], "k3: --ids and --prompt are mutually exclusive: give exactly one prompt source"],
    ["a text prompt without --tok", ["m", "--prompt", "hi"], "k3: --prompt needs --tok DIR: a directory holding tiktoken.model and tokenizer_config.json (normally the model directory)"],
    ["a stray argument", ["m", "--ids", "1", "extra"], "k3: unexpected argument extra (options start with --)"],
    ["a value on a flag", ["m", "--ids", "1", "--version=3"], "k3: --version takes no value"],
  ];
  for (const [name, args, message] of cases) {
    test(name, async () => {
      const r = await k3Async(args);
      expect(r.code).toBe(2);
      expect(r.stderr.split("\n")[0]).toBe(message);
      expect(r.stdout).toBe("");
    });
  }

  test("no arguments also prints usage to stderr", async () => {
    expect((await k3Async([])).stderr).toContain("USAGE k3");
  });
});

describe.concurrent("checkpoint problems through the binary", () => {
  test("a config that cannot be trusted is refused with exit 2", async () => {
    const dir = tempDir("cli-cfg");
    writeTestCheckpoint(dir, tinyConfig(), { shape: "flat", shards: 1 });
    const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    config.full_attn_layers = [0, 4, 8, 12];
    writeFileSync(join(dir, "config.json"), JSON.stringify(config));
    const r = await k3Async([dir, "--ids", "1,2"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `k3: ${dir}/config.json: the model config could not be read with confidence: ` +
        "full_attn_layers has 0 outside 1..13 (the list is one-based)\n",
    );
  });

  test("a missing config is refused, never replaced by built-in constants", async () => {
    const r = await k3Async([tempDir("cli-empty"), "--ids", "1"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/config\.json: cannot read the model config \(ENOENT\)\n$/);
  });

  test("--config points at another file", async () => {
    const dir = tempDir("cli-alt");
    writeTestCheckpoint(dir, tinyConfig(), { shape: "nested", shards: 1 });
    const r = await k3Async([dir, "--ids", "1", "--config", join(dir, "nope.json")]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("nope.json: cannot read the model config");
  });

  test("an id outside the vocabulary is refused with exit 2", async () => {
    const dir = tempDir("cli-vocab");
    writeTestCheckpoint(dir, tinyConfig(), { shape: "flat", shards: 1 });
    const r = await k3Async([dir, "--ids", "1,256"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("k3: --ids: token id 256 is outside the vocabulary (size 256)\n");
  });

  test("a corrupt shard is refused with exit 1 naming the file", async () => {
    const dir = tempDir("cli-corrupt");
    const [shard] = writeTestCheckpoint(dir, tinyConfig(), { shape: "flat", shards: 1 });
    const bytes = readFileSync(shard!);
    writeFileSync(shard!, bytes.subarray(0, bytes.length - 100));
    const r = await k3Async([dir, "--ids", "1"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^k3: ${shard}: not a valid safetensors shard: tensor .* run past the end of the file`));
  });
});
