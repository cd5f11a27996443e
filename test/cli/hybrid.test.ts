/**
 * Hybrid decode (runtime.md 9.3) on both oracle fixtures, with the int8 draft trunk
 * `k3 quantize-trunk` writes: the ids are exactly the exact model's (the reference's), in
 * several budget configurations, greedy and seeded, on a resumed state too; drafts fire and are
 * accepted; the expert cache issues no read while the draft runs; misuse is refused.
 *
 * The runs are the run command's in this process (test/support/run-in-process.ts, with the
 * safety-checked kernels); through dist/k3: the defaults with their banners and report line, and
 * every refusal.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { expectation, modelDir, oracleModels, packedFixtureTrunk } from "../support/fixtures.ts";
import { k3 } from "../support/k3.ts";
import { runInProcess } from "../support/run-in-process.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(60_000);

interface Run {
  generated_ids: number[];
  full_ids: number[];
  speculation: { max_draft: number; sweeps: number; drafted: number; accepted: number } | null;
  hybrid: {
    draft_trunk: string;
    budget_bytes: number;
    drafter: { proposals: number; fed_ids: number; restores: number };
    experts: { picks: number; served: number; skipped: number; shared_only: number };
    expert_reads_while_drafting: number;
    trunk_stats: { reads: number };
  } | null;
  plan: { draft: { plan: { pinned: number; ring_slots: number; raised: boolean } } | null; memory: { terms: { name: string; bytes: number }[] } };
}

async function run(args: string[]): Promise<Run> {
  return (await runInProcess(args)).json as Run;
}

const ids = (list: readonly number[]) => list.join(",");
/** Each model's int8 draft trunk, quantized by dist/k3 from the trunk packed once per process. */
const drafts = new Map<string, string>();

for (const name of oracleModels) {
  const dir = modelDir(name);
  const want = expectation(name);
  let trunk = "";
  let draft = "";
  beforeAll(() => {
    trunk = packedFixtureTrunk(name);
    draft = join(tempDir("hdraft"), "int8");
    expect(k3(["quantize-trunk", trunk, draft]).code).toBe(0);
    drafts.set(name, draft);
  });

  describe(`${name}: hybrid decode with the int8 draft`, () => {
    const base = () => [dir, "--ids", ids(want.prompt_ids), "--gen", "20", "--draft-trunk", draft];
    const configs: [string, () => string[]][] = [
      ["resident exact trunk", () => []],
      ["streamed exact trunk, one ring slot; the draft in one slot too", () => ["--trunk", trunk, "--trunk-gb", "0", "--draft-trunk-gb", "0"]],
      ["an expert cache of top-k + 1 slots (the draft skips experts)", () => ["--cache-gb", "0"]],
      ...(name === "tiny13" ? [["--spec 2", () => ["--spec", "2"]] as [string, () => string[]]] : []),
    ];
    for (const [label, extra] of configs) {
      test(`${label}: exactly the reference ids; drafts accepted; no expert read while drafting`, async () => {
        const r = await run([...base(), ...extra()]);
        expect(r.generated_ids).toEqual(want.generated_ids);
        expect(r.hybrid).not.toBeNull();
        expect(r.hybrid!.draft_trunk).toBe(draft);
        expect(r.speculation!.drafted).toBeGreaterThan(0);
        expect(r.speculation!.accepted).toBeGreaterThan(0);
        expect(r.hybrid!.expert_reads_while_drafting).toBe(0);
        expect(r.hybrid!.experts.picks).toBe(r.hybrid!.experts.served + r.hybrid!.experts.skipped);
        if (extra().includes("--cache-gb")) expect(r.hybrid!.experts.skipped).toBeGreaterThan(0);
        expect(r.hybrid!.trunk_stats.reads).toBeGreaterThan(0);
        expect(r.plan.memory.terms.map((t) => t.name)).toContain("draft trunk (STREAMED)");
      });
    }

    test("the defaults: --spec 4, a 6 GB draft budget, the banners and the report line", () => {
      const r = k3([...base(), "--out", "-"]);
      expect(r.code).toBe(0);
      const results = JSON.parse(r.stdout) as Run;
      expect(results.speculation!.max_draft).toBe(4);
      expect(results.hybrid!.budget_bytes).toBe(6e9);
      expect(r.stderr).toContain(`hybrid decode: draft trunk ${draft} (6.00 GB budget) proposes up to 4 tokens per sweep;`);
      expect(r.stderr).toContain("the exact model verifies every token before it is emitted");
      expect(r.stderr).toContain(`draft trunk stream (${draft}):`);
      const s = results.speculation!;
      expect(r.stderr).toContain(`hybrid decode: ${s.sweeps} rounds, ${s.drafted} drafted, ${s.accepted} accepted (`);
      expect(r.stderr).toContain("expert reads while drafting: 0");
    });

    // The rest once, on the nested model (two shards, other widths): each is a whole run or two.
    const nestedOnly = (title: string, body: () => void) => {
      if (name === "nested14") test(title, body);
    };

    nestedOnly("seeded sampling: the same ids as the serial seeded run", async () => {
      const seeded = ["--temperature", "0.05", "--seed", "3"];
      const serial = await run([dir, "--ids", ids(want.prompt_ids), "--gen", "20", ...seeded]);
      const hybrid = await run([...base(), ...seeded]);
      expect(hybrid.generated_ids).toEqual(serial.generated_ids);
      expect(hybrid.speculation!.accepted).toBeGreaterThan(0);
    });

    nestedOnly("resumed from a state file: the draft starts from position 0 and the ids are one uninterrupted run's", async () => {
      const state = join(tempDir("hstate"), "s.k3st");
      const first = await run([dir, "--ids", ids(want.prompt_ids), "--gen", "8", "--save-state", state]);
      expect(first.generated_ids).toEqual(want.generated_ids.slice(0, 8));
      const resumed = await run([dir, "--load-state", state, "--gen", "12", "--draft-trunk", draft]);
      expect(resumed.generated_ids).toEqual(want.generated_ids.slice(8, 20));
      expect(resumed.hybrid!.drafter.fed_ids).toBeGreaterThanOrEqual(want.prompt_ids.length + 7);
      expect(resumed.speculation!.accepted).toBeGreaterThan(0);
    });

    nestedOnly("the bf16 trunk itself as the draft: exact ids, and most of its drafts are accepted", async () => {
      const int8 = await run(base());
      const bf16 = await run([dir, "--ids", ids(want.prompt_ids), "--gen", "20", "--draft-trunk", trunk]);
      expect(bf16.generated_ids).toEqual(want.generated_ids);
      expect(bf16.speculation!.accepted / bf16.speculation!.drafted).toBeGreaterThan(0.5);
      expect(int8.generated_ids).toEqual(want.generated_ids);
    });
  });
}

