/** Budgets, presets, the memory plan, dropped experts and cache traces, through dist/k3. */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { readTraceFile } from "../../src/weights/expert-trace.ts";
import { tinyConfig } from "../support/configs.ts";
import { expectation, modelDir } from "../support/fixtures.ts";
import { writeTestCheckpoint } from "../support/checkpoints.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

// The tests are independent dist/k3 runs and run concurrently; a test's time includes the others'.
setDefaultTimeout(60_000);

const tiny = modelDir("tiny13");
const want = expectation("tiny13");
const prompt = ["--ids", want.prompt_ids.join(",")];

describe.concurrent("presets and budgets", () => {
  test("a later option wins: --preset server --cache-gb 40, and the reverse", async () => {
    const a = await k3Async([tiny, ...prompt, "--gen", "1", "--out", "-", "--preset", "server", "--cache-gb", "40"]);
    expect(a.code).toBe(0);
    const budgets = JSON.parse(a.stdout).plan.budgets;
    expect(budgets).toMatchObject({ preset: "server", trunk_bytes: 110e9, cache_bytes: 40e9, auto: null });
    // The banner is the contract here: it shows the budgets that won (the results' figures).
    expect(a.stderr).toContain(`preset ${budgets.preset} (trunk ${budgets.trunk_bytes / 1e9} GB / expert cache ${budgets.cache_bytes / 1e9} GB)`);
    const b = await k3Async([tiny, ...prompt, "--gen", "1", "--out", "-", "--cache-gb", "40", "--preset", "server"]);
    expect(JSON.parse(b.stdout).plan.budgets).toMatchObject({ preset: "server", trunk_bytes: 110e9, cache_bytes: 13e9 });
  });

  // The refusals' text is the contract: a refused run writes no results.
  test("an unknown preset is a usage error that lists the presets", async () => {
    const r = await k3Async([tiny, ...prompt, "--preset", "huge"]);
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n")[0]).toBe("k3: --preset: unknown preset 'huge'");
    expect(r.stderr).toContain("presets (trunk / expert-cache, in GB):");
  });

  test("malformed budgets are usage errors naming the flag", async () => {
    const cases = [["--trunk-gb", "x"], ["--cache-gb", "-1"], ["--cache-gb", "1e3"]] as const;
    const runs = await Promise.all(cases.map(([flag, value]) => k3Async([tiny, ...prompt, flag, value])));
    for (const [i, [flag, value]] of cases.entries()) {
      const r = runs[i]!;
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(`k3: ${flag} expects a size in GB (a number such as 16 or 0.5), got '${value}'\n`);
    }
  });

  test("speculation and snapshot flags that cannot take effect: exit 2 with one line naming the flag, the same in run, chat and serve", async () => {
    const ultra = "ultra-low-memory mode (--ultra-low-memory or --preset ultra)";
    const cases: [string[], string][] = [
      [["--draft-trunk-gb", "1"], "k3: --draft-trunk-gb is the draft trunk's budget: it needs --draft-trunk DIR\n"],
      [["--spec", "4", "--preset", "ultra"], `k3: ${ultra} decodes serially: it cannot be combined with --spec\n`],
      [["--ultra-low-memory", "--draft-trunk", "d"], `k3: ${ultra} decodes serially: it cannot be combined with --draft-trunk\n`],
    ];
    const runs = cases.flatMap(([flags, line]) =>
      [[tiny, ...prompt, ...flags], ["chat", tiny, "--tok", tiny, "--message", "x", ...flags], ["serve", tiny, "--tok", tiny, ...flags, "--port", "0"]]
        .map(async (argv) => {
          const r = await k3Async(argv, { timeoutMs: 20_000 });
          expect([argv.join(" "), r.code, r.stderr]).toEqual([argv.join(" "), 2, line]);
        }));
    await Promise.all(runs);
    // Its sibling in chat and serve: where snapshots are parked, when none may be.
    const parked = "k3: --snapshot-dir is where parked snapshots go: with --snapshot-disk-gb 0 none are parked (drop one of them)\n";
    for (const command of [["chat", tiny, "--tok", tiny, "--message", "x"], ["serve", tiny, "--tok", tiny, "--port", "0"]]) {
      const r = await k3Async([...command, "--snapshot-disk-gb", "0", "--snapshot-dir", tempDir("snapshots")], { timeoutMs: 20_000 });
      expect([command[0], r.code, r.stderr]).toEqual([command[0], 2, parked]);
    }
  });

  test("--trunk-gb without --trunk cannot take effect: exit 2 naming --trunk, in run, chat and serve; a preset still runs", async () => {
    const line = "k3: --trunk-gb is the streamed trunk's budget: it needs --trunk DIR\n";
    const home = { HOME: tempDir("home") };
    const argvs = [
      [tiny, ...prompt, "--trunk-gb", "4"],
      [tiny, ...prompt, "--trunk-gb", "auto"],
      ["chat", "--demo", "--message", "x", "--trunk-gb", "4"],
      ["serve", "--demo", "--trunk-gb", "0.5", "--port", "0"],
    ];
    // A preset also sets the expert cache, which does apply: it runs and says what it ignored.
    const presetRun = k3Async([tiny, ...prompt, "--gen", "1", "--preset", "laptop"]);
    const runs = await Promise.all(argvs.map((argv) => k3Async(argv, { env: home, timeoutMs: 20_000 })));
    for (const [i, argv] of argvs.entries()) expect([argv.join(" "), runs[i]!.code, runs[i]!.stderr]).toEqual([argv.join(" "), 2, line]);
    const preset = await presetRun;
    expect(preset.code).toBe(0);
    // What it says it ignored is the contract (the results carry no such note).
    expect(preset.stderr).toContain("--preset without --trunk: the trunk is held resident, so only the preset's expert cache budget applies");
  });

  test("--preset auto sizes both budgets from MemAvailable and prints them", async () => {
    const r = await k3Async([tiny, ...prompt, "--gen", "2", "--out", "-", "--preset", "auto"]);
    expect(r.code).toBe(0);
    const results = JSON.parse(r.stdout);
    const { auto, trunk_bytes: trunk, cache_bytes: cache } = results.plan.budgets;
    expect(auto.available_bytes).toBeGreaterThan(auto.reserve_bytes);
    expect([auto.trunk_bytes, auto.cache_bytes]).toEqual([trunk, cache]);
    // The tiny model's whole trunk fits, so auto gives it all (with the widen headroom) and the rest to the cache.
    expect(trunk + cache).toBeCloseTo(auto.available_bytes - auto.reserve_bytes, 0);
    // "prints them": the line is the contract, its figures the results' (GB to two decimals).
    const gb = (bytes: number) => (bytes / 1e9).toFixed(2);
    expect(r.stderr).toContain(`auto budget: ${gb(auto.available_bytes)} GB available, ${gb(auto.reserve_bytes)} GB reserved -> trunk ${gb(trunk)} GB / expert cache ${gb(cache)} GB`);
    expect(results.generated_ids).toEqual(want.generated_ids.slice(0, 2));
  });

  test("the memory plan is printed before the run, with every term", async () => {
    const r = await k3Async([tiny, ...prompt, "--gen", "1", "--out", "-"]);
    const terms = ["trunk (resident)", "embed + lm_head", "expert cache", "recurrent state", "buffers", "KV cache", "process + index"];
    const memory = JSON.parse(r.stdout).plan.memory as { terms: { name: string; bytes: number }[]; total_bytes: number };
    expect(memory.terms.map((t) => t.name)).toEqual(terms);
    expect(memory.terms.every((t) => t.bytes > 0)).toBe(true);
    expect(memory.total_bytes).toBe(memory.terms.reduce((sum, t) => sum + t.bytes, 0));
    // "is printed": the text is the contract here (the figures are checked in the JSON above).
    for (const term of ["memory plan", ...terms, "TOTAL", "available"]) expect(r.stderr).toContain(term);
    expect(r.stderr.indexOf("memory plan")).toBeLessThan(r.stderr.indexOf("STEP"));
    expect(r.stderr).toContain("PEAK RSS for the whole run:");
    expect(r.stderr).toContain("I/O share of wall clock:");
  });
});

