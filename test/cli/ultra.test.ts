/**
 * Ultra-low-memory mode (runtime.md 2.4) through dist/k3 on both oracle fixtures: the reference
 * ids in both decode modes, the step-0 logits byte for byte against the resident tables, the plan
 * and load lines, the JSON fields, `--preset ultra`, and the refusals (exit 2). The resident runs
 * the logits are compared with are the run command's in this process (run-in-process.ts); the
 * tests run concurrently.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir, oracleModels, packedFixtureTrunk } from "../support/fixtures.ts";
import { logitBytes, runInProcess } from "../support/run-in-process.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(60_000);

interface Run {
  generated_ids: number[];
  ultra_low_memory: boolean;
  embedding_bytes_read: number;
  lm_head_bytes_read: number;
  plan: { memory: { terms: { name: string; bytes: number }[] }; budgets: { ultra_low_memory: boolean; preset: string | null } };
}

const ids = (list: readonly number[]) => list.join(",");

for (const name of oracleModels) {
  const dir = modelDir(name);
  const want = expectation(name);
  let trunk = "";
  beforeAll(() => {
    trunk = packedFixtureTrunk(name);
    expect(readdirSync(trunk).sort()).toEqual(["trunk.bin", "trunk.json"]);
  });

  describe.concurrent(`${name}: ultra-low-memory mode`, () => {
    const gen = 12;
    for (const mode of ["--incremental", "--recompute"] as const) {
      test(`${mode}: the reference ids, the step-0 logits of the resident tables byte for byte, the JSON fields`, async () => {
        const out = tempDir("ultra");
        const base = [dir, "--ids", ids(want.prompt_ids), "--gen", String(gen), mode, "--trunk", trunk, "--trunk-gb", "0"];
        // The same run with the tables resident, in this process: its logits are the ones to match.
        const ultraRun = k3Async([...base, "--ultra-low-memory", "--dump-logits", join(out, "ultra.f32"), "--out", "-"]);
        const normal = runInProcess(base);
        const [ultra, normalRun] = [await ultraRun, await normal];
        expect(ultra.code).toBe(0);
        const r = JSON.parse(ultra.stdout) as Run;
        const expected = mode === "--incremental" ? want.generated_ids : want.generated_ids_recompute;
        expect(r.generated_ids).toEqual(expected.slice(0, gen));
        expect(readFileSync(join(out, "ultra.f32")).equals(logitBytes(normalRun.firstLogits))).toBe(true);
        expect(r.ultra_low_memory).toBe(true);
        const n = normalRun.json as Run;
        expect(n.ultra_low_memory).toBe(false);
        expect(n.embedding_bytes_read).toBe(0);
        expect(n.lm_head_bytes_read).toBe(0);
        // The LM head is read once per step; each position fed reads its embedding row.
        const config = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
        const V = (config.vocab_size ?? config.text_config?.vocab_size) as number;
        const E = (config.hidden_size ?? config.text_config?.hidden_size) as number;
        expect(r.lm_head_bytes_read).toBe(gen * V * E * 2);
        const fed = mode === "--incremental"
          ? want.prompt_ids.length + gen - 1
          : Array.from({ length: gen }, (_, step) => want.prompt_ids.length + step).reduce((a, b) => a + b, 0);
        expect(r.embedding_bytes_read).toBe(fed * E * 2);
        const terms = r.plan.memory.terms;
        expect(terms.find((t) => t.name === "embed + lm_head (STREAMED)")!.bytes).toBeLessThan(2 * V * E * 2);
        expect(ultra.stderr).toContain("final norms:");
        expect(ultra.stderr).toContain("embedding and lm_head streamed");
        expect(ultra.stderr).toMatch(/model tables \d+\.\d\d s of/);
        if (mode === "--recompute") expect(ultra.stderr).toMatch(/recurrent state: one .+ slot, cleared and reused across \d+ layers/);
        else expect(ultra.stderr).not.toContain("cleared and reused");
      });
    }

    test("--preset ultra switches the mode on (a later preset switches it off); the ids do not change", async () => {
      const base = [dir, "--ids", ids(want.prompt_ids), "--gen", "6", "--trunk", trunk];
      const [ultraRun, offRun, onRun] = await Promise.all([
        k3Async([...base, "--preset", "ultra", "--out", "-"]),
        k3Async([...base, "--preset", "ultra", "--preset", "laptop", "--out", "-"]),
        k3Async([...base, "--preset", "laptop", "--ultra-low-memory", "--out", "-"]),
      ]);
      const ultra = JSON.parse(ultraRun.stdout) as Run;
      expect(ultra.ultra_low_memory).toBe(true);
      expect(ultra.plan.budgets.preset).toBe("ultra");
      expect(ultra.generated_ids).toEqual(want.generated_ids.slice(0, 6));
      const off = JSON.parse(offRun.stdout) as Run;
      expect(off.ultra_low_memory).toBe(false);
      const on = JSON.parse(onRun.stdout) as Run;
      expect(on.ultra_low_memory).toBe(true);
      expect(on.generated_ids).toEqual(want.generated_ids.slice(0, 6));
    });
  });
}

describe.concurrent("ultra-low-memory mode: refusals (exit 2, before anything loads)", () => {
  const dir = modelDir("tiny13");
  const p = ids(expectation("tiny13").prompt_ids);
  const ultra = "ultra-low-memory mode (--ultra-low-memory or --preset ultra)";
  const cases: [string, string[], string][] = [
    ["without --trunk", [dir, "--ids", p, "--ultra-low-memory"], `k3: ${ultra} needs --trunk: a resident trunk cannot keep its memory bound\n`],
    ["--preset ultra without --trunk", [dir, "--ids", p, "--preset", "ultra"], `k3: ${ultra} needs --trunk: a resident trunk cannot keep its memory bound\n`],
    ["with --spec", [dir, "--ids", p, "--trunk", "t", "--preset", "ultra", "--spec", "2"], `k3: ${ultra} decodes serially: it cannot be combined with --spec\n`],
    ["with --draft-trunk", [dir, "--ids", p, "--trunk", "t", "--ultra-low-memory", "--draft-trunk", "d"], `k3: ${ultra} decodes serially: it cannot be combined with --draft-trunk\n`],
    ["with --preset auto before it", [dir, "--ids", p, "--trunk", "t", "--preset", "auto", "--ultra-low-memory"], `k3: ${ultra} needs explicit budgets: it cannot be combined with auto\n`],
    ["with --trunk-gb auto", [dir, "--ids", p, "--trunk", "t", "--preset", "ultra", "--trunk-gb", "auto"], `k3: ${ultra} needs explicit budgets: it cannot be combined with auto\n`],
  ];
  for (const [label, args, message] of cases) {
    test(label, async () => {
      const r = await k3Async([...args, "--out", "-"]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(message);
      expect(r.stdout).toBe("");
    });
  }

  test("--preset auto after --ultra-low-memory switches it off: no refusal", async () => {
    const r = await k3Async([dir, "--ids", p, "--gen", "1", "--ultra-low-memory", "--preset", "auto", "--out", "-"]);
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as Run).ultra_low_memory).toBe(false);
  });
});
