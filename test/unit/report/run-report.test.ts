/**
 * The run report (src/report/run-report.ts) as a function of a RunResult built here, not of a
 * run: every figure it prints is the input's (change the input, the line follows), the blocks
 * that belong to some runs only (cache, prefill, speculation, hybrid, state files, ultra, the
 * streamed trunk, decoding) appear exactly when their inputs do, a run with no steps still
 * reports, a dropped expert gives the RUN INVALID verdict, and the figures both the report and
 * the JSON results (src/report/results.ts) carry agree. The expected text is written out here,
 * from the inputs: the report's formatting is what is under test.
 */
import { describe, expect, test } from "bun:test";
import type { EnginePlan, ExpertStepStats, RunResult, StepResult, TrunkStats } from "../../../src/engine/result.ts";
import type { TrunkPlan } from "../../../src/plan/trunk-plan.ts";
import { resultJson } from "../../../src/report/results.ts";
import {
  dropLine, expertCacheLine, hybridBanner, loadLines, runInvalidReport, runReport, runWarnings, speculationBanner, teacherForcedLines, verdictReport,
} from "../../../src/report/run-report.ts";

const stats = (s: Partial<ExpertStepStats> = {}): ExpertStepStats => ({
  picks: 0, requests: 0, residentHits: 0, reads: 0, evictions: 0, bytesRead: 0, readSeconds: 0, waitSeconds: 0, drops: 0, ...s,
});

const trunkStats = (s: Partial<TrunkStats> = {}): TrunkStats => ({
  binds: 0, hits: 0, reads: 0, bytesRead: 0, aheadBytes: 0, readSeconds: 0, waitSeconds: 0, bytesDecoded: 0, codecSeconds: 0, ...s,
});

function plan(p: Partial<EnginePlan> = {}): EnginePlan {
  return {
    modelDir: "/models/tiny", layerCount: 13, modelLayers: 13, tensorCount: 900, shardCount: 1, indexSeconds: 0.01,
    budgets: { trunkBytes: 0, cacheBytes: 1e9, preset: undefined, auto: undefined, ultraLowMemory: false },
    trunk: { mode: "resident", bytes: 3_000_000 },
    trunkPayloadBytes: 3_000_000,
    expertCache: { slotBytes: 20_480, slots: 96, requestedSlots: 48_828, minimumSlots: 3, totalExperts: 96 },
    memory: { terms: [{ name: "KV cache", bytes: 1000 }], totalBytes: 1000, positions: 32, contextLength: 4096, kvBytesPerPosition: 10, bytesPerPosition: 20 },
    availableBytes: 8e9, positions: 32, prefillChunk: 64, draft: undefined, ultra: undefined, hiddenSize: 128,
    kernels: { isa: "scalar", description: "scalar reference, plain loops", runnable: ["scalar"], threads: 1, vectorPorts: "besideFma" },
    ...p,
  };
}

const step = (i: number, seconds: number, experts: Partial<ExpertStepStats> = {}): StepResult => ({ step: i, token: 100 + i, seconds, experts: stats(experts) });

/** A run of `steps` (their seconds add up to decodeSeconds), resident, greedy, nothing special. */
function result(r: Partial<RunResult> = {}): RunResult {
  const steps = r.steps ?? [step(0, 0.5), step(1, 0.25), step(2, 0.25)];
  const decodeSeconds = steps.reduce((sum, s) => sum + s.seconds, 0);
  return {
    promptIds: [1, 2, 3, 4], generatedIds: steps.map((s) => s.token), fullIds: [1, 2, 3, 4, ...steps.map((s) => s.token)],
    generatedText: null, finishReason: "length", mode: "incremental",
    sampling: { temperature: 0, topP: 1, topK: 0, minP: 0, seed: 1, presencePenalty: 0, frequencyPenalty: 0 },
    layers: 13, layersRequested: 13, secondsPerToken: steps.length > 0 ? decodeSeconds / steps.length : 0, decodeSeconds, wallSeconds: decodeSeconds + 1,
    peakRssBytes: 123_450_000, peakRssAfterLoadBytes: 100_000_000, loadSeconds: 0.2, expertDrops: 0, expertBytesRead: 0, trunkBytesRead: 0,
    steps, plan: plan(), trunkStats: undefined, experts: { total: stats(), residentSlots: 0 }, ioShare: 0, drops: [], badScaleBytes: 0, warnings: [],
    speculation: undefined, hybrid: undefined, ultraLowMemory: false, embeddingBytesRead: 0, lmHeadBytesRead: 0, tableReadSeconds: 0,
    resumedFrom: undefined, savedState: undefined,
    ...r,
  };
}

