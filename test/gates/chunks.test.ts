/**
 * Chunked prefill (issue 10): any chunk size gives the same bits. On both fixture models, with a
 * 70-id prompt (two chunks of the default 64): chunks of 1, 3, 7 and 64 ids and the whole prompt
 * in one call give bit-identical step-0 logits and identical ids, greedy and seeded, in both
 * decode modes, resident with an expert cache of only top-k + 1 slots (a chunk's union is loaded
 * in waves) and streamed from a packed trunk with one ring slot.
 *
 * The runs are the run command's, in this process (test/support/run-in-process.ts: its argument
 * parsing, engine and results, with the safety-checked kernels); dist/k3 gives the same bits for
 * a chunked prompt (the last test of each model) and the expert loads per chunk are read from its
 * --dump-cache-trace files.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir, oracleModels, packedFixtureTrunk } from "../support/fixtures.ts";
import { k3Async } from "../support/k3-async.ts";
import { k3 } from "../support/k3.ts";
import { logitBytes, runInProcess } from "../support/run-in-process.ts";
import { tempDir } from "../support/tmp.ts";

// Some tests take seconds, more on a busy machine (a run starts the gates' child processes early):
// bun's 5 s default is too close to be a limit on anything but the machine.
setDefaultTimeout(60_000);

interface Run {
  ids: number[];
  logits: Buffer;
}

async function run(args: string[]): Promise<Run> {
  const r = await runInProcess(args);
  return { ids: r.json.generated_ids as number[], logits: logitBytes(r.firstLogits) };
}

for (const name of oracleModels) {
  describe(`${name}: prefill chunks change nothing`, () => {
    const want = expectation(name);
    const dir = modelDir(name);
    const trunk = () => packedFixtureTrunk(name);
    const budgets: [string, () => string[]][] = [
      ["resident, a top-k + 1 expert cache", () => ["--cache-gb", "0"]],
      ["streamed, one ring slot", () => ["--trunk", trunk(), "--trunk-gb", "0"]],
    ];
    const samplings: [string, string[]][] = [["greedy", []], ["seeded", ["--temperature", "1", "--top-p", "0.9", "--seed", "5"]]];
    for (const [budget, extra] of budgets) {
      for (const [sampling, knobs] of samplings) {
        test(`${budget}, ${sampling}: chunks 1, 3, 7, 64 = the whole prompt, incremental and recompute`, async () => {
          const prompt = want.long.prompt_ids.slice(0, 70);
          const base = [dir, "--ids", prompt.join(","), "--gen", "3", ...knobs, ...extra()];
          const whole = await run([...base, "--prefill-chunk", String(prompt.length)]);
          for (const chunk of ["1", "3", "7", "64"]) {
            const chunked = await run([...base, "--prefill-chunk", chunk]);
            expect(`${chunk}: ${Buffer.compare(chunked.logits, whole.logits)}`).toBe(`${chunk}: 0`);
            expect(chunked.ids).toEqual(whole.ids);
          }
          const recompute = await run([...base, "--recompute", "--prefill-chunk", "7"]);
          expect(Buffer.compare(recompute.logits, whole.logits)).toBe(0);
          expect(recompute.ids).toEqual(whole.ids);
        }, 120_000);
      }
    }

    test("through dist/k3: --prefill-chunk 7 --dump-logits gives the bits of the whole prompt in one call", async () => {
      const prompt = want.long.prompt_ids.slice(0, 70);
      const logits = join(tempDir("chunks"), "l.f32");
      const r = k3([dir, "--ids", prompt.join(","), "--gen", "3", "--cache-gb", "0", "--prefill-chunk", "7", "--dump-logits", logits, "--out", "-"]);
      expect(r.code).toBe(0);
      const whole = await run([dir, "--ids", prompt.join(","), "--gen", "3", "--cache-gb", "0", "--prefill-chunk", String(prompt.length)]);
      expect(Buffer.compare(readFileSync(logits), whole.logits)).toBe(0);
      const results = JSON.parse(r.stdout);
      expect(results.generated_ids).toEqual(whole.ids);
      // The prompt went in chunks of 7, as the results record it.
      expect(results.prompt_ids).toEqual(prompt);
      expect(results.plan.prefill_chunk).toBe(7);
    });
  });
}

describe("a chunk loads each expert it needs once", () => {
  test("per chunk and layer, the expert loads are the union of the tokens' picks; nothing is read twice when the cache holds it", async () => {
    const want = expectation("tiny13");
    const prompt = want.long.prompt_ids.slice(0, 48);
    // Through dist/k3, the four runs side by side.
    const chunks = [1, 5, 16, 48];
    const dirs = chunks.map(() => tempDir("union"));
    const runs = await Promise.all(chunks.map((chunk, i) =>
      k3Async([modelDir("tiny13"), "--ids", prompt.join(","), "--gen", "1", "--prefill-chunk", String(chunk), "--dump-cache-trace", dirs[i]!, "--out", "-"])));
    for (const [i, chunk] of chunks.entries()) {
      const dir = dirs[i]!;
      const r = runs[i]!;
      expect(r.code).toBe(0);
      const results = JSON.parse(r.stdout);
      const step = results.steps[0].experts as { picks: number; requests: number; reads: number };
      // The trace holds every pick in order: per chunk, per MoE layer, token by token (top-k).
      const pairs = new Int32Array(readFileSync(join(dir, "expert_trace.bin")).buffer.slice(0));
      const k = 2;
      const moeLayers = 12;
      expect(pairs.length / 2).toBe(prompt.length * moeLayers * k);
      let unions = 0;
      const everLoaded = new Set<string>();
      let at = 0;
      for (let start = 0; start < prompt.length; start += chunk) {
        const tokens = Math.min(chunk, prompt.length - start);
        for (let layer = 0; layer < moeLayers; layer++) {
          const union = new Set<string>();
          for (let p = 0; p < tokens * k; p++, at++) union.add(`${pairs[2 * at]}:${pairs[2 * at + 1]}`);
          unions += union.size;
          for (const key of union) everLoaded.add(key);
        }
      }
      expect(step.picks).toBe(prompt.length * moeLayers * k);
      expect(step.requests).toBe(unions); // one load per distinct expert per chunk and layer
      expect(step.reads).toBe(everLoaded.size); // the cache holds all 96: each is read once, ever
      if (chunk > 1) expect(step.requests).toBeLessThan(step.picks);
      expect(results.prompt_ids).toEqual(prompt);
      expect(results.plan.prefill_chunk).toBe(chunk);
      // The prefill report quotes the results' step-0 figures: here the text is what is checked
      // (test/unit/report/run-report.test.ts checks its format).
      expect(r.stderr).toContain(`expert picks ${step.picks} -> ${step.requests} distinct loads (the union per chunk and layer), ${step.reads} read from disk`);
    }
  });
});
