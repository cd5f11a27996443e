/**
 * The reports around a run (runtime.md 6.4, 7.3, 7.4): what loading did, and after the run the
 * summary, the generated text, the expert cache, the I/O share of the wall clock, the trunk, and
 * the verdict when an expert had to be dropped. Each is a function of the RunResult (or of the
 * plan, before the run); text for people, on stderr.
 */
import type { DraftPlan, EnginePlan, ExpertCachePlan, ExpertDrop, ExpertStepStats, RunResult, TrunkStats } from "../engine/result.ts";
import type { TrunkPlan } from "../plan/trunk-plan.ts";
import { pct } from "./format.ts";
import { formatBytes, formatGb } from "../units.ts";
import { summaryLine } from "./table.ts";
import { visibleText } from "./visible-text.ts";

export function expertCacheLine(plan: ExpertCachePlan): string {
  const raised = plan.requestedSlots < plan.minimumSlots ? ` (raised from ${plan.requestedSlots} to the top-k + 1 minimum)` : "";
  const capped = plan.slots === plan.totalExperts && plan.requestedSlots > plan.totalExperts ? " (every expert fits; the rest of the budget is not reserved)" : "";
  return `expert cache: ${plan.slots} slots x ${formatBytes(plan.slotBytes)} = ${formatBytes(plan.slots * plan.slotBytes)} (${pct(plan.slots, plan.totalExperts)}% of the ${plan.totalExperts} routed experts)${raised}${capped}`;
}

function cacheReport(plan: ExpertCachePlan, step: ExpertStepStats, residentSlots: number): string {
  return [
    "cache [final step]",
    `  slots        : ${plan.slots} of ${formatBytes(plan.slotBytes)} = ${formatBytes(plan.slots * plan.slotBytes)} arena (${residentSlots} resident)`,
    `  requests     : ${step.requests}  resident hits ${step.residentHits} (${pct(step.residentHits, step.requests)}%)  read ${step.reads}  evictions ${step.evictions}`,
    `  TRUE resident hit rate ${pct(step.residentHits, step.requests)}%: experts already in RAM before the token needed them`,
    `  read from disk: ${formatGb(step.bytesRead)} GB in ${step.readSeconds.toFixed(2)} s of device time`,
  ].join("\n");
}

/**
 * How much of the decode wall clock waited on the disk. Waiting time, not device time: up to
 * top-k expert reads run at once and the trunk reader overlaps compute, so summed device
 * seconds can exceed the wall clock; they are shown beside it.
 */
function ioShareReport(result: RunResult): string {
  const { trunkStats: trunk, decodeSeconds } = result;
  const { total } = result.experts;
  const steps = result.steps.length;
  const trunkWait = trunk?.waitSeconds ?? 0;
  const share = 100 * result.ioShare;
  const retained = total.requests - total.evictions;
  const tables = result.ultraLowMemory ? ` + model tables ${result.tableReadSeconds.toFixed(2)} s` : "";
  return [
    `I/O share of wall clock: ${share.toFixed(1)}%  (waiting on trunk ${trunkWait.toFixed(2)} s + experts ${total.waitSeconds.toFixed(2)} s${tables} of ${decodeSeconds.toFixed(2)} s)`,
    `  both figures are WHOLE-RUN totals over ${steps} steps; device time of the reads: trunk ${(trunk?.readSeconds ?? 0).toFixed(2)} s, experts ${total.readSeconds.toFixed(2)} s (concurrent reads overlap)`,
    `  experts, whole run: ${formatGb(total.bytesRead)} GB read | ${retained} of ${total.requests} requests retained in RAM (${pct(retained, total.requests)}%) | ${total.evictions} evictions`,
  ].join("\n");
}

function trunkReport(plan: TrunkPlan, stats: TrunkStats, layerCount: number): string {
  const overlapped = Math.max(0, stats.readSeconds - stats.waitSeconds);
  const rate = stats.readSeconds > 0 ? (stats.bytesRead / 1e6 / stats.readSeconds).toFixed(0) : "-";
  return [
    "trunk [final]",
    `  pinned ${plan.pinned}/${layerCount} layers, ring ${plan.ringSlots} slots`,
    `  binds ${stats.binds}, hits ${stats.hits} (${pct(stats.hits, stats.binds)}%), reads ${stats.reads}`,
    `  read ${formatBytes(stats.bytesRead)} in ${stats.readSeconds.toFixed(2)} s (${rate} MB/s), ${formatBytes(stats.aheadBytes)} of it ahead of need`,
    `  waited ${stats.waitSeconds.toFixed(2)} s for reads; ${overlapped.toFixed(2)} s of device time overlapped compute on the reader thread`,
    ...(stats.bytesDecoded > 0
      ? [`  decoded ${formatBytes(stats.bytesDecoded)} of compressed layers in ${stats.codecSeconds.toFixed(2)} s (${stats.codecSeconds > 0 ? (stats.bytesDecoded / 1e9 / stats.codecSeconds).toFixed(2) : "-"} GB/s)`]
      : []),
  ].join("\n");
}

