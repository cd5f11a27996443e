/**
 * `k3 <model_dir> --batch FILE --parallel N` through dist/k3 (issue 24): one JSON line per
 * prompt, in the file's order, each equal to a separate run of that prompt (ids, text, finish
 * reason), greedy, seeded and with --spec 4, for prompts written as ids and as text; --out
 * writes the same lines; the misuses are refused with exit 2 naming the flag or the line.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, fixturesDir, modelDir } from "../support/fixtures.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(60_000);

const tiny = modelDir("tiny13");
const byteTok = join(fixturesDir, "byte-tokenizer");
const long = expectation("tiny13").long.prompt_ids;

interface Line {
  index: number;
  prompt_ids: number[];
  generated_ids: number[];
  generated_text: string | null;
  finish_reason: string;
  usage: { prompt_tokens: number; completion_tokens: number };
  batch: { steps: number; shared_rows: number; bytes_read_share: number };
}

/** The prompts: ids (three spellings) and text, of different lengths. */
const prompts: { line: string; args: string[] }[] = [
  { line: long.slice(0, 9).join(","), args: ["--ids", long.slice(0, 9).join(",")] },
  { line: long.slice(20, 25).join(" "), args: ["--ids", long.slice(20, 25).join(",")] },
  { line: JSON.stringify("Once upon a time"), args: ["--prompt", "Once upon a time"] },
  { line: JSON.stringify({ ids: long.slice(40, 70) }), args: ["--ids", long.slice(40, 70).join(",")] },
];

function batchFile(lines: string[]): string {
  const path = join(tempDir("batch"), "prompts.txt");
  writeFileSync(path, `${lines.join("\n")}\n`);
  return path;
}

const parse = (stdout: string): Line[] => stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Line);

