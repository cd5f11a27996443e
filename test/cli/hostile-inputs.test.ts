/**
 * Hostile inputs through dist/k3 (issue 15): every file k3 parses, damaged the way a user's
 * file can be, ends in one line naming the file and the documented exit code, quickly, and
 * never in wrong tokens with exit 0.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { cpSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, fixturesDir, modelDir, packedFixtureTrunk } from "../support/fixtures.ts";
import type { K3Result } from "../support/k3.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

// Every run is a dist/k3 process of its own, so the tests run concurrently; a test's time
// includes waiting for the others', hence the timeout.
setDefaultTimeout(60_000);

const tiny = modelDir("tiny13");
const want = expectation("tiny13");
const prompt = want.prompt_ids.join(",");
const chatTok = join(fixturesDir, "chat-tokenizer");

/** One line on stderr, starting `k3: `, with this exit code. */
function refusedWith(r: K3Result, code: number, pattern: RegExp | string): void {
  expect({ code: r.code, stdout: r.stdout }).toEqual({ code, stdout: "" });
  expect(r.stderr.split("\n").filter((l) => l.startsWith("k3: "))).toHaveLength(1);
  expect(r.stderr.trimEnd().split("\n").at(-1)).toMatch(pattern);
  expect(r.stderr).not.toContain("internal error");
  expect(r.stderr).not.toMatch(/\n\s+at /);
}

/** tiny13's config.json with `edit` applied, in a file of its own (for --config). */
function editedConfig(edit: (config: Record<string, unknown>) => void): string {
  const config = JSON.parse(readFileSync(join(tiny, "config.json"), "utf8"));
  edit(config);
  const path = join(tempDir("config"), "config.json");
  writeFileSync(path, JSON.stringify(config));
  return path;
}

const run = (...extra: string[]) => k3Async([tiny, "--ids", prompt, "--gen", "2", "--out", "-", ...extra]);

