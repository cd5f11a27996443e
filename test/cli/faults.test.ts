/**
 * Faults in the middle of work, through dist/k3 (issue 15): SIGINT and SIGTERM mid-run and
 * mid-pack, a trunk read failing with EIO mid-token, a packed trunk and a shard truncated while
 * a run reads them. Each ends in a clear one-line error with its documented exit code, and
 * nothing that looks complete: no results file, no pack, no temporary.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, existsSync, readdirSync, readFileSync, statSync, truncateSync } from "node:fs";
import { join } from "node:path";
import { executablePath } from "../../tools/build.ts";
import { expectation, modelDir } from "../support/fixtures.ts";
import { k3, type K3Result } from "../support/k3.ts";
import { tempDir } from "../support/tmp.ts";

// Some tests take seconds, more on a busy machine (a run starts the gates' child processes early):
// bun's 5 s default is too close to be a limit on anything but the machine.
setDefaultTimeout(60_000);

const tiny = modelDir("tiny13");
const nested = modelDir("nested14");
const nestedWant = expectation("nested14");
const lastLine = (text: string) => text.trimEnd().split("\n").at(-1);
/** A row of the step table for step `n` (stderr): "<n>     <token>   <seconds> ...". */
const stepRow = (n: number) => new RegExp(`(^|\\n)${n} +\\d+ +[\\d.]+ `);

/**
 * Runs dist/k3 and calls `act` once, as soon as stderr matches `when` (the run is then known to
 * be in progress). Bounded: the child is killed after a minute whatever happens.
 */
async function runAndAct(args: string[], when: RegExp, act: (pid: number) => void): Promise<K3Result & { acted: boolean; signal: string | number | null }> {
  const child = Bun.spawn([executablePath, ...args], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const stdout = new Response(child.stdout).text();
  const deadline = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const decoder = new TextDecoder();
  let stderr = "";
  let acted = false;
  for await (const chunk of child.stderr) {
    stderr += decoder.decode(chunk, { stream: true });
    if (!acted && when.test(stderr)) {
      acted = true;
      act(child.pid);
    }
  }
  await child.exited;
  clearTimeout(deadline);
  return { code: child.exitCode ?? -1, signal: child.signalCode, stdout: await stdout, stderr, acted };
}

function packedTrunk(model = nested): string {
  const out = join(tempDir("faults-pack"), "trunk");
  expect(k3(["pack-trunk", model, out]).code).toBe(0);
  return out;
}

describe("SIGINT and SIGTERM", () => {
  for (const [signal, code] of [["SIGINT", 130], ["SIGTERM", 143]] as const) {
    test(`${signal} mid-run: exit ${code}, one line, no results file`, async () => {
      const dir = tempDir(`signal-run-${signal}`);
      const r = await runAndAct([tiny, "--ids", "1,2,3", "--gen", "4000", "--out", join(dir, "run.json")], stepRow(20), (pid) => process.kill(pid, signal));
      expect(r.acted).toBe(true);
      expect(r.signal).toBeNull(); // k3 stopped itself; it was not killed
      expect(r.code).toBe(code);
      expect(lastLine(r.stderr)).toBe(`k3: interrupted by ${signal}; stopped without writing any output`);
      expect(r.stderr).not.toMatch(/tokens in [\d.]+ s/); // the run's summary never came
      expect(readdirSync(dir)).toEqual([]);
    });

    test(`${signal} mid-pack: exit ${code}, no trunk and no partial trunk left; the next pack works`, () => {
      const out = join(tempDir(`signal-pack-${signal}`), "trunk");
      const r = k3(["pack-trunk", nested, out], { env: { K3_PACK_KILL_AFTER_LAYERS: `4:${signal}` } });
      expect(r.stderr).toContain("packed 4/14 layers");
      expect(lastLine(r.stderr)).toBe(`k3: interrupted by ${signal}; stopped without writing any output`);
      expect(r.code).toBe(code);
      expect(readdirSync(out)).toEqual([]);
      expect(k3(["pack-trunk", nested, out]).code).toBe(0);
      expect(readdirSync(out).sort()).toEqual(["trunk.bin", "trunk.json"]);
    });
  }
});

describe("read faults while a run reads", () => {
  const streamedRun = (trunk: string, out: string, gen: number) =>
    [nested, "--ids", nestedWant.prompt_ids.join(","), "--gen", String(gen), "--trunk", trunk, "--trunk-gb", "0", "--out", out];

  test("EIO on a trunk read mid-token: exit 1 naming the file and layer, no results", () => {
    const trunk = packedTrunk();
    const dir = tempDir("eio");
    // One ring slot: every token reads every layer, so layer 5's third read is in step 2, after layers 0-4 ran.
    const r = k3(streamedRun(trunk, join(dir, "run.json"), 5), { env: { K3_INJECT_TRUNK_READ_FAULT: "5:3" } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(stepRow(1));
    expect(lastLine(r.stderr)).toBe(`k3: ${trunk}/trunk.bin: layer 5: read failed (EIO); the run stopped at step 2 and wrote no results`);
    expect(readdirSync(dir)).toEqual([]);
    const bad = k3(streamedRun(trunk, "-", 1), { env: { K3_INJECT_TRUNK_READ_FAULT: "5" } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe("k3: K3_INJECT_TRUNK_READ_FAULT: '5' is not layer:read (read 1 is the first)\n");
  });

  test("trunk.bin truncated while a run streams it: exit 1 naming the file and layer, no results", async () => {
    const trunk = packedTrunk();
    const dir = tempDir("truncated-trunk");
    const bin = join(trunk, "trunk.bin");
    const r = await runAndAct(streamedRun(trunk, join(dir, "run.json"), 4000), stepRow(5), () => truncateSync(bin, statSync(bin).size / 2));
    expect(r.acted).toBe(true);
    expect(r.code).toBe(1);
    expect(lastLine(r.stderr)).toMatch(
      new RegExp(`^k3: ${bin}: layer \\d+: file ends before the requested bytes \\(truncated\\?\\); the run stopped at step \\d+ and wrote no results$`),
    );
    expect(readdirSync(dir)).toEqual([]);
  });

  test("a shard truncated while a run reads experts from it: the drops are named, RUN INVALID, exit 4", async () => {
    const model = tempDir("truncated-shard");
    for (const name of readdirSync(tiny)) copyFileSync(join(tiny, name), join(model, name));
    const shard = join(model, "model-00001-of-00001.safetensors");
    const out = join(model, "run.json");
    // Three cache slots: every expert request is a read from the shard, token after token.
    const r = await runAndAct([model, "--ids", "1,2,3", "--gen", "300", "--cache-gb", "0.00005", "--out", out], stepRow(5),
      () => truncateSync(shard, statSync(shard).size / 2));
    expect(r.acted).toBe(true);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain("RUN INVALID");
    expect(r.stderr).toContain(`${shard}: file ends before the requested bytes (truncated?)`);
    expect(r.stderr).not.toContain("internal error");
    const results = JSON.parse(readFileSync(out, "utf8"));
    expect(results.expert_drops).toBeGreaterThan(0);
    expect(results.drops.length).toBe(results.expert_drops);
    expect(existsSync(out)).toBe(true);
  });
});