describe("hybrid decode: misuse", () => {
  const dir = modelDir("tiny13");
  const p = ids(expectation("tiny13").prompt_ids);
  let tinyDraft = "";
  beforeAll(() => {
    tinyDraft = drafts.get("tiny13")!;
  });
  const cases: [string, string[], number, string][] = [
    ["--recompute", [dir, "--ids", p, "--recompute", "--draft-trunk", "x"], 2, "k3: --draft-trunk needs incremental decode (the draft carries its own state); drop --recompute\n"],
    ["--draft-trunk-gb alone", [dir, "--ids", p, "--draft-trunk-gb", "2"], 2, "k3: --draft-trunk-gb is the draft trunk's budget: it needs --draft-trunk DIR\n"],
    ["a malformed budget", [dir, "--ids", p, "--draft-trunk", "x", "--draft-trunk-gb", "lots"], 2, "k3: --draft-trunk-gb expects a size in GB (a number such as 16 or 0.5), got 'lots'\n"],
    ["--tf-check", [dir, "--ids", p, "--tf-check", "--draft-trunk", "x"], 2, "k3: --tf-check runs no decode: it cannot be combined with --draft-trunk\n"],
  ];
  for (const [label, args, code, message] of cases) {
    test(`${label}: exit ${code}`, () => {
      const r = k3(args);
      expect(r.code).toBe(code);
      expect(r.stderr).toBe(message);
    });
  }

  test("a draft trunk of another checkpoint is refused before anything runs (exit 1)", () => {
    const nested = modelDir("nested14");
    const r = k3([nested, "--ids", "1,2", "--gen", "2", "--layers", "13", "--draft-trunk", tinyDraft, "--out", "-"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`k3: ${tinyDraft}: layer 0 of the draft trunk does not fit this checkpoint:`);
    expect(r.stdout).toBe("");
    const missing = k3([dir, "--ids", p, "--gen", "2", "--draft-trunk", join(tempDir("hnone"), "nope"), "--out", "-"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("trunk.json is missing");
  });
});