describe.concurrent("config.json", () => {
  test("--config /dev/zero is refused after the size cap, quickly", async () => {
    const started = performance.now();
    refusedWith(await run("--config", "/dev/zero"), 2, /^k3: \/dev\/zero: cannot read the model config: more than the 4194304-byte limit$/);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  const unbounded: [string, (c: Record<string, unknown>) => void, RegExp][] = [
    ["num_hidden_layers 1e6", (c) => { c.num_hidden_layers = 1e6; }, /num_hidden_layers is 1000000, more than k3 accepts \(at most 1024\)/],
    ["num_experts 2^31", (c) => { c.num_experts = 2 ** 31; }, /num_experts is 2147483648, more than k3 accepts \(at most 65536\)/],
    ["routed_scaling_factor 0", (c) => { c.routed_scaling_factor = 0; }, /routed_scaling_factor is 0; it must be positive/],
    ["rms_norm_eps 2^63", (c) => { c.rms_norm_eps = 2 ** 63; }, /rms_norm_eps is 9223372036854776000; it must be above 0 and below 1/],
    ["a negative SiTU beta", (c) => { c.situ_beta = -4; }, /situ_beta is -4; it must be positive/],
    ["gate_lower_bound 1e308", (c) => { c.gate_lower_bound = 1e308; }, /gate_lower_bound is 1e\+308; it must be negative/],
    ["attn_res_block_size 1e308", (c) => { c.attn_res_block_size = 1e308; }, /attn_res_block_size is 1e\+308, more than k3 accepts/],
  ];
  for (const [what, edit, pattern] of unbounded) {
    test(`${what} is refused at once (exit 2), naming the file`, async () => {
      const path = editedConfig(edit);
      const started = performance.now();
      const r = await run("--config", path);
      refusedWith(r, 2, new RegExp(`^k3: ${path}: the model config could not be read with confidence: .*${pattern.source}`));
      expect(performance.now() - started).toBeLessThan(5000);
    });
  }

  test("a key given twice (spelled with an escape) and a deeply nested value are refused (exit 2)", async () => {
    const path = join(tempDir("config"), "config.json");
    writeFileSync(path, readFileSync(join(tiny, "config.json"), "utf8").replace('"vocab_size": 256', '"vocab_size": 256, "vocab\\u005fsize": 255'));
    refusedWith(await run("--config", path), 2, new RegExp(`^k3: ${path}: the model config could not be read with confidence: 5:22: the key "vocab_size" appears twice in one object$`));
    writeFileSync(path, `{"x": ${"[".repeat(1_000_000)}${"]".repeat(1_000_000)}}`);
    refusedWith(await run("--config", path), 2, new RegExp(`^k3: ${path}: the model config could not be read with confidence: 1:262: nested deeper than 256 levels$`));
  });
});

describe.concurrent("tokenizer files", () => {
  test("a tokenizer_config.json id given twice, once \\u-escaped, is refused (exit 1)", async () => {
    const dir = tempDir("tok");
    cpSync(chatTok, dir, { recursive: true });
    const path = join(dir, "tokenizer_config.json");
    const text = readFileSync(path, "utf8");
    writeFileSync(path, text.replace('"402": {', '"\\u0034\\u00301": {'));
    refusedWith(await k3Async(["tokenize", "--tok", dir], { stdin: "hi" }), 1, new RegExp(`^k3: ${path}:\\d+:5: the key "401" appears twice in one object$`));
  });

  test("a tokenizer that is not the model's is refused before anything loads (exit 2)", async () => {
    refusedWith(
      await k3Async([tiny, "--tok", chatTok, "--prompt", "hello", "--gen", "1"]),
      2,
      `k3: --tok ${chatTok}: the tokenizer has 401 ranks but the model's vocabulary is 256 ids (vocab_size): it is not this model's tokenizer`,
    );
  });
});

describe.concurrent("command-line values", () => {
  test("a value with a line break, or 100,000 digits long, is quoted short on one line", async () => {
    refusedWith(await k3Async([tiny, "--ids", "1", "--gen", "1\n2"]), 2, /^k3: --gen expects a whole number from 0 to 4096, got "1\\n2"$/);
    const r = await k3Async([tiny, "--ids", "1", "--gen", "9".repeat(100_000)]);
    refusedWith(r, 2, /^k3: --gen must be from 0 to 4096, got "9{40}\.\.\."$/);
    refusedWith(await k3Async([tiny, "--ids", "1", `--${"x".repeat(100_000)}`]), 2, /^k3: unknown option "-{2}x{38}\.\.\."$/);
  });
});

describe.concurrent("--ids", () => {
  test("20 MB of garbage on stdin gives a short line quoting a short excerpt", async () => {
    const garbage = "x".repeat(20_000_000);
    const r = await k3Async([tiny, "--ids", "-", "--gen", "1"], { stdin: garbage });
    refusedWith(r, 2, /^k3: --ids - \(stdin\): "x{40}\.\.\." is not a token id \(ids are whole numbers >= 0\)$/);
    expect(r.stderr.length).toBeLessThan(2000);
    const json = await k3Async([tiny, "--ids", "-", "--gen", "1"], { stdin: `{"ids": [1, 2], "ids": [${"9".repeat(10_000_000)}]}` });
    refusedWith(json, 2, /^k3: --ids - \(stdin\):1:17: the key "ids" appears twice in one object$/);
  });
});

describe.concurrent("safetensors shards", () => {
  const shardName = "model-00001-of-00001.safetensors";

  /** A copy of tiny13 whose one shard is rebuilt from `header` text (as given) and the same data. */
  function rebuiltShard(edit: (header: string) => string, setLength?: (length: number) => number): { dir: string; shard: string } {
    const dir = tempDir("shard");
    cpSync(tiny, dir, { recursive: true });
    const shard = join(dir, shardName);
    const bytes = readFileSync(shard);
    const length = Number(bytes.readBigUInt64LE(0));
    const header = Buffer.from(edit(bytes.subarray(8, 8 + length).toString("utf8")));
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(setLength ? setLength(header.length) : header.length));
    writeFileSync(shard, Buffer.concat([prefix, header, bytes.subarray(8 + length)]));
    return { dir, shard };
  }

  test("a header length 4 short of the truth (the header ends in padding spaces, so it parses) is refused, not read 4 bytes early", async () => {
    const { dir, shard } = rebuiltShard((h) => `${h}        `, (n) => n - 4);
    refusedWith(await k3Async([dir, "--ids", prompt, "--gen", "2", "--out", "-"]), 1, `k3: ${shard}: not a valid safetensors shard: 4 bytes after the last tensor (language_model.model.output_attn_res_proj.weight) belong to no tensor (the header length or data_offsets are wrong)`);
  });

  test("a data section that starts off a multiple of 4 is refused naming the file and the tensor, not an internal error", async () => {
    const { dir, shard } = rebuiltShard((h) => `${h}  `);
    refusedWith(
      await k3Async([dir, "--ids", prompt, "--gen", "2", "--out", "-"]),
      1,
      `k3: ${shard}: not a valid safetensors shard: tensor language_model.model.layers.0.input_layernorm.weight starts at byte 123202 of the file, not a multiple of its 4-byte F32 elements (the data section starts at byte 123202; k3 reads elements aligned)`,
    );
  });

  test("a tensor named twice in one header, once with an escape, is refused", async () => {
    const name = "language_model.model.norm.weight";
    const { dir, shard } = rebuiltShard((h) => {
      const entry = JSON.stringify((JSON.parse(h) as Record<string, unknown>)[name]);
      return `{"${name.replace("norm", "\\u006eorm")}": ${entry}, ${h.slice(1)}`;
    });
    refusedWith(await k3Async([dir, "--ids", prompt, "--gen", "2"]), 1, new RegExp(`^k3: ${shard}: not a valid safetensors shard: header 1:\\d+: the key "${name}" appears twice in one object$`));
  });

  test("a directory named like a shard is refused by name", async () => {
    const dir = tempDir("shard");
    cpSync(tiny, dir, { recursive: true });
    mkdirSync(join(dir, "zz-extra.safetensors"));
    refusedWith(await k3Async([dir, "--ids", prompt, "--gen", "2"]), 1, `k3: ${join(dir, "zz-extra.safetensors")}: not a valid safetensors shard: it is a directory, not a file`);
  });
});

describe.concurrent("packed trunks", () => {
  const streamed = (model: string, trunk: string) => k3Async([model, "--ids", prompt, "--gen", "3", "--trunk", trunk, "--trunk-gb", "0", "--out", "-"]);

  /** tiny13's packed trunk (packed once per process), copied into a fresh directory to damage. */
  function packTiny(): string {
    const out = join(tempDir("pack"), "trunk");
    cpSync(packedFixtureTrunk("tiny13"), out, { recursive: true });
    expect(readdirSync(out).sort()).toEqual(["trunk.bin", "trunk.json"]);
    return out;
  }

  /** trunk.json of `trunk`, edited in place. */
  function editManifest(trunk: string, edit: (manifest: { layers: Record<string, unknown>[] } & Record<string, unknown>) => void): string {
    const path = join(trunk, "trunk.json");
    const manifest = JSON.parse(readFileSync(path, "utf8"));
    edit(manifest);
    writeFileSync(path, JSON.stringify(manifest));
    return path;
  }

  test("the pack of another checkpoint with the same shapes (one tensor of layer 3 differs) is refused; its own pack runs", async () => {
    const other = tempDir("other");
    cpSync(tiny, other, { recursive: true });
    const shard = join(other, "model-00001-of-00001.safetensors");
    const bytes = readFileSync(shard);
    const headerLength = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"));
    const [begin] = header["language_model.model.layers.3.post_attention_layernorm.weight"].data_offsets as [number, number];
    bytes[8 + headerLength + begin + 1] = (bytes[8 + headerLength + begin + 1] as number) ^ 0x40;
    writeFileSync(shard, bytes);
    const pack = packTiny();
    expect((await streamed(tiny, pack)).code).toBe(0);
    refusedWith(await streamed(other, pack), 1, new RegExp(`^k3: ${pack}: layer 3 of the packed trunk was packed from other contents than ${other} holds \\(source [0-9a-f]{16}, this checkpoint [0-9a-f]{16}\\); re-run 'k3 pack-trunk'$`));
  });

  test("two layers' offsets and hashes swapped in trunk.json are refused", async () => {
    const trunk = packTiny();
    const path = editManifest(trunk, (m) => {
      const [one, two] = [m.layers[1] as Record<string, unknown>, m.layers[2] as Record<string, unknown>];
      [one.file_off, two.file_off, one.hash, two.hash] = [two.file_off, one.file_off, two.hash, one.hash];
    });
    refusedWith(await streamed(tiny, trunk), 1, new RegExp(`^k3: ${path}: not a usable packed trunk: layers\\[1\\].file_off is \\d+, expected \\d+ \\(layers follow each other in trunk.bin\\)$`));
  });

  test("two layers' bytes swapped in trunk.bin, with their hashes swapped in trunk.json, are refused on first read", async () => {
    const trunk = packTiny();
    const bin = join(trunk, "trunk.bin");
    const bytes = readFileSync(bin);
    let one: { file_off: number; nbytes: number } = { file_off: 0, nbytes: 0 };
    let two = one;
    editManifest(trunk, (m) => {
      const [x, y] = [m.layers[1] as Record<string, unknown>, m.layers[2] as Record<string, unknown>];
      expect(x.nbytes).toBe(y.nbytes);
      [x.hash, y.hash] = [y.hash, x.hash];
      one = x as typeof one;
      two = y as typeof two;
    });
    const first = Buffer.from(bytes.subarray(one.file_off, one.file_off + one.nbytes));
    bytes.copy(bytes, one.file_off, two.file_off, two.file_off + two.nbytes);
    first.copy(bytes, two.file_off);
    writeFileSync(bin, bytes);
    refusedWith(await streamed(tiny, trunk), 1, `k3: ${bin}: layer 1 does not match its recorded hash (corrupted?); re-run 'k3 pack-trunk'`);
  });

  test("an nbytes smaller than the payload is refused naming the field, not a crash", async () => {
    const trunk = packTiny();
    const path = editManifest(trunk, (m) => {
      for (const layer of m.layers) layer.nbytes = 4096;
    });
    refusedWith(await streamed(tiny, trunk), 1, new RegExp(`^k3: ${path}: not a usable packed trunk: layers\\[0\\].nbytes is 4096, expected \\d+ \\(payload_bytes \\d+ rounded up to 4096\\)$`));
  });

  test("a number written as a string, and an old format version, are refused saying what was found and expected", async () => {
    const trunk = packTiny();
    const path = editManifest(trunk, (m) => {
      (m.layers[3] as Record<string, unknown>).payload_bytes = String((m.layers[3] as Record<string, unknown>).payload_bytes);
    });
    refusedWith(await streamed(tiny, trunk), 1, new RegExp(`^k3: ${path}: not a usable packed trunk: layers\\[3\\].payload_bytes must be a whole number from 0 to \\d+, found the string "\\d+"$`));
    editManifest(trunk, (m) => {
      m.version = 1;
    });
    refusedWith(await streamed(tiny, trunk), 1, `k3: ${path}: not a usable packed trunk: found format "k3-trunk" version 1, expected format "k3-trunk" version 2 (re-run 'k3 pack-trunk')`);
  });

  test("a field k3 does not check (a layer's version, a tensor's note, a top-level extra) is refused, never ignored", async () => {
    const cases: [(m: { layers: Record<string, unknown>[] } & Record<string, unknown>) => void, string][] = [
      [(m) => { (m.layers[2] as Record<string, unknown>).version = 7; }, "layers\\[2\\]\\.version"],
      [(m) => { const t = (m.layers[0] as { tensors: Record<string, Record<string, unknown>> }).tensors; (Object.values(t)[0] as Record<string, unknown>).note = "x"; }, "layers\\[0\\]\\.tensors\\.\\S+\\.note"],
      [(m) => { m.created_by = "someone"; }, "created_by"],
    ];
    for (const [edit, field] of cases) {
      const trunk = packTiny();
      const path = editManifest(trunk, edit);
      refusedWith(await streamed(tiny, trunk), 1, new RegExp(`^k3: ${path}: not a usable packed trunk: ${field} is not a field of a packed trunk \\(k3 checks every field it accepts; re-run 'k3 pack-trunk'\\)$`));
    }
  });

  test("a layer's recorded shard or run_start that is not where the checkpoint holds it is refused", async () => {
    for (const [key, value, shown] of [["run_start", 12345, /records its run at model-00001-of-00001\.safetensors byte 12345; this checkpoint has it at model-00001-of-00001\.safetensors byte \d+/], ["shard", "other.safetensors", /records its run at other\.safetensors byte \d+; this checkpoint has it at model-00001-of-00001\.safetensors byte \d+/]] as const) {
      const trunk = packTiny();
      editManifest(trunk, (m) => {
        (m.layers[1] as Record<string, unknown>)[key] = value;
      });
      const run = await streamed(tiny, trunk);
      refusedWith(run, 1, new RegExp(`^k3: ${trunk}: layer 1 of the packed trunk ${shown.source}; re-run 'k3 pack-trunk'$`));
    }
  });
});

test.concurrent("a config that needs far more tensors than the checkpoint holds is refused at once, not after listing them", async () => {
  const path = editedConfig((c) => {
    c.num_experts = 65_536;
  });
  const started = performance.now();
  refusedWith(await run("--config", path), 1, `k3: ${tiny}: the config needs at least 4718670 tensors for 13 layers (12 MoE layers x 65536 experts x 6, and the layer norms), but the checkpoint has 916`);
  expect(performance.now() - started).toBeLessThan(5000);
});

test.concurrent("a NaN in a shard's tensor bytes (header intact) is refused naming the layer, not an internal error", async () => {
  const dir = tempDir("nan");
  cpSync(tiny, dir, { recursive: true });
  const shard = join(dir, "model-00001-of-00001.safetensors");
  const bytes = readFileSync(shard);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString("utf8"));
  const [begin, end] = header["language_model.model.layers.1.post_attention_layernorm.weight"].data_offsets as [number, number];
  for (let at = 8 + headerLength + begin; at < 8 + headerLength + end; at += 2) bytes.writeUInt16LE(0x7fc0, at); // bf16 NaN
  writeFileSync(shard, bytes);
  refusedWith(await k3Async([dir, "--ids", prompt, "--gen", "2", "--out", "-"]), 1, "k3: layer 1: the router's weights are not finite numbers (a NaN or infinity reached it): the checkpoint's tensors are probably corrupt");
});
