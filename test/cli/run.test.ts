/** `k3 <model_dir>` end to end through dist/k3: outputs, partial models, refusals. */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir } from "../support/fixtures.ts";
import { writeTestCheckpoint } from "../support/checkpoints.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";
import { tinyConfig } from "../support/configs.ts";

// The tests are independent dist/k3 runs and run concurrently; a test's time includes the others'.
setDefaultTimeout(60_000);

const tiny = modelDir("tiny13");
const want = expectation("tiny13");
const prompt = want.prompt_ids.join(",");

describe.concurrent("k3 <model_dir> through the binary", () => {
  test("--out - puts the JSON results alone on stdout; the table and summary go to stderr", async () => {
    const r = await k3Async([tiny, "--ids", prompt, "--gen", "4", "--out", "-"]);
    expect(r.code).toBe(0);
    const results = JSON.parse(r.stdout);
    expect(results.prompt_ids).toEqual(want.prompt_ids);
    expect(results.generated_ids).toEqual(want.generated_ids.slice(0, 4));
    expect(results.full_ids).toEqual([...want.prompt_ids, ...want.generated_ids.slice(0, 4)]);
    expect(results.layers).toBe(13);
    expect(typeof results.seconds_per_token).toBe("number");
    expect(r.stderr).toContain("STEP  TOKEN     SECONDS     CACHE HIT READ GB   TOK/S");
    expect(r.stderr).toMatch(/4 tokens in [\d.]+ s, [\d.]+ s\/token average/);
    expect(r.stderr).toContain("PEAK RSS for the whole run:");
  });

  test("the results file is written whole under the name given, nothing else is left", async () => {
    const dir = tempDir("out");
    const out = join(dir, "run.json");
    const r = await k3Async([tiny, "--ids", prompt, "--gen", "2", "--out", out]);
    expect(r.code).toBe(0);
    expect(JSON.parse(readFileSync(out, "utf8")).generated_ids).toEqual(want.generated_ids.slice(0, 2));
    expect(existsSync(`${out}.tmp`)).toBe(false);
  });

  test("--layers N binds the first N layers and says loudly the output is not the full model", async () => {
    const r = await k3Async([tiny, "--ids", prompt, "--gen", "2", "--layers", "5", "--out", "-"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("binding only the first 5 of 13 layers; the output is NOT the full model");
    const results = JSON.parse(r.stdout);
    expect(results.layers).toBe(5);
    expect(results.generated_ids).toHaveLength(2);
    expect(results.generated_ids).not.toEqual(want.generated_ids.slice(0, 2));
  });

  test("an A_log whose padding after the per-head values is not zero is used, with a warning naming it", async () => {
    const dir = tempDir("alog");
    writeTestCheckpoint(dir, tinyConfig(), { shape: "flat", shards: 1, aLogPadding: "noise" });
    const r = await k3Async([dir, "--ids", "1,2,3", "--gen", "1", "--out", "-"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("language_model.model.layers.0.self_attn.A_log: padding after the first 4 values (one per head) is not zero");
    const clean = tempDir("alog-clean");
    writeTestCheckpoint(clean, tinyConfig(), { shape: "flat", shards: 1 });
    expect((await k3Async([clean, "--ids", "1,2,3", "--gen", "1", "--out", "-"])).stderr).not.toContain("padding after");
  });

  test("--layers beyond the model is a usage error", async () => {
    const r = await k3Async([tiny, "--ids", prompt, "--layers", "14"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("k3: --layers 14 exceeds the model's 13 layers\n");
  });

  test("a bad K3_THREADS is a usage error before anything is loaded", async () => {
    const r = await k3Async([tiny, "--ids", prompt, "--gen", "1"], { env: { K3_THREADS: "0" } });
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("k3: K3_THREADS must be an integer from 1 to 256 (got '0')\n");
  });

  test("--gen 0 generates nothing and still writes the results", async () => {
    const r = await k3Async([tiny, "--ids", prompt, "--gen", "0", "--out", "-"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).generated_ids).toEqual([]);
  });

  test("an unwritable --dump-logits path is refused before the model loads (exit 2), naming the flag", async () => {
    const r = await k3Async([tiny, "--ids", prompt, "--gen", "1", "--dump-logits", "/nonexistent/dir/l.f32", "--out", "-"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("k3: --dump-logits /nonexistent/dir/l.f32: directory /nonexistent/dir does not exist\n");
    expect(r.stdout).toBe("");
  });

  test("a shard set missing tensors is refused before anything is read, naming them (exit 1)", async () => {
    // nested14's layers 7-13 and the model-level tensors live in its second shard: leave it out.
    const dir = tempDir("partial");
    const source = modelDir("nested14");
    for (const file of ["config.json", "model-00001-of-00002.safetensors"]) copyFileSync(join(source, file), join(dir, file));
    const r = await k3Async([dir, "--ids", "1,2"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(new RegExp(`^k3: ${dir}: 7 of 14 layers are missing tensors in this shard set; missing language_model\\.model\\.layers\\.7\\.`));
    expect(r.stderr.split("\n")).toHaveLength(2);
  });

  test("--layers 7 runs on that partial shard set up to the missing model-level tensors", async () => {
    const dir = tempDir("partial7");
    const source = modelDir("nested14");
    for (const file of ["config.json", "model-00001-of-00002.safetensors"]) copyFileSync(join(source, file), join(dir, file));
    const r = await k3Async([dir, "--ids", "1,2", "--layers", "7"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("missing language_model.model.embed_tokens.weight");
    expect(r.stderr).not.toContain("layers are missing tensors");
  });
});