describe.concurrent("peak RSS is the run's own", () => {
  // Linux keeps ru_maxrss across execve, and Bun starts children before the exec in the
  // parent's memory: a getrusage figure would be this (large) test process's peak.
  test.skipIf(process.platform !== "linux")("a run started by a parent holding 1 GB reports its own peak, not the parent's", async () => {
    let held: Uint8Array | null = new Uint8Array(1 << 30).fill(1);
    const parentRss = Number(/^VmRSS:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "latin1"))?.[1]) * 1024;
    expect(parentRss).toBeGreaterThan(1 << 30); // else this test could not fail
    const r = await k3Async([tiny, ...prompt, "--gen", "1", "--out", "-"]);
    expect(held[12345]).toBe(1);
    held = null;
    expect(r.code).toBe(0);
    const peak = JSON.parse(r.stdout).peak_rss_bytes as number;
    expect(peak).toBeGreaterThan(10e6);
    expect(peak).toBeLessThan(512 << 20);
  });
});

describe.concurrent("the request ceiling: the model's context length, then the plan", () => {
  test("prompt + gen + 1 may reach max_position_embeddings, not pass it (exit 2 before loading)", async () => {
    const dir = tempDir("context");
    writeTestCheckpoint(dir, { ...tinyConfig(), maxPositionEmbeddings: 16 }, { shape: "flat", shards: 1 });
    const fits = await k3Async([dir, "--ids", "1,2,3", "--gen", "12", "--out", "-"]);
    expect(fits.code).toBe(0);
    const memory = JSON.parse(fits.stdout).plan.memory;
    expect(memory).toMatchObject({ positions: 16, context_length: 16, kv_bytes_per_position: 4 * (32 + 8) * 4 });
    expect(memory.terms.find((t: { name: string }) => t.name === "KV cache").bytes).toBe(16 * 4 * (32 + 8) * 4);
    // Refused: no results, the line is the contract.
    const over = await k3Async([dir, "--ids", "1,2,3", "--gen", "13", "--out", "-"]);
    expect(over.code).toBe(2);
    expect(over.stdout).toBe("");
    expect(over.stderr).toContain("REFUSING: 17 positions (prompt + generated + 1, or the chat context) exceed the model's context length of 16 (max_position_embeddings); at most 16 positions fit");
  });
});