const lineOf = (report: string, start: string): string => {
  const found = report.split("\n").find((l) => l.trimStart().startsWith(start));
  if (found === undefined) throw new Error(`no line starting ${JSON.stringify(start)} in:\n${report}`);
  return found;
};

const streamedPlan = (pinned: number, ringSlots: number): TrunkPlan => ({
  pinned, ringSlots, slotBytes: 1, pinnedBytes: 1, ringBytes: 1, bytes: 2, raised: false, twoSlotBudget: undefined,
});

describe("the summary", () => {
  test("tokens and s/token are the steps' count and their seconds' mean", () => {
    expect(lineOf(runReport(result()), "3 tokens")).toBe("3 tokens in 1.00 s, 0.333 s/token average");
    const four = result({ steps: [step(0, 2), step(1, 1), step(2, 1), step(3, 0.5)] });
    expect(lineOf(runReport(four), "4 tokens")).toBe("4 tokens in 4.50 s, 1.125 s/token average");
    // The summary follows a rule line.
    expect(runReport(four).split("\n").slice(0, 2)).toEqual(["-".repeat(68), "4 tokens in 4.50 s, 1.125 s/token average"]);
  });

  test("zero steps: no average, no cache block, no prefill block, and the rest still reported", () => {
    const report = runReport(result({ steps: [], generatedIds: [] }));
    expect(lineOf(report, "0 tokens")).toBe("0 tokens in 0.00 s, n/a s/token average");
    expect(report).not.toContain("cache [final step]");
    expect(report).not.toContain("prefill:");
    expect(lineOf(report, "I/O share")).toBe("I/O share of wall clock: 0.0%  (waiting on trunk 0.00 s + experts 0.00 s of 0.00 s)");
    expect(lineOf(report, "both figures")).toContain("WHOLE-RUN totals over 0 steps");
    expect(lineOf(report, "experts, whole run")).toBe("  experts, whole run: 0.00 GB read | 0 of 0 requests retained in RAM (0.0%) | 0 evictions");
  });

  test("peak RSS, layers completed and drops are the result's", () => {
    const report = runReport(result({ peakRssBytes: 2_346_000_000, layers: 7, expertDrops: 2, plan: plan({ modelLayers: 13 }) }));
    expect(lineOf(report, "PEAK RSS")).toBe("PEAK RSS for the whole run: 2.35 GB   <- quote this, not the plan");
    expect(lineOf(report, "layers completed")).toBe("layers completed: 7/13; routed expert drops: 2");
    expect(lineOf(runReport(result({ peakRssBytes: 999 })), "PEAK RSS")).toBe("PEAK RSS for the whole run: 999 B   <- quote this, not the plan");
  });

  test("the generated text between rules, control characters made visible; none for an --ids run", () => {
    const report = runReport(result({ generatedText: "hi\u001b[2Jthere\nnext\tline" }));
    expect(report).toContain("\n--- generated text ---\nhi\\x1b[2Jthere\nnext\tline\n----------------------\n");
    expect(report).not.toContain("\u001b");
    expect(runReport(result())).not.toContain("generated text");
  });
});

