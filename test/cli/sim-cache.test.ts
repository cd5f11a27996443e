import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { encodeTrace, writeTraceFile } from "../../src/weights/expert-trace.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

// The tests are independent dist/k3 runs and run concurrently; a test's time includes the others'.
setDefaultTimeout(60_000);

const layers = 4;
const topK = 16;
const tokens = 10;

/** A K3-shaped trace: per token, each of 4 MoE layers asks for 16 distinct experts of 64. */
function smallTrace(): string {
  let state = 99;
  const next = () => (state = (Math.imul(state, 1_664_525) + 1_013_904_223) >>> 0) / 2 ** 32;
  const pairs: number[] = [];
  for (let token = 0; token < tokens; token++) {
    for (let layer = 1; layer <= layers; layer++) {
      const chosen = new Set<number>();
      while (chosen.size < topK) chosen.add(Math.floor(64 * next() ** 2));
      for (const expert of chosen) pairs.push(layer, expert);
    }
  }
  const path = join(tempDir("sim"), "expert_trace.bin");
  writeTraceFile(path, Int32Array.from(pairs));
  return path;
}

interface Row {
  cache: string;
  slots: number;
  lru: number;
  belady: number;
  pinLru: number;
  gbPerToken: number;
  secPerToken: number;
}

const rowPattern = /^(\S+ GB)\s+(\d+)\s+([\d.]+)%\s+([\d.]+)%\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)$/;

function tableRows(stdout: string): Row[] {
  const lines = stdout.split("\n");
  const start = lines.findIndex((l) => /^CACHE\s+SLOTS\s+LRU\s+BELADY\s+PIN\+LRU\s+GB READ\/TOK\s+SEC\/TOK$/.test(l));
  expect(start).toBeGreaterThan(0);
  const rows: Row[] = [];
  for (const line of lines.slice(start + 1)) {
    if (line === "") break;
    const m = line.match(rowPattern);
    expect(m).not.toBeNull();
    const [, cache, ...numbers] = m!;
    const [slots, lru, belady, pinLru, gbPerToken, secPerToken] = numbers.map(Number) as [number, number, number, number, number, number];
    rows.push({ cache: cache!, slots, lru, belady, pinLru, gbPerToken, secPerToken });
  }
  return rows;
}

const trace = smallTrace();

