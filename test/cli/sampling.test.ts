/** Sampling through dist/k3: greedy by default, a seed reproduces, and the results say what was used. */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { expectation, modelDir } from "../support/fixtures.ts";
import { k3 } from "../support/k3.ts";

// Some tests take seconds, more on a busy machine (a run starts the gates' child processes early):
// bun's 5 s default is too close to be a limit on anything but the machine.
setDefaultTimeout(60_000);

const tiny = modelDir("tiny13");
const want = expectation("tiny13");
const base = [tiny, "--ids", want.prompt_ids.join(","), "--gen", "12", "--out", "-"];

function results(extra: string[], env?: Record<string, string>): { generated_ids: number[]; sampling: Record<string, number> } {
  const r = k3([...base, ...extra], env ? { env } : {});
  if (r.code !== 0) throw new Error(`k3 exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout);
}

describe("sampling flags", () => {
  test("the default, and --temperature 0, are greedy: the reference ids", () => {
    const greedy = results([]);
    expect(greedy.generated_ids).toEqual(want.generated_ids.slice(0, 12));
    expect(greedy.sampling).toMatchObject({ temperature: 0, top_p: 1, top_k: 0, min_p: 0 });
    expect(results(["--temperature", "0", "--seed", "5"]).generated_ids).toEqual(want.generated_ids.slice(0, 12));
  });

  test("a seed reproduces its ids at every budget, thread count and decode mode; the results record the knobs", () => {
    const knobs = ["--temperature", "1.3", "--top-p", "0.97", "--top-k", "40", "--seed", "11"];
    const a = results(knobs);
    expect(a.sampling).toEqual({ temperature: 1.3, top_p: 0.97, top_k: 40, min_p: 0, seed: 11, presence_penalty: 0, frequency_penalty: 0 });
    expect(a.generated_ids).not.toEqual(want.generated_ids.slice(0, 12)); // the knobs did something
    expect(results([...knobs, "--cache-gb", "0"]).generated_ids).toEqual(a.generated_ids);
    expect(results([...knobs, "--recompute"]).generated_ids).toEqual(a.generated_ids);
    // Another thread count than the one above (bun test runs dist/k3 on one thread unless K3_THREADS says otherwise).
    expect(results(knobs, { K3_THREADS: process.env.K3_THREADS === "2" ? "1" : "2" }).generated_ids).toEqual(a.generated_ids);
    const other = results(["--temperature", "1.3", "--top-p", "0.97", "--top-k", "40", "--seed", "12"]);
    expect(other.generated_ids).not.toEqual(a.generated_ids);
  });

  test("out-of-range or malformed knobs are usage errors naming the flag, before anything loads", () => {
    const cases: [string[], string][] = [
      [["--temperature", "3"], "k3: --temperature must be a number from 0 to 2 (0 is greedy), got 3\n"],
      [["--top-p", "0"], "k3: --top-p must be a number above 0 and at most 1 (1 is off), got 0\n"],
      [["--top-k", "2.5"], "k3: --top-k must be a whole number of at least -1 (0 and -1 are off), got 2.5\n"],
      [["--seed", "x"], "k3: --seed expects a number, got 'x'\n"],
    ];
    for (const [extra, message] of cases) {
      const r = k3(["/nonexistent-model", "--ids", "1", ...extra]);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(message);
      expect(r.stdout).toBe("");
    }
  });
});