describe("the expert cache and the I/O share", () => {
  test("the final step's figures and the TRUE hit rate", () => {
    const last = { requests: 40, residentHits: 30, reads: 10, evictions: 4, bytesRead: 1_230_000_000, readSeconds: 0.75 };
    const r = result({ steps: [step(0, 1), step(1, 1, last)], experts: { total: stats({ requests: 100 }), residentSlots: 17 } });
    const report = runReport(r);
    expect(lineOf(report, "slots")).toBe("  slots        : 96 of 20.48 KB = 1.97 MB arena (17 resident)");
    expect(lineOf(report, "requests")).toBe("  requests     : 40  resident hits 30 (75.0%)  read 10  evictions 4");
    expect(lineOf(report, "TRUE resident hit rate")).toBe("  TRUE resident hit rate 75.0%: experts already in RAM before the token needed them");
    expect(lineOf(report, "read from disk")).toBe("  read from disk: 1.23 GB in 0.75 s of device time");
    // Only the last step counts: the first step's figures appear nowhere.
    const other = runReport(result({ steps: [step(0, 1, { requests: 7, residentHits: 7 }), step(1, 1, last)] }));
    expect(lineOf(other, "requests")).toBe(lineOf(report, "requests"));
  });

  test("the I/O share is the result's, with each wait and the device seconds beside it", () => {
    const r = result({
      ioShare: 0.4567, trunkStats: trunkStats({ waitSeconds: 0.25, readSeconds: 0.5 }),
      experts: { total: stats({ waitSeconds: 0.5, readSeconds: 1.5, bytesRead: 4_560_000_000, requests: 200, evictions: 50 }), residentSlots: 3 },
    });
    const report = runReport(r);
    expect(lineOf(report, "I/O share")).toBe("I/O share of wall clock: 45.7%  (waiting on trunk 0.25 s + experts 0.50 s of 1.00 s)");
    expect(lineOf(report, "both figures")).toBe("  both figures are WHOLE-RUN totals over 3 steps; device time of the reads: trunk 0.50 s, experts 1.50 s (concurrent reads overlap)");
    expect(lineOf(report, "experts, whole run")).toBe("  experts, whole run: 4.56 GB read | 150 of 200 requests retained in RAM (75.0%) | 50 evictions");
    // Ultra-low-memory mode adds the model tables' wait.
    const ultra = runReport(result({ ultraLowMemory: true, tableReadSeconds: 0.25 }));
    expect(lineOf(ultra, "I/O share")).toBe("I/O share of wall clock: 0.0%  (waiting on trunk 0.00 s + experts 0.00 s + model tables 0.25 s of 1.00 s)");
    expect(runReport(result({ ultraLowMemory: false, tableReadSeconds: 0.125 }))).not.toContain("model tables");
  });
});

describe("the streamed trunk", () => {
  const streamed = (s: Partial<TrunkStats>, pinned = 5, slots = 2, layers = 13) =>
    runReport(result({ layers, plan: plan({ trunk: { mode: "streamed", plan: streamedPlan(pinned, slots), packedBytes: 1 } }), trunkStats: trunkStats(s) }));

  test("the plan's pinned layers and slots, and every counter", () => {
    const report = streamed({ binds: 26, hits: 5, reads: 21, bytesRead: 2_000_000_000, aheadBytes: 1_500_000_000, readSeconds: 4, waitSeconds: 1.5 });
    const block = report.slice(report.indexOf("trunk [final]"));
    expect(block.split("\n")).toEqual([
      "trunk [final]",
      "  pinned 5/13 layers, ring 2 slots",
      "  binds 26, hits 5 (19.2%), reads 21",
      "  read 2.00 GB in 4.00 s (500 MB/s), 1.50 GB of it ahead of need",
      "  waited 1.50 s for reads; 2.50 s of device time overlapped compute on the reader thread",
    ]);
    expect(lineOf(streamed({}, 13, 0, 9), "pinned")).toBe("  pinned 13/9 layers, ring 0 slots");
  });

  test("no read time: no rate; waits longer than the reads: no negative overlap", () => {
    const report = streamed({ bytesRead: 0, readSeconds: 0, waitSeconds: 0.5 });
    expect(lineOf(report, "read 0 B")).toBe("  read 0 B in 0.00 s (- MB/s), 0 B of it ahead of need");
    expect(lineOf(report, "waited")).toBe("  waited 0.50 s for reads; 0.00 s of device time overlapped compute on the reader thread");
  });

  test("a compressed trunk adds what it decoded; a plain one does not", () => {
    expect(lineOf(streamed({ bytesDecoded: 3_000_000_000, codecSeconds: 1.5 }), "decoded")).toBe("  decoded 3.00 GB of compressed layers in 1.50 s (2.00 GB/s)");
    expect(lineOf(streamed({ bytesDecoded: 3_000_000_000, codecSeconds: 0 }), "decoded")).toBe("  decoded 3.00 GB of compressed layers in 0.00 s (- GB/s)");
    expect(streamed({ bytesDecoded: 0 })).not.toContain("decoded");
  });

  test("a resident trunk has no trunk block, even with statistics; a streamed one without them neither", () => {
    expect(runReport(result({ trunkStats: trunkStats({ binds: 1 }) }))).not.toContain("trunk [final]");
    expect(runReport(result({ plan: plan({ trunk: { mode: "streamed", plan: streamedPlan(1, 1), packedBytes: 1 } }), trunkStats: undefined }))).not.toContain("trunk [final]");
  });
});