export function runInvalidReport(drops: readonly ExpertDrop[]): string {
  const shown = drops.slice(0, 5).map((d) => `  layer ${d.layer} expert ${d.expert}: ${d.reason}`);
  return [
    "RUN INVALID",
    `  ${drops.length} routed expert load(s) failed and were dropped from their MoE sums.`,
    "  The token ids above are CORRUPT. Re-run; if it repeats, suspect the shard set or the storage.",
    ...shown,
    ...(drops.length > 5 ? [`  ... and ${drops.length - 5} more`] : []),
  ].join("\n");
}

/** After loading: what the trunk took (resident), the measured peak so far, the expert cache. */
export function loadLines(plan: EnginePlan, loadSeconds: number, peakRssAfterLoadBytes: number): string[] {
  const lines: string[] = [];
  if (plan.trunk.mode === "resident") {
    const rate = loadSeconds > 0 ? `, ${(plan.trunkPayloadBytes / 1e9 / loadSeconds).toFixed(2)} GB/s` : "";
    lines.push(`resident trunk: ${formatBytes(plan.trunkPayloadBytes)} for ${plan.layerCount} layers, loaded in ${loadSeconds.toFixed(2)} s${rate}`);
  }
  const u = plan.ultra;
  if (u) {
    lines.push(`final norms: ${formatBytes(2 * plan.hiddenSize * 4)} resident; embedding and lm_head streamed: rows read as tokens need them, ` +
      `the LM head in ${u.chunks} chunk(s) of ${u.rowsPerChunk} rows through one buffer (${formatBytes(u.residentBytes)} in all)`);
    if (u.oneRecurrentSlot) lines.push(`recurrent state: one ${formatBytes(u.recurrentSlotBytes)} slot, cleared and reused across ${plan.layerCount} layers`);
  }
  lines.push(`peak RSS after loading weights: ${formatBytes(peakRssAfterLoadBytes)}  (the plan above is a forecast, this is measured)`);
  lines.push(expertCacheLine(plan.expertCache));
  return lines;
}

/** The generated text between rules, or nothing for an --ids run. */
function textBlock(text: string | null): string[] {
  return text === null ? [] : [`\n--- generated text ---\n${visibleText(text)}\n----------------------\n`];
}

/**
 * The prompt's prefill (step 0, incremental): its chunks, how many expert picks they made and
 * how many distinct experts they loaded (the union per chunk and layer), and what it read.
 */
function prefillReport(result: RunResult): string | undefined {
  const first = result.steps[0];
  if (!first || result.mode !== "incremental") return undefined;
  const prompt = result.promptIds.length;
  const chunk = result.plan.prefillChunk;
  const chunks = Math.ceil(prompt / chunk);
  const e = first.experts;
  return [
    `prefill: ${prompt} prompt ids in ${chunks} chunk(s) of up to ${chunk}, ${first.seconds.toFixed(2)} s (${(first.seconds / prompt).toFixed(4)} s per prompt id)`,
    `  expert picks ${e.picks} -> ${e.requests} distinct loads (the union per chunk and layer), ${e.reads} read from disk, ` +
      `${formatGb(e.bytesRead)} GB (${formatGb(e.bytesRead / chunks)} GB per chunk)`,
  ].join("\n");
}

/** Said before the first step of a speculative run (runtime.md 9.2). */
export function speculationBanner(maxDraft: number): string {
  return `speculative decode: up to ${maxDraft} drafted tokens per sweep, n-gram lookup, verified batched`;
}

/** Said before the first step of a hybrid run (runtime.md 9.3). */
export function hybridBanner(draft: DraftPlan, maxDraft: number): string[] {
  return [
    `hybrid decode: draft trunk ${draft.dir} (${formatGb(draft.budgetBytes)} GB budget) proposes up to ${maxDraft} tokens per sweep;`,
    "  the exact model verifies every token before it is emitted (the draft routes only to experts already cached, never reading one)",
  ];
}

/**
 * What the draft model did (runtime.md 7.3 line 2): rounds, drafted and accepted ids and the mean
 * accepted run per round; then its cache-only routing and the expert reads while it drafted
 * (zero: it never reads one); then its trunk stream.
 */
