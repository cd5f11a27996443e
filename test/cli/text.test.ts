/** Text in, text out, and shell pipelines, through dist/k3 (issue 5). */
import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fixturesDir, modelDir } from "../support/fixtures.ts";
import { executablePath } from "../../tools/build.ts";
import { k3 } from "../support/k3.ts";
import { tempDir } from "../support/tmp.ts";
import { envValue } from "../../src/env.ts";

const tiny = modelDir("tiny13");
/** The byte-level test tokenizer: 256 ranks, one per byte, so every id fits tiny13's vocabulary. */
const byteTok = join(fixturesDir, "byte-tokenizer");
const kimiTok = envValue("K3_KIMI_TOKENIZER") ?? resolve(import.meta.dir, "../../../shared/kimi-tokenizer");
const haveKimi = existsSync(join(kimiTok, "tiktoken.model"));
if (!haveKimi) console.warn(`SKIPPED: the real Kimi tokenizer tests (no tiktoken.model in ${kimiTok}; set K3_KIMI_TOKENIZER)`);

function sh(script: string): { code: number; stdout: string; stderr: string } {
  const r = Bun.spawnSync(["bash", "-o", "pipefail", "-c", script], { stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode ?? -1, stdout: r.stdout.toString(), stderr: r.stderr.toString() };
}

describe("text prompts", () => {
  test("--prompt is tokenized, the length is printed, and the text comes back in the results", () => {
    const r = k3([tiny, "--tok", byteTok, "--prompt", "Hi!", "--gen", "5", "--out", "-"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("tokenized: 3 bytes -> 3 ids");
    expect(r.stderr).toContain("--- generated text ---");
    const results = JSON.parse(r.stdout);
    expect(results.prompt_ids).toEqual([72, 105, 33]);
    expect(typeof results.generated_text).toBe("string");
    expect(results.generated_ids).toHaveLength(5);
  });

  test("--prompt-file reads the bytes verbatim and equals the same text given as --prompt", () => {
    const file = join(tempDir("prompt"), "p.txt");
    writeFileSync(file, "Gr\u00fc\u00dfe\n");
    const a = JSON.parse(k3([tiny, "--tok", byteTok, "--prompt-file", file, "--gen", "3", "--out", "-"]).stdout);
    const b = JSON.parse(k3([tiny, "--tok", byteTok, "--prompt", "Gr\u00fc\u00dfe\n", "--gen", "3", "--out", "-"]).stdout);
    expect(a.prompt_ids).toEqual([...Buffer.from("Gr\u00fc\u00dfe\n")]);
    expect(a.generated_ids).toEqual(b.generated_ids);
  });

  test("an unreadable prompt file exits 1 naming it; --ids runs carry no text", () => {
    const r = k3([tiny, "--tok", byteTok, "--prompt-file", "/nonexistent/p.txt"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("k3: /nonexistent/p.txt: cannot read the prompt file (ENOENT)\n");
    const ids = k3([tiny, "--ids", "1,2", "--gen", "1", "--out", "-"]);
    expect(JSON.parse(ids.stdout).generated_text).toBeNull();
  });

  test("a tokenizer directory without its files is a one-line error naming the file (exit 1)", () => {
    const r = k3([tiny, "--tok", tempDir("notok"), "--prompt", "x"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/tiktoken\.model: missing \(the tokenizer directory .* must hold tiktoken\.model and tokenizer_config\.json\)\n$/);
  });
});

describe("pipelines", () => {
  test("k3 tokenize < prompt.txt | k3 DIR --ids - --out - gives the same run as --prompt-file", () => {
    const file = join(tempDir("pipe"), "prompt.txt");
    writeFileSync(file, "pipelines work");
    const piped = sh(`${executablePath} tokenize --tok ${byteTok} < ${file} | ${executablePath} ${tiny} --ids - --gen 4 --out -`);
    expect(piped.code).toBe(0);
    const direct = JSON.parse(k3([tiny, "--tok", byteTok, "--prompt-file", file, "--gen", "4", "--out", "-"]).stdout);
    const results = JSON.parse(piped.stdout);
    expect(results.generated_ids).toEqual(direct.generated_ids);
    expect(results.prompt_ids).toEqual([...Buffer.from("pipelines work")]);
  });

  test("tokenize --json | detokenize returns exactly the bytes, nothing added", () => {
    const text = "bytes: \u00e9\u4e16\u754c \ud83d\ude00\r\n\t end";
    const file = join(tempDir("round"), "t.txt");
    writeFileSync(file, text);
    const r = sh(`${executablePath} tokenize --tok ${byteTok} --file ${file} --json | ${executablePath} detokenize --tok ${byteTok}`);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(text);
  });

  test("tokenize and detokenize refuse bad input", () => {
    expect(k3(["tokenize"]).code).toBe(2);
    expect(k3(["detokenize", "--tok", byteTok], { stdin: "1,x" }).code).toBe(2);
    expect(k3(["detokenize", "--tok", byteTok], { stdin: "999" }).code).toBe(2);
    expect(k3(["tokenize", "--tok", byteTok, "--file", "/nonexistent"]).stderr).toBe("k3: /nonexistent: cannot read the text (ENOENT)\n");
  });

  test.skipIf(!haveKimi)("with the real Kimi table: specials become their ids by default, ordinary text with --ordinary", () => {
    const specials = k3(["tokenize", "--tok", kimiTok], { stdin: "[BOS]Hello" });
    expect(specials.code).toBe(0);
    expect(specials.stdout.trim().split(",")[0]).toBe("163584");
    const ordinary = k3(["tokenize", "--tok", kimiTok, "--ordinary", "--json"], { stdin: "[BOS]Hello" });
    expect(JSON.parse(ordinary.stdout).ids).not.toContain(163584);
    const back = k3(["detokenize", "--tok", kimiTok], { stdin: ordinary.stdout });
    expect(back.stdout).toBe("[BOS]Hello");
  });
});