describe("prefill, speculation, hybrid, state files", () => {
  test("the prefill: prompt ids, chunks of the plan's size, step 0's loads", () => {
    const prompt = Array.from({ length: 70 }, (_, i) => i);
    const r = result({
      promptIds: prompt, plan: plan({ prefillChunk: 7 }),
      steps: [step(0, 1.4, { picks: 1680, requests: 900, reads: 96, bytesRead: 2_000_000_000 }), step(1, 0.1)],
    });
    const report = runReport(r);
    expect(lineOf(report, "prefill")).toBe("prefill: 70 prompt ids in 10 chunk(s) of up to 7, 1.40 s (0.0200 s per prompt id)");
    expect(lineOf(report, "expert picks")).toBe("  expert picks 1680 -> 900 distinct loads (the union per chunk and layer), 96 read from disk, 2.00 GB (0.20 GB per chunk)");
    expect(lineOf(runReport({ ...r, plan: plan({ prefillChunk: 64 }) }), "prefill")).toContain("in 2 chunk(s) of up to 64");
    // Recompute has no prefill of its own: every step feeds the whole sequence.
    expect(runReport({ ...r, mode: "recompute" })).not.toContain("prefill:");
  });

  test("speculation: sweeps, drafted, accepted, emitted, and the rest decoded one at a time", () => {
    const r = result({ generatedIds: Array.from({ length: 10 }, (_, i) => i), speculation: { maxDraft: 4, sweeps: 4, drafted: 10, accepted: 5, emitted: 7, replays: 1 } });
    expect(lineOf(runReport(r), "speculative decode")).toBe(
      "speculative decode: 4 verification sweeps; 10 drafted, 5 accepted (50.0%), 7 emitted; per sweep 2.50 drafted, 1.25 accepted, 1.75 emitted; " +
        "3 tokens decoded one at a time; 1 sweeps replayed what they kept (a partial acceptance)",
    );
    const none = result({ speculation: { maxDraft: 4, sweeps: 0, drafted: 0, accepted: 0, emitted: 0, replays: 0 } });
    expect(lineOf(runReport(none), "speculative decode")).toBe(
      "speculative decode: 0 verification sweeps; 0 drafted, 0 accepted (0.0%), 0 emitted; per sweep 0 drafted, 0 accepted, 0 emitted; " +
        "3 tokens decoded one at a time; 0 sweeps replayed what they kept (a partial acceptance)",
    );
    expect(runReport(result())).not.toContain("speculative decode");
    expect(speculationBanner(6)).toBe("speculative decode: up to 6 drafted tokens per sweep, n-gram lookup, verified batched");
  });

  test("hybrid decode: rounds, the draft model, its routing and its trunk", () => {
    const r = result({
      speculation: { maxDraft: 4, sweeps: 4, drafted: 12, accepted: 9, emitted: 12, replays: 0 },
      hybrid: {
        draftTrunk: "/d", budgetBytes: 2e9,
        drafter: { proposals: 4, proposed: 12, fedIds: 30, restores: 2, rebuilds: 0, seconds: 0.5 },
        experts: { picks: 200, served: 150, skipped: 50, sharedOnly: 3 }, expertReadsWhileDrafting: 0,
        trunkStats: trunkStats({ reads: 40, bytesRead: 5_000_000, readSeconds: 0.25, waitSeconds: 0.75 }),
      },
    });
    const report = runReport(r);
    expect(lineOf(report, "hybrid decode")).toBe("hybrid decode: 4 rounds, 12 drafted, 9 accepted (75.0%), mean accepted run 2.25");
    expect(lineOf(report, "draft model")).toBe(
      "  draft model: fed 30 ids, 2 restores to its snapshot, 0.50 s drafting; routing: 200 picks, 150 served from the cache (75.0%), 50 skipped (not resident), 3 with shared experts only; expert reads while drafting: 0",
    );
    expect(lineOf(report, "draft trunk")).toBe("  draft trunk: 40 reads, 5.00 MB in 0.25 s, waited 0.75 s");
    expect(report).not.toContain("verification sweeps"); // the hybrid block replaces the speculation line
    expect(hybridBanner({ dir: "/d", budgetBytes: 2.5e9, plan: streamedPlan(1, 1), packedBytes: 1 }, 4)[0]).toBe(
      "hybrid decode: draft trunk /d (2.50 GB budget) proposes up to 4 tokens per sweep;",
    );
  });

  test("the state file restored and the one written", () => {
    const report = runReport(result({
      resumedFrom: { path: "/s/a.k3st", priorPositions: 15, priorIds: 16, bytes: 60_000, seconds: 0.25 },
      savedState: { path: "/s/b.k3st", bytes: 98_000, positions: 20, seconds: 0.5 },
    }));
    expect(lineOf(report, "restored")).toBe("restored /s/a.k3st (60.00 KB, 15 positions) in 0.25 s");
    expect(lineOf(report, "wrote")).toBe("wrote /s/b.k3st (98.00 KB, 20 positions) in 0.50 s");
    expect(runReport(result())).not.toMatch(/^(restored|wrote) /m);
  });
});

