/**
 * On both oracle fixtures: state files (runtime.md 8) resume exactly, with and without a new
 * prompt and with the streamed trunk; `--spec N` (9.1-9.2) gives serial ids in every budget
 * configuration, greedy and seeded, with drafts that do fire; `--tf-check` (9.4) counts the
 * reference's teacher-forced agreement; every misuse is refused with its exit code.
 *
 * The runs compared with each other are the run command's in this process
 * (test/support/run-in-process.ts, with the safety-checked kernels). Through dist/k3: every
 * resume of a state file (its JSON and what it says on stderr), the banner and report of
 * --spec, --tf-check, and the refusals.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir, oracleModels, packedFixtureTrunk } from "../support/fixtures.ts";
import { k3 } from "../support/k3.ts";
import { runInProcess } from "../support/run-in-process.ts";
import { smallFsUnavailable, withSmallFs } from "../support/small-fs.ts";
import { tempDir } from "../support/tmp.ts";

setDefaultTimeout(60_000);

interface Run {
  generated_ids: number[];
  full_ids: number[];
  speculation: { max_draft: number; sweeps: number; drafted: number; accepted: number; emitted: number; replays: number } | null;
  layers: number;
  plan: { prefill_chunk: number; memory: { terms: { name: string; bytes: number }[] } };
  trunk_stats: { binds: number } | null;
  resumed_from: { path: string; prior_positions: number; prior_ids: number; bytes: number; seconds: number } | null;
  saved_state: { positions: number; bytes: number } | null;
}

/** A run in this process. */
async function run(args: string[]): Promise<Run> {
  return (await runInProcess(args)).json as Run;
}