function hybridReport(result: RunResult): string | undefined {
  const h = result.hybrid;
  const s = result.speculation;
  if (!h || !s) return undefined;
  const e = h.experts;
  return [
    `hybrid decode: ${s.sweeps} rounds, ${s.drafted} drafted, ${s.accepted} accepted (${pct(s.accepted, s.drafted)}%), mean accepted run ${(s.sweeps > 0 ? s.accepted / s.sweeps : 0).toFixed(2)}`,
    `  draft model: fed ${h.drafter.fedIds} ids, ${h.drafter.restores} restores to its snapshot, ${h.drafter.seconds.toFixed(2)} s drafting; ` +
      `routing: ${e.picks} picks, ${e.served} served from the cache (${pct(e.served, e.picks)}%), ${e.skipped} skipped (not resident), ` +
      `${e.sharedOnly} with shared experts only; expert reads while drafting: ${h.expertReadsWhileDrafting}`,
    `  draft trunk: ${h.trunkStats.reads} reads, ${formatBytes(h.trunkStats.bytesRead)} in ${h.trunkStats.readSeconds.toFixed(2)} s, waited ${h.trunkStats.waitSeconds.toFixed(2)} s`,
  ].join("\n");
}

/** What speculation did, per sweep: drafted, accepted, emitted. */
function speculationReport(result: RunResult): string | undefined {
  const s = result.speculation;
  if (!s || result.hybrid) return hybridReport(result);
  const perSweep = (n: number) => (s.sweeps > 0 ? (n / s.sweeps).toFixed(2) : "0");
  const emitted = s.emitted;
  const rate = pct(s.accepted, s.drafted);
  return `speculative decode: ${s.sweeps} verification sweeps; ${s.drafted} drafted, ${s.accepted} accepted (${rate}%), ` +
    `${emitted} emitted; per sweep ${perSweep(s.drafted)} drafted, ${perSweep(s.accepted)} accepted, ${perSweep(emitted)} emitted; ` +
    `${result.generatedIds.length - emitted} tokens decoded one at a time; ${s.replays} sweeps replayed what they kept (a partial acceptance)`;
}

/** The teacher-forced check's lines (runtime.md 9.4): the agreement, then the mismatches only. */
export function teacherForcedLines(check: { predicted: number[]; matches: number; positions: number }, ids: readonly number[], seconds: number): string[] {
  const mismatches = check.predicted.flatMap((p, i) => (p === ids[i + 1] ? [] : [`[${i} p=${p} a=${ids[i + 1]}]`]));
  return [
    `teacher-forced agreement: ${check.matches}/${check.positions} positions (${((100 * check.matches) / check.positions).toFixed(2)}%) in ${seconds.toFixed(2)} s`,
    `  per-position (p=predicted a=actual): ${mismatches.length > 0 ? mismatches.join(" ") : "(no mismatches)"}`,
  ];
}

/** Everything printed after the last step, in order (the verdict comes separately, last). */
export function runReport(result: RunResult): string {
  const { plan } = result;
  const last = result.steps.at(-1);
  const lines = [
    summaryLine(result.steps.length, result.decodeSeconds),
    ...textBlock(result.generatedText),
    `PEAK RSS for the whole run: ${formatBytes(result.peakRssBytes)}   <- quote this, not the plan`,
    `layers completed: ${result.layers}/${plan.modelLayers}; routed expert drops: ${result.expertDrops}`,
    ...(last ? [cacheReport(plan.expertCache, last.experts, result.experts.residentSlots)] : []),
    ...[prefillReport(result), speculationReport(result)].filter((block): block is string => block !== undefined),
    ...(result.resumedFrom
      ? [`restored ${result.resumedFrom.path} (${formatBytes(result.resumedFrom.bytes)}, ${result.resumedFrom.priorPositions} positions) in ${result.resumedFrom.seconds.toFixed(2)} s`]
      : []),
    ...(result.savedState
      ? [`wrote ${result.savedState.path} (${formatBytes(result.savedState.bytes)}, ${result.savedState.positions} positions) in ${result.savedState.seconds.toFixed(2)} s`]
      : []),
    ioShareReport(result),
  ];
  if (plan.trunk.mode === "streamed" && result.trunkStats) lines.push(trunkReport(plan.trunk.plan, result.trunkStats, result.layers));
  return lines.join("\n");
}

/** Warnings the run raised, for consola's warn level. */
export function runWarnings(result: RunResult): string[] {
  const warnings = [...result.warnings];
  if (result.badScaleBytes > 0) {
    warnings.push(`${result.badScaleBytes} MXFP4 scale bytes of 255 (NaN in OCP MX) were met and treated as a zero multiplier`);
  }
  return warnings;
}

/** RUN INVALID when an expert was dropped, else undefined: the tokens cannot be trusted. */
export function verdictReport(result: RunResult): string | undefined {
  return result.drops.length > 0 ? runInvalidReport(result.drops) : undefined;
}

/** The line printed as a drop happens, naming what it spoiled. */
export function dropLine(drop: ExpertDrop): string {
  return `EXPERT DROP: layer ${drop.layer} expert ${drop.expert} failed to load; this token is CORRUPT (${drop.reason})`;
}