describe("the verdict, warnings and the lines around the run", () => {
  test("no drops: no verdict; drops: RUN INVALID, the tokens called corrupt, five named and the rest counted", () => {
    expect(verdictReport(result())).toBeUndefined();
    const drops = Array.from({ length: 7 }, (_, i) => ({ layer: 1 + i, expert: 2 * i, reason: `reason ${i}` }));
    const verdict = verdictReport(result({ drops, expertDrops: 7 }))!;
    expect(verdict.split("\n")).toEqual([
      "RUN INVALID",
      "  7 routed expert load(s) failed and were dropped from their MoE sums.",
      "  The token ids above are CORRUPT. Re-run; if it repeats, suspect the shard set or the storage.",
      "  layer 1 expert 0: reason 0", "  layer 2 expert 2: reason 1", "  layer 3 expert 4: reason 2", "  layer 4 expert 6: reason 3", "  layer 5 expert 8: reason 4",
      "  ... and 2 more",
    ]);
    expect(runInvalidReport(drops.slice(0, 5))).not.toContain("more");
    expect(dropLine(drops[2]!)).toBe("EXPERT DROP: layer 3 expert 4 failed to load; this token is CORRUPT (reason 2)");
  });

  test("warnings: the run's, and NaN scale bytes when there were any", () => {
    expect(runWarnings(result({ warnings: ["w1"] }))).toEqual(["w1"]);
    expect(runWarnings(result({ warnings: ["w1"], badScaleBytes: 3 }))).toEqual(["w1", "3 MXFP4 scale bytes of 255 (NaN in OCP MX) were met and treated as a zero multiplier"]);
  });

  test("the expert cache line: its slots, raised to the minimum or capped at every expert", () => {
    expect(expertCacheLine({ slotBytes: 1_000_000, slots: 10, requestedSlots: 10, minimumSlots: 3, totalExperts: 40 }))
      .toBe("expert cache: 10 slots x 1.00 MB = 10.00 MB (25.0% of the 40 routed experts)");
    expect(expertCacheLine({ slotBytes: 1_000_000, slots: 3, requestedSlots: 0, minimumSlots: 3, totalExperts: 40 }))
      .toBe("expert cache: 3 slots x 1.00 MB = 3.00 MB (7.5% of the 40 routed experts) (raised from 0 to the top-k + 1 minimum)");
    expect(expertCacheLine({ slotBytes: 1_000_000, slots: 40, requestedSlots: 500, minimumSlots: 3, totalExperts: 40 }))
      .toBe("expert cache: 40 slots x 1.00 MB = 40.00 MB (100.0% of the 40 routed experts) (every expert fits; the rest of the budget is not reserved)");
  });

  test("after loading: the resident trunk and its rate, the ultra lines, the measured peak, the cache", () => {
    const lines = loadLines(plan({ trunkPayloadBytes: 3_000_000_000, layerCount: 13 }), 2, 3_500_000_000);
    expect(lines).toEqual([
      "resident trunk: 3.00 GB for 13 layers, loaded in 2.00 s, 1.50 GB/s",
      "peak RSS after loading weights: 3.50 GB  (the plan above is a forecast, this is measured)",
      expertCacheLine(plan().expertCache),
    ]);
    expect(loadLines(plan(), 0, 1)[0]).toBe("resident trunk: 3.00 MB for 13 layers, loaded in 0.00 s");
    const ultra = loadLines(plan({
      trunk: { mode: "streamed", plan: streamedPlan(0, 1), packedBytes: 1 },
      ultra: { rowsPerChunk: 8192, chunks: 4, residentBytes: 4_200_000, oneRecurrentSlot: true, recurrentSlotBytes: 6_700_000 },
    }), 1, 1);
    expect(ultra.some((l) => l.startsWith("resident trunk"))).toBe(false);
    expect(ultra[0]).toBe("final norms: 1.02 KB resident; embedding and lm_head streamed: rows read as tokens need them, the LM head in 4 chunk(s) of 8192 rows through one buffer (4.20 MB in all)");
    expect(ultra[1]).toBe("recurrent state: one 6.70 MB slot, cleared and reused across 13 layers");
  });

  test("the teacher-forced lines: the agreement, then the mismatches only", () => {
    const ids = [5, 6, 7, 8, 9];
    expect(teacherForcedLines({ predicted: [6, 0, 8, 1], matches: 2, positions: 4 }, ids, 0.5)).toEqual([
      "teacher-forced agreement: 2/4 positions (50.00%) in 0.50 s",
      "  per-position (p=predicted a=actual): [1 p=0 a=7] [3 p=1 a=9]",
    ]);
    expect(teacherForcedLines({ predicted: [6, 7, 8, 9], matches: 4, positions: 4 }, ids, 0)[1]).toBe("  per-position (p=predicted a=actual): (no mismatches)");
  });
});