/** A run through dist/k3. */
function runBinary(args: string[]): Run {
  const r = k3([...args, "--out", "-"]);
  if (r.code !== 0) throw new Error(`k3 ${args.join(" ")} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as Run;
}

const ids = (list: readonly number[]) => list.join(",");
const escaped = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
const seeded = ["--temperature", "0.8", "--seed", "7"];
/**
 * Seeded, but cold enough that the model still follows the repetitive prompt's lead, so drafts
 * fire (test/unit/decode/loop-speculative.test.ts verifies seeded drafts at 0.8 with drafts made to be right
 * or wrong).
 */
const coolSeeded = ["--temperature", "0.05", "--seed", "7"];

for (const name of oracleModels) {
  const dir = modelDir(name);
  const prompt = expectation(name).tf.ids.slice(0, 10);
  let trunk = "";
  beforeAll(() => {
    trunk = packedFixtureTrunk(name);
  });

  describe(`${name}: state files`, () => {
    for (const [label, extra] of [["resident", []], ["streamed, one ring slot", ["--trunk-gb", "0"]]] as const) {
      test(`save after 6 then resume for 5 = one run of 11 (${label}), with and without a new prompt`, async () => {
        const budget = () => (extra.length > 0 ? ["--trunk", trunk, ...extra] : []);
        const whole = await run([dir, "--ids", ids(prompt), "--gen", "11", ...budget()]);
        const state = join(tempDir("state"), "six.k3st");
        const first = await run([dir, "--ids", ids(prompt), "--gen", "6", "--save-state", state, ...budget()]);
        expect(first.generated_ids).toEqual(whole.generated_ids.slice(0, 6));
        // The last emitted id is pending: stored, not yet fed (runtime.md 8.3).
        expect(first.saved_state!.positions).toBe(prompt.length + 5);
        expect(first.saved_state!.bytes).toBe(statSync(state).size);
        const r = k3([dir, "--load-state", state, "--gen", "5", ...budget(), "--out", "-"]);
        expect(r.code).toBe(0);
        const resumed = JSON.parse(r.stdout) as Run;
        expect(resumed.generated_ids).toEqual(whole.generated_ids.slice(6));
        expect(resumed.full_ids).toEqual(whole.full_ids);
        expect(resumed.resumed_from).toMatchObject({ prior_positions: prompt.length + 5, prior_ids: prompt.length + 6, bytes: statSync(state).size });
        // The restore is timed and reported (the state bench quotes it).
        expect(resumed.resumed_from!.seconds).toBeGreaterThanOrEqual(0);
        expect(resumed.resumed_from!.path).toBe(state);
        // What it says on stderr is part of the contract: the restore's line, with the results' figures.
        const restored = resumed.resumed_from!;
        expect(r.stderr).toMatch(new RegExp(`^restored ${escaped(state)} \\([^)]+, ${restored.prior_positions} positions\\) in ${restored.seconds.toFixed(2)} s$`, "m"));
        // A new prompt after the history: the same as one run over the whole sequence.
        const more = [3, 1, 4];
        const continued = runBinary([dir, "--load-state", state, "--ids", ids(more), "--gen", "5", ...budget()]);
        const cold = await run([dir, "--ids", ids([...first.full_ids, ...more]), "--gen", "5", ...budget()]);
        expect(continued.generated_ids).toEqual(cold.generated_ids);
        expect(continued.full_ids).toEqual(cold.full_ids);
      });
    }

    test("seeded: save then resume equals one seeded run only in ids fed, so each part is checked against its own cold run", async () => {
      // The sampler's stream starts afresh in each process, so a resumed seeded run equals a
      // fresh seeded run over the same context, not the tail of one long run.
      const state = join(tempDir("state"), "s.k3st");
      const first = await run([dir, "--ids", ids(prompt), "--gen", "4", "--save-state", state, ...seeded]);
      const resumed = runBinary([dir, "--load-state", state, "--ids", "9", "--gen", "4", ...seeded]);
      const cold = await run([dir, "--ids", ids([...first.full_ids, 9]), "--gen", "4", ...seeded]);
      expect(resumed.generated_ids).toEqual(cold.generated_ids);
    });
  });

  describe(`${name}: speculative decode`, () => {
    // The prompt, its own greedy continuation, and the prompt again: the drafter proposes that
    // continuation after the second copy, and the model may or may not agree with it.
    let repetitive: number[] = [];
    beforeAll(async () => {
      const continuation = (await run([dir, "--ids", ids(prompt), "--gen", "8"])).generated_ids;
      repetitive = [...prompt, ...continuation, ...prompt];
    });
    const configs: [string, () => string[]][] = [
      ["resident", () => []],
      ["a top-k + 1 expert cache", () => ["--cache-gb", "0"]],
      ["streamed, one ring slot", () => ["--trunk", trunk, "--trunk-gb", "0"]],
    ];
    for (const [label, budget] of configs) {
      for (const [how, sampling] of [["greedy", []], ["seeded", coolSeeded]] as const) {
        test(`--spec 4 = serial, ${how}, ${label}`, async () => {
          for (const p of [repetitive, prompt]) {
            const serial = await run([dir, "--ids", ids(p), "--gen", "16", ...sampling, ...budget()]);
            const spec = await run([dir, "--ids", ids(p), "--gen", "16", "--spec", "4", ...sampling, ...budget()]);
            expect(spec.generated_ids).toEqual(serial.generated_ids);
            const s = spec.speculation!;
            if (p === repetitive) expect(s.sweeps).toBeGreaterThan(0); // the drafter did fire
            if (spec.trunk_stats) {
              // Streamed: every layer is bound once per forward (the prefill's chunks, each one-id step,
              // each sweep), and a partial acceptance's replay binds none (it reads no weights).
              const forwards = Math.ceil(p.length / spec.plan.prefill_chunk) + (16 - 1 - s.emitted) + s.sweeps;
              expect(spec.trunk_stats.binds).toBe(spec.layers * forwards);
            }
          }
        });
      }
    }

    test("the banner and the report say what was drafted, accepted and emitted", () => {
      const r = k3([dir, "--ids", ids(repetitive), "--gen", "16", "--spec", "12", "--out", "-"]);
      expect(r.code).toBe(0);
      const results = JSON.parse(r.stdout) as Run;
      const s = results.speculation!;
      expect(s.max_draft).toBe(8);
      // The banner and the report line are the contract here (their figures are the results').
      expect(r.stderr).toContain(`speculative decode: up to ${s.max_draft} drafted tokens per sweep, n-gram lookup, verified batched`);
      // The memory plan holds the sweep's snapshot and replay record.
      const terms = (run: Run) => run.plan.memory.terms;
      expect(terms(results).find((t) => t.name === "speculation")?.bytes).toBeGreaterThan(0);
      expect(terms(JSON.parse(k3([dir, "--ids", ids(repetitive), "--gen", "16", "--out", "-"]).stdout) as Run).map((t) => t.name)).not.toContain("speculation");
      expect(r.stderr).toContain(`speculative decode: ${s.sweeps} verification sweeps; ${s.drafted} drafted, ${s.accepted} accepted (`);
      expect(r.stderr).toContain(`, ${s.emitted} emitted; per sweep`);
    });
  });

  test(`${name}: --tf-check counts the reference's teacher-forced agreement and decodes nothing`, () => {
    const want = expectation(name).tf;
    const matches = want.argmax.slice(0, -1).filter((p, i) => p === want.ids[i + 1]).length;
    const r = k3([dir, "--ids", ids(want.ids), "--tf-check", "--out", "-"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({
      tf_positions: want.ids.length - 1, tf_matches: matches, tf_agreement: Number((matches / (want.ids.length - 1)).toFixed(4)),
    });
    // The agreement line is --tf-check's report for people (the results above are its JSON), and no step table.
    const results = JSON.parse(r.stdout);
    expect(r.stderr).toContain(`teacher-forced agreement: ${results.tf_matches}/${results.tf_positions} positions`);
    expect(r.stderr).not.toMatch(/step\s+token/);
  });
}

// The refusals' text is the contract: a refused run writes no results.
describe("refusals", () => {
  const tiny = modelDir("tiny13");
  const nested = modelDir("nested14");
  const prompt = expectation("tiny13").tf.ids.slice(0, 6);
  let state = "";
  beforeAll(() => {
    state = join(tempDir("state"), "tiny.k3st");
    expect(k3([tiny, "--ids", ids(prompt), "--gen", "3", "--save-state", state, "--out", "-"]).code).toBe(0);
  });
  const refused = (args: string[], code: number, pattern: RegExp) => {
    const r = k3([...args, "--out", "-"]);
    expect(r.code).toBe(code);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(pattern);
  };

  test("state files of another model, damaged, cut or not state files at all: exit 1 naming the file", () => {
    refused([nested, "--load-state", state, "--gen", "2"], 1, /REFUSING .*tiny\.k3st: written by a different model architecture/);
    const dir = tempDir("bad");
    const bytes = readFileSync(state);
    writeFileSync(join(dir, "cut.k3st"), bytes.subarray(0, bytes.length - 8));
    refused([tiny, "--load-state", join(dir, "cut.k3st"), "--gen", "2"], 1, /cut\.k3st is truncated/);
    const flipped = new Uint8Array(bytes);
    flipped[flipped.length - 3] = (flipped[flipped.length - 3] as number) ^ 1;
    writeFileSync(join(dir, "flip.k3st"), flipped);
    refused([tiny, "--load-state", join(dir, "flip.k3st"), "--gen", "2"], 1, /flip\.k3st: the checksum does not match/);
    writeFileSync(join(dir, "text.k3st"), "hello");
    refused([tiny, "--load-state", join(dir, "text.k3st"), "--gen", "2"], 1, /text\.k3st is not a k3 state file/);
    refused([tiny, "--load-state", join(dir, "missing.k3st"), "--gen", "2"], 1, /missing\.k3st: cannot open the state file \(ENOENT\)/);
  });

  test.skipIf(smallFsUnavailable() !== undefined)("a save that runs out of disk leaves the old state file whole, and no temporary", () => {
    // 128 KB: the first state (about 60 KB) fits; the second (about 98 KB) cannot sit beside it.
    const r = withSmallFs(128 * 1024, [
      `"$K3" "${tiny}" --ids 1,2,3 --gen 2 --save-state "$MNT/s.k3st" --out - >/dev/null 2>&1 || exit 90`,
      `before=$(sha256sum "$MNT/s.k3st")`,
      `"$K3" "${tiny}" --ids 1,2,3 --gen 60 --save-state "$MNT/s.k3st" --out - >/dev/null; code=$?`,
      `[ "$(sha256sum "$MNT/s.k3st")" = "$before" ] && echo intact`,
      `echo "left: $(ls -A "$MNT")"`,
      `exit $code`,
    ].join("\n"));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/s\.k3st: cannot write the state file: no space left on device \(ENOSPC\)/);
    expect(r.stdout).toBe("intact\nleft: s.k3st\n");
  });

  test("misuse of the options: exit 2", () => {
    refused([tiny, "--ids", "1,2", "--spec", "4", "--recompute"], 2, /--spec needs incremental decode/);
    refused([tiny, "--load-state", state, "--recompute"], 2, /--load-state needs incremental decode/);
    refused([tiny, "--ids", "1,2", "--tf-check", "--spec", "2"], 2, /--tf-check runs no decode: it cannot be combined with --spec/);
    refused([tiny, "--ids", "1", "--tf-check"], 2, /--tf-check needs a prompt of at least 2 ids/);
    refused([tiny, "--gen", "2"], 2, /a prompt is required/);
  });
});
