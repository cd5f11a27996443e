/**
 * The reports around a run (runtime.md 3.1, 5.4, 6.4, 7.3): the streaming banner before it,
 * and after it the expert cache, the trunk, the I/O share of the wall clock, and the verdict
 * when an expert had to be dropped. Text for people, on stderr.
 */
import type { TrunkPlan } from "../plan/trunk-plan.ts";
import type { ExpertCachePlan, ExpertDrop, ExpertStepStats } from "../weights/expert-cache.ts";
import type { TrunkStats } from "../weights/streamed-trunk.ts";
import { formatBytes } from "./units.ts";

const pct = (part: number, whole: number) => (whole > 0 ? (100 * part) / whole : 0).toFixed(1);
const gb = (bytes: number) => (bytes / 1e9).toFixed(2);

export function trunkBanner(plan: TrunkPlan, packedBytes: number, layerCount: number, direct: boolean): string {
  const lines = [
    `trunk stream: ${formatBytes(packedBytes)} packed, ${plan.pinned}/${layerCount} layers PINNED (${formatBytes(plan.pinnedBytes)}), ring ${plan.ringSlots} x ${formatBytes(plan.slotBytes)}`,
    `              ${direct ? "reads use O_DIRECT (page cache bypassed)" : "buffered I/O (the filesystem refuses O_DIRECT)"}`,
  ];
  if (plan.raised) lines.push(`              the budget was below one ring slot and was raised to ${formatBytes(plan.bytes)}; tokens are unchanged`);
  if (plan.ringSlots === 1 && plan.twoSlotBudget !== undefined) {
    lines.push(`              ring held at 1 slot: no read-ahead. Raise --trunk-gb to at least ${(plan.twoSlotBudget / 1e9).toFixed(6)} to enable it.`);
  }
  lines.push(`              deterministic hit rate ${pct(plan.pinned, layerCount)}% (a cyclic scan defeats LRU, so a pinned prefix is used instead)`);
  return lines.join("\n");
}

export function expertCacheLine(plan: ExpertCachePlan): string {
  const raised = plan.requestedSlots < plan.minimumSlots ? ` (raised from ${plan.requestedSlots} to the top-k + 1 minimum)` : "";
  const capped = plan.slots === plan.totalExperts && plan.requestedSlots > plan.totalExperts ? " (every expert fits; the rest of the budget is not reserved)" : "";
  return `expert cache: ${plan.slots} slots x ${formatBytes(plan.slotBytes)} = ${formatBytes(plan.slots * plan.slotBytes)} (${pct(plan.slots, plan.totalExperts)}% of the ${plan.totalExperts} routed experts)${raised}${capped}`;
}

export function cacheReport(plan: ExpertCachePlan, step: ExpertStepStats, residentSlots: number): string {
  return [
    "cache [final step]",
    `  slots        : ${plan.slots} of ${formatBytes(plan.slotBytes)} = ${formatBytes(plan.slots * plan.slotBytes)} arena (${residentSlots} resident)`,
    `  requests     : ${step.requests}  resident hits ${step.residentHits} (${pct(step.residentHits, step.requests)}%)  read ${step.reads}  evictions ${step.evictions}`,
    `  TRUE resident hit rate ${pct(step.residentHits, step.requests)}%: experts already in RAM before the token needed them`,
    `  read from disk: ${gb(step.bytesRead)} GB in ${step.readSeconds.toFixed(2)} s of device time`,
  ].join("\n");
}

/**
 * How much of the decode wall clock waited on the disk. Waiting time, not device time: up to
 * top-k expert reads run at once and the trunk reader overlaps compute, so summed device
 * seconds can exceed the wall clock; they are shown beside it.
 */
export function ioShareReport(trunk: TrunkStats | undefined, total: ExpertStepStats, decodeSeconds: number, steps: number): string {
  const trunkWait = trunk?.waitSeconds ?? 0;
  const share = decodeSeconds > 0 ? (100 * (trunkWait + total.waitSeconds)) / decodeSeconds : 0;
  const retained = total.requests - total.evictions;
  return [
    `I/O share of wall clock: ${share.toFixed(1)}%  (waiting on trunk ${trunkWait.toFixed(2)} s + experts ${total.waitSeconds.toFixed(2)} s of ${decodeSeconds.toFixed(2)} s)`,
    `  both figures are WHOLE-RUN totals over ${steps} steps; device time of the reads: trunk ${(trunk?.readSeconds ?? 0).toFixed(2)} s, experts ${total.readSeconds.toFixed(2)} s (concurrent reads overlap)`,
    `  experts, whole run: ${gb(total.bytesRead)} GB read | ${retained} of ${total.requests} requests retained in RAM (${pct(retained, total.requests)}%) | ${total.evictions} evictions`,
  ].join("\n");
}

export function trunkReport(plan: TrunkPlan, stats: TrunkStats, layerCount: number): string {
  const overlapped = Math.max(0, stats.readSeconds - stats.waitSeconds);
  const rate = stats.readSeconds > 0 ? (stats.bytesRead / 1e6 / stats.readSeconds).toFixed(0) : "-";
  return [
    "trunk [final]",
    `  pinned ${plan.pinned}/${layerCount} layers, ring ${plan.ringSlots} slots`,
    `  binds ${stats.binds}, hits ${stats.hits} (${pct(stats.hits, stats.binds)}%), reads ${stats.reads}`,
    `  read ${formatBytes(stats.bytesRead)} in ${stats.readSeconds.toFixed(2)} s (${rate} MB/s)`,
    `  waited ${stats.waitSeconds.toFixed(2)} s for reads; ${overlapped.toFixed(2)} s of device time overlapped compute on the reader thread`,
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