describe("the report and the JSON results agree", () => {
  test("what both carry: tokens, s/token, peak RSS, layers, drops, trunk reads", () => {
    const r = result({
      steps: [step(0, 0.3), step(1, 0.2), step(2, 0.2), step(3, 0.1)], peakRssBytes: 456_000_000, layers: 11, expertDrops: 1,
      drops: [{ layer: 3, expert: 1, reason: "x" }],
      plan: plan({ trunk: { mode: "streamed", plan: streamedPlan(4, 2), packedBytes: 1 } }),
      trunkStats: trunkStats({ binds: 44, hits: 16, reads: 28, bytesRead: 7_000_000, aheadBytes: 6_000_000, readSeconds: 0.5 }),
    });
    const json = JSON.parse(resultJson(r));
    const report = runReport(r);
    const summary = /^(\d+) tokens in ([\d.]+) s, ([\d.]+) s\/token average$/m.exec(report)!;
    expect(Number(summary[1])).toBe(json.steps.length);
    expect(Number(summary[1])).toBe(json.generated_ids.length);
    expect(Number(summary[2])).toBe(Number(json.steps.reduce((s: number, x: { seconds: number }) => s + x.seconds, 0).toFixed(2)));
    // The JSON rounds to 4 dp, the report to 3: the same figure.
    expect(json.seconds_per_token).toBe(0.2);
    expect(Number(summary[3])).toBe(Number(json.seconds_per_token.toFixed(3)));
    expect(lineOf(report, "PEAK RSS")).toContain(`${(json.peak_rss_bytes / 1e6).toFixed(2)} MB`);
    expect(lineOf(report, "layers completed")).toBe(`layers completed: ${json.layers}/${json.plan.model_layers}; routed expert drops: ${json.expert_drops}`);
    const t = json.trunk_stats;
    expect(lineOf(report, "binds")).toBe(`  binds ${t.binds}, hits ${t.hits} (${((100 * t.hits) / t.binds).toFixed(1)}%), reads ${t.reads}`);
    expect(lineOf(report, "read 7")).toStartWith(`  read ${(t.bytes_read / 1e6).toFixed(2)} MB in ${t.read_seconds.toFixed(2)} s`);
    expect(lineOf(report, "pinned")).toBe(`  pinned ${json.plan.trunk.plan.pinned}/${json.layers} layers, ring ${json.plan.trunk.plan.ring_slots} slots`);
  });
});