describe.concurrent("k3 sim-cache through dist/k3", () => {
  test("--help prints usage from the option table, exit 0", async () => {
    const r = await k3Async(["sim-cache", "--help"], { isolated: true });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("USAGE k3 sim-cache [OPTIONS] [EXPERT_TRACE]");
    for (const flag of ["--expert-bytes", "--disk-mbs", "--tokens", "--capacities", "--slots", "--help"]) expect(r.stdout).toContain(flag);
    expect(r.stderr).toBe("");
  });

  test("k3 --help lists the subcommand", async () => {
    expect((await k3Async(["--help"])).stdout).toContain("sim-cache");
  });

  test("--slots gives real rows: Belady beats LRU and PIN+LRU on every row, all under the ceiling", async () => {
    const r = await k3Async(["sim-cache", trace, "--slots", "17,32,64,128"], { isolated: true });
    expect(r.stderr).toBe("");
    expect(r.code).toBe(0);
    const requests = tokens * layers * topK;
    expect(r.stdout).toMatch(new RegExp(`^trace: ${requests} requests, \\d+ distinct experts, about ${tokens} token\\(s\\)\n`));
    expect(r.stdout).toContain(`requests / (top-16 x ${layers} MoE layer(s) in the trace); --tokens overrides`);
    expect(r.stdout).toMatch(/hottest {2}: (L\d\/e\d+ x\d+ {2}){5}L\d\/e\d+ x\d+\n/);
    const ceiling = Number(r.stdout.match(/no policy at any size hits more than ([\d.]+)%/)![1]);
    const rows = tableRows(r.stdout);
    expect(rows.map((row) => row.slots)).toEqual([17, 32, 64, 128]);
    expect(rows[0]!.cache).toBe("0.30 GB");
    for (const row of rows) {
      expect(row.belady).toBeGreaterThanOrEqual(row.lru);
      expect(row.belady).toBeGreaterThanOrEqual(row.pinLru);
      expect(row.belady).toBeLessThanOrEqual(ceiling);
    }
    expect(rows[0]!.belady).toBeGreaterThan(rows[0]!.lru); // the small rows are not all compulsory
  });

  test("the default capacities 8 .. 1450 GB all hold this small trace: every policy at the ceiling", async () => {
    const r = await k3Async(["sim-cache", trace]);
    expect(r.code).toBe(0);
    const rows = tableRows(r.stdout);
    expect(rows.map((row) => row.cache)).toEqual(
      ["8", "16", "32", "64", "128", "192", "256", "384", "512", "768", "1024", "1450"].map((gb) => `${gb} GB`),
    );
    expect(rows[0]!.slots).toBe(455);
    expect(rows.at(-1)!.slots).toBe(82_633);
    const ceiling = Number(r.stdout.match(/no policy at any size hits more than ([\d.]+)%/)![1]);
    for (const row of rows) expect([row.lru, row.belady, row.pinLru]).toEqual([ceiling, ceiling, ceiling]);
    expect(r.stdout).toContain("the whole pool: 1446.46 GB");
  });

  test("per-token columns follow --tokens, --expert-bytes and --disk-mbs", async () => {
    const r = await k3Async(["sim-cache", trace, "--slots", "40", "--tokens", "4", "--expert-bytes", "1000000", "--disk-mbs", "500"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(" distinct experts, 4 token(s)\n  tokens   : given with --tokens");
    const [row] = tableRows(r.stdout);
    const requests = tokens * layers * topK;
    const lruMisses = Math.round(requests * (1 - row!.lru / 100));
    expect(row!.gbPerToken).toBeCloseTo((lruMisses * 1e6) / 4 / 1e9, 2);
    expect(row!.secPerToken).toBeCloseTo((row!.gbPerToken * 1000) / 500, 2);
  });

  test("--capacities in GB; sizes under 17 slots are skipped and named in the footer", async () => {
    const r = await k3Async(["sim-cache", trace, "--expert-bytes", "1000000", "--capacities", "0.01,0.017,0.05"]);
    expect(r.code).toBe(0);
    expect(tableRows(r.stdout).map((row) => [row.cache, row.slots])).toEqual([["0.017 GB", 17], ["0.05 GB", 50]]);
    expect(r.stdout).toContain("skipped: 0.01 GB (10 slots): under the 17-slot minimum (top-k + 1)");
  });

  test("the later of --capacities and --slots wins", async () => {
    const r = await k3Async(["sim-cache", trace, "--capacities", "8", "--slots", "20"]);
    expect(tableRows(r.stdout).map((row) => row.slots)).toEqual([20]);
  });
});

describe.concurrent("k3 sim-cache refusals", () => {
  const usage: [string, string[], string][] = [
    ["no trace", [], "k3: missing <expert_trace.bin>"],
    ["an unknown option", ["t.bin", "--bogus"], "k3: unknown option --bogus"],
    ["two traces", ["a.bin", "b.bin"], "k3: unexpected argument b.bin (give one trace file)"],
    ["--disk-mbs abc", ["t.bin", "--disk-mbs", "abc"], "k3: --disk-mbs expects a positive number, got 'abc'"],
    ["--disk-mbs 0", ["t.bin", "--disk-mbs", "0"], "k3: --disk-mbs must be above 0 and at most 1000000, got 0"],
    ["--expert-bytes 0", ["t.bin", "--expert-bytes", "0"], "k3: --expert-bytes must be from 1 to 1099511627776, got 0"],
    ["--tokens x", ["t.bin", "--tokens", "x"], "k3: --tokens expects a whole number from 1 to 268435456, got 'x'"],
    ["--slots with a hole", ["t.bin", "--slots", "17,,32"], "k3: --slots expects a comma-separated list, got '17,,32'"],
    ["--slots 1.5", ["t.bin", "--slots", "17,1.5"], "k3: --slots expects a whole number from 1 to 2147483647, got '1.5'"],
    ["--capacities -8", ["t.bin", "--capacities=-8"], "k3: --capacities expects a positive number, got '-8'"],
    ["a value option with no value", ["t.bin", "--slots"], "k3: --slots needs a value (N,N)"],
  ];
  for (const [name, args, message] of usage) {
    test(`${name}: exit 2`, async () => {
      const r = await k3Async(["sim-cache", ...args]);
      expect(r.code).toBe(2);
      expect(r.stderr.split("\n")[0]).toBe(message);
      expect(r.stdout).toBe("");
    });
  }

  test("a missing trace file: exit 1, one line naming it", async () => {
    const path = join(tempDir("sim-missing"), "expert_trace.bin");
    const r = await k3Async(["sim-cache", path]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`k3: ${path}: cannot read the expert trace (ENOENT)\n`);
    expect(r.stdout).toBe("");
  });

  test("a truncated trace file: exit 1, one line naming it", async () => {
    const path = join(tempDir("sim-odd"), "expert_trace.bin");
    writeFileSync(path, new Uint8Array(20));
    const r = await k3Async(["sim-cache", path]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`k3: ${path}: 20 bytes is not a whole number of 8-byte (layer, expert) pairs; the trace is truncated or not a trace\n`);
  });

  test("a negative id: exit 1, one line naming the file and the request", async () => {
    const path = join(tempDir("sim-neg"), "expert_trace.bin");
    writeFileSync(path, encodeTrace(Int32Array.of(1, 2, 1, -5)));
    const r = await k3Async(["sim-cache", path]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`k3: ${path}: request 1 is (layer 1, expert -5); ids must be from 0 to 65535\n`);
  });
});