describe.concurrent("a routed expert that cannot be loaded", () => {
  test("makes the run invalid: EXPERT DROP lines, the RUN INVALID block, exit 4", async () => {
    // Every expert of layer 1 fails, so whichever the router picks is dropped.
    const faults = Array.from({ length: 8 }, (_, e) => `1:${e}`).join(",");
    const r = await k3Async([tiny, ...prompt, "--gen", "2", "--out", "-"], { env: { K3_INJECT_EXPERT_FAULT: faults } });
    expect(r.code).toBe(4);
    const results = JSON.parse(r.stdout);
    expect(results.expert_drops).toBeGreaterThan(0);
    expect(results.drops).toHaveLength(results.expert_drops);
    for (const drop of results.drops) {
      expect(drop.layer).toBe(1);
      expect(drop.reason).toContain("file ends before the requested bytes");
    }
    // The lines are the contract here (what a person sees as the tokens go bad), naming the results' drops.
    const first = results.drops[0];
    expect(r.stderr).toContain(`EXPERT DROP: layer ${first.layer} expert ${first.expert} failed to load; this token is CORRUPT (${first.reason})`);
    expect(r.stderr).toContain("RUN INVALID");
    expect(r.stderr).toContain("The token ids above are CORRUPT.");
    expect(r.stderr).toContain(`  ${results.expert_drops} routed expert load(s) failed and were dropped from their MoE sums.`);
  });

  test("a malformed fault specification is refused", async () => {
    const r = await k3Async([tiny, ...prompt], { env: { K3_INJECT_EXPERT_FAULT: "one" } });
    expect(r.code).toBe(2);
  });
});

describe.concurrent("--dump-cache-trace and k3 sim-cache", () => {
  test("a recorded trace replays at many capacities, Belady never below LRU", async () => {
    const dir = tempDir("trace");
    const r = await k3Async([tiny, ...prompt, "--gen", "6", "--recompute", "--out", "-", "--dump-cache-trace", dir]);
    expect(r.code).toBe(0);
    const trace = readTraceFile(join(dir, "expert_trace.bin"));
    // Full recompute: 12+13+...+17 positions x 12 MoE layers x top-2 requests.
    expect(trace.layers.length).toBe((12 + 13 + 14 + 15 + 16 + 17) * 12 * 2);
    expect(existsSync(join(dir, "expert_hist.json"))).toBe(true);
    const hist = JSON.parse(readFileSync(join(dir, "expert_hist.json"), "utf8"));
    expect(Object.values(hist.counts as Record<string, number>).reduce((a, b) => a + b, 0)).toBe(trace.layers.length);
    const sim = await k3Async(["sim-cache", join(dir, "expert_trace.bin"), "--slots", "17,24,32,48,64", "--expert-bytes", "16384"]);
    expect(sim.code).toBe(0);
    const rows = sim.stdout.split("\n").filter((l) => /^[\d.]+ GB\s+\d+\s+[\d.]+%\s+[\d.]+%/.test(l));
    expect(rows.length).toBe(5);
    for (const row of rows) {
      const [lru, belady] = [...row.matchAll(/([\d.]+)%/g)].map((m) => Number(m[1]));
      expect(belady!).toBeGreaterThanOrEqual(lru!);
    }
  });

  // A refusal: its line is the contract.
  test("--dump-cache-trace into a missing directory is refused", async () => {
    const r = await k3Async([tiny, ...prompt, "--dump-cache-trace", "/nonexistent/k3-trace"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe("k3: --dump-cache-trace /nonexistent/k3-trace: directory does not exist\n");
  });
});
