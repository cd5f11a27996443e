/**
 * `bun run fuzz` in the suite: a bounded count of every target in process and a few inputs of
 * each through dist/k3, judged by the contract; and the judge itself shown able to fail.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync } from "node:fs";
import { usageError } from "../../src/errors.ts";
import { tempDir } from "../support/tmp.ts";
import { fuzzTarget, makeInput, type Finding, type FuzzTarget, type Seed } from "./harness.ts";
import { targets } from "./targets/index.ts";
import { utf8 } from "./fixtures.ts";

// Some tests take seconds, more on a busy machine (a run starts the gates' child processes early):
// bun's 5 s default is too close to be a limit on anything but the machine.
setDefaultTimeout(60_000);

/** Inputs per target in process, and through the binary (about 0.2 s each). */
const processCount = 200;
const binaryCount = 2;

let shared: string | undefined;
/** One work directory for the file (tiny13 is packed once); in memory when there is a tmpfs (thousands of inputs are written). */
const work = () => (shared ??= tempDir("fuzz", existsSync("/dev/shm") ? "/dev/shm" : undefined));

async function fuzz(target: FuzzTarget<Seed>, mode: "process" | "binary", count: number, seed = 1) {
  const findings: Finding[] = [];
  const counts = await fuzzTarget(target, { work: work() }, { mode, count, seed }, (f) => findings.push(f));
  return { counts, findings };
}

describe("fuzz: every parser, in process", () => {
  for (const target of targets) {
    const count = target.testCount ?? processCount;
    test(`${target.name}: ${count} mutated inputs are refused with a K3Error or read, nothing else`, async () => {
      const { counts, findings } = await fuzz(target, "process", count);
      expect(findings).toEqual([]);
      expect(counts.inputs).toBe(count);
      expect(counts.refused).toBeGreaterThan(0);
    });
  }
});

// The targets' dist/k3 runs are independent processes: the targets run concurrently.
describe.concurrent("fuzz: every parser, through dist/k3", () => {
  for (const target of targets.filter((t) => t.command)) {
    test(`${target.name}: ${binaryCount} mutated inputs give one clean line and exit 1 or 2, or the same output`, async () => {
      const { counts, findings } = await fuzz(target, "binary", binaryCount, 2);
      expect(findings).toEqual([]);
      expect(counts.inputs).toBe(binaryCount);
    }, 60_000);
  }
});

describe("the harness", () => {
  const seeds = (): Seed[] => [{ label: "one", bytes: utf8('{"a": [1, 2, 3]}') }];
  const fake = (parse: (input: Uint8Array) => string, command?: FuzzTarget["command"]): FuzzTarget => ({
    name: "fake", about: "", seeds, mutate: (input) => input, parse,
    command: command ?? (() => ({ args: ["--version"], names: [] })),
  });

  test("inputs are a function of (seed, target, index) alone", () => {
    const target = targets.find((t) => t.name === "config") as FuzzTarget;
    const seedsOf = target.seeds({ work: work() });
    for (const index of [0, 7, 123]) {
      expect(makeInput(target, seedsOf, 5, index).bytes).toEqual(makeInput(target, seedsOf, 5, index).bytes);
    }
    expect(makeInput(target, seedsOf, 5, 1).bytes).not.toEqual(makeInput(target, seedsOf, 6, 1).bytes);
  });

  test("in process: an exception of another kind, or a refusal over several lines, is a finding", async () => {
    let calls = 0;
    const typeError = fake(() => {
      if (calls++ === 0) return "seed";
      throw new TypeError("x is undefined");
    });
    expect((await fuzz(typeError, "process", 2)).findings.map((f) => f.kind)).toEqual(["exception", "exception"]);
    let n = 0;
    const twoLines = fake(() => {
      if (n++ === 0) return "seed";
      throw usageError("first line\nsecond line");
    });
    expect((await fuzz(twoLines, "process", 1)).findings.map((f) => f.kind)).toEqual(["bad-refusal"]);
  });

  test("binary: other output at exit 0 for an input that means the same, and a refusal naming nothing asked for, are findings", async () => {
    let baseline = true;
    const changed = fake(() => "same", () => {
      const args = baseline ? ["--version"] : ["--list-presets"];
      baseline = false;
      return { args, names: [] };
    });
    expect((await fuzz(changed, "binary", 1)).findings.map((f) => f.kind)).toEqual(["changed-output"]);
    let first = true;
    const unnamed = fake(() => "same", () => {
      const args = first ? ["--version"] : ["/nonexistent-model", "--ids", "1"];
      first = false;
      return { args, names: ["trunk.json"] };
    });
    expect((await fuzz(unnamed, "binary", 1)).findings.map((f) => f.kind)).toEqual(["unnamed"]);
  });
});