describe.concurrent("k3 --batch", () => {
  for (const [label, knobs] of [["greedy", []], ["seeded", ["--temperature", "1", "--top-p", "0.9", "--seed", "7"]], ["--spec 4", ["--spec", "4"]]] as const) {
    test(`${label}: each line equals a separate run of its prompt, in the file's order`, async () => {
      const file = batchFile(prompts.map((p) => p.line));
      const common = ["--tok", byteTok, "--gen", "10", "--prefill-chunk", "8", ...knobs];
      const [batched, ...alone] = await Promise.all([
        k3Async([tiny, "--batch", file, "--parallel", "3", ...common]),
        ...prompts.map((p) => k3Async([tiny, ...p.args, ...common, "--out", "-"])),
      ]);
      expect(batched.code).toBe(0);
      const lines = parse(batched.stdout);
      expect(lines.map((l) => l.index)).toEqual([0, 1, 2, 3]);
      for (const [i, run] of alone.entries()) {
        expect(run.code).toBe(0);
        const want = JSON.parse(run.stdout) as { prompt_ids: number[]; generated_ids: number[]; generated_text: string | null; finish_reason: string };
        const got = lines[i]!;
        expect({ i, prompt: got.prompt_ids, ids: got.generated_ids, text: got.generated_text, finish: got.finish_reason })
          .toEqual({ i, prompt: want.prompt_ids, ids: want.generated_ids, text: want.generated_text, finish: want.finish_reason });
        expect(got.usage).toEqual({ prompt_tokens: want.prompt_ids.length, completion_tokens: want.generated_ids.length });
      }
      // The steps were shared: some step of each prompt held rows of others.
      for (const line of lines.slice(0, 3)) expect(line.batch.shared_rows).toBeGreaterThan(line.batch.steps);
      // The prompts' shares of the bytes read add up to what the run read (each rounded to a byte).
      const [, trunk, experts] = batched.stderr.match(/trunk_bytes=(\d+) expert_bytes=(\d+)/)!.map(Number) as [number, number, number];
      expect(trunk + experts).toBeGreaterThan(0);
      expect(Math.abs(lines.reduce((n, l) => n + l.batch.bytes_read_share, 0) - (trunk + experts))).toBeLessThanOrEqual(lines.length);
      expect(batched.stderr).toContain("batch: 4 prompt(s)");
      expect(batched.stderr).toMatch(/at most 3 and \d+\)/);
    });
  }

  test("--out writes the same lines, whole, and stdout stays empty", async () => {
    const file = batchFile(prompts.slice(0, 2).map((p) => p.line));
    const out = join(tempDir("batch-out"), "results.jsonl");
    const [toFile, toStdout] = await Promise.all([
      k3Async([tiny, "--batch", file, "--parallel", "2", "--gen", "4", "--out", out]),
      k3Async([tiny, "--batch", file, "--parallel", "2", "--gen", "4"]),
    ]);
    expect([toFile.code, toFile.stdout]).toEqual([0, ""]);
    expect(readFileSync(out, "utf8")).toBe(toStdout.stdout);
    expect(parse(toStdout.stdout)).toHaveLength(2);
  });

  test("misuse: exit 2 with one line naming the flag or the line", async () => {
    const good = batchFile([long.slice(0, 4).join(",")]);
    const cases: [string[], string][] = [
      [[tiny, "--ids", "1,2", "--parallel", "2"], "k3: --parallel decodes the prompts of --batch together: it needs --batch FILE\n"],
      [[tiny, "--batch", good, "--save-state", "s.k3s"], "k3: --save-state is for one prompt: it cannot be combined with --batch\n"],
      [[tiny, "--batch", good, "--recompute"], "k3: --recompute is for one prompt: it cannot be combined with --batch\n"],
      [[tiny, "--batch", good, "--ids", "1"], "k3: --batch and --ids are mutually exclusive: give exactly one prompt source\n"],
      [[tiny, "--batch", good, "--parallel", "0"], "k3: --parallel must be from 1 to 256, got 0\n"],
      [[tiny, "--batch", batchFile(["1,2", '"text"'])], `k3: --batch ${"FILE"}: line 2: text needs --tok DIR: a directory holding tiktoken.model and tokenizer_config.json (normally the model directory)\n`],
      [[tiny, "--batch", batchFile(["1,2", "", "3"])], "k3: --batch FILE: line 2: empty (every line is a prompt: ids, or text as a JSON string)\n"],
      [[tiny, "--batch", batchFile(["1,2", "100000"])], "k3: --batch FILE: line 2: token id 100000 is outside the vocabulary (size 256)\n"],
    ];
    await Promise.all(cases.map(async ([args, message]) => {
      const r = await k3Async(args);
      const file = args[args.indexOf("--batch") + 1] ?? "";
      expect([args.join(" "), r.code, r.stderr.replaceAll(file, "FILE")]).toEqual([args.join(" "), 2, message]);
      expect(r.stdout).toBe("");
    }));
  });

  test("a routed expert that cannot be loaded makes the batch invalid: each drop said once as it happens, RUN INVALID, exit 4", async () => {
    // Every expert of layer 1 fails, so whichever the router picks is dropped.
    const faults = Array.from({ length: 8 }, (_, e) => `1:${e}`).join(",");
    const file = batchFile(prompts.slice(0, 2).map((p) => p.line));
    const r = await k3Async([tiny, "--batch", file, "--parallel", "2", "--gen", "2"], { env: { K3_INJECT_EXPERT_FAULT: faults } });
    expect(r.code).toBe(4);
    const drops = r.stderr.split("\n").filter((l) => l.startsWith("EXPERT DROP: layer 1 expert "));
    expect(drops.length).toBeGreaterThan(0);
    expect(r.stderr).toContain(`RUN INVALID\n  ${drops.length} routed expert load(s) failed and were dropped from their MoE sums.`);
  });

  test("--logprobs N: every generated id's entry; greedy, the chosen id is the most probable; the same batched and alone", async () => {
    const file = batchFile(prompts.slice(0, 3).map((p) => p.line));
    const common = ["--tok", byteTok, "--gen", "6", "--logprobs", "3"];
    const [batched, alone] = await Promise.all([
      k3Async([tiny, "--batch", file, "--parallel", "3", ...common]),
      k3Async([tiny, "--batch", file, "--parallel", "1", ...common]),
    ]);
    expect([batched.code, alone.code]).toEqual([0, 0]);
    const unshared = (stdout: string) => stdout.replace(/"batch":\{[^}]*\}/g, ""); // the lines differ only in how their steps were shared
    expect(unshared(batched.stdout)).toEqual(unshared(alone.stdout));
    for (const line of batched.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Line & { logprobs: { tokens: string[]; token_logprobs: number[]; top_logprobs: Record<string, number>[] } })) {
      expect(line.logprobs.tokens.length).toBe(line.generated_ids.length);
      line.logprobs.token_logprobs.forEach((lp, i) => {
        const top = Object.values(line.logprobs.top_logprobs[i] ?? {});
        expect(top.length).toBeLessThanOrEqual(3);
        // Alternatives are keyed by their text (the legacy shape), so ids that decode alike share a key.
        expect(lp).toBeGreaterThanOrEqual(Math.max(...top));
        expect(lp).toBeLessThanOrEqual(0);
      });
    }
    const refused = await k3Async([tiny, "--ids", "1,2", "--logprobs", "2"]);
    expect([refused.code, refused.stderr]).toEqual([2, "k3: --logprobs reports on the JSON lines of --batch: it needs --batch FILE\n"]);
  });

  test("a file that cannot be read: exit 1 naming it", async () => {
    const r = await k3Async([tiny, "--batch", "/nonexistent/prompts.txt"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("/nonexistent/prompts.txt");
    expect(r.stderr.trim().split("\n")).toHaveLength(1);
  });
});
