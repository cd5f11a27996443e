/**
 * What is printed before anything large is allocated (runtime.md 2.2, 3.1, 5.4): the preset
 * listing, the budgets, the index, the memory plan and the trunk streaming banner.
 */
import type { KernelVariant } from "../native/kernel-runtime.ts";
import { vectorPortsDescription } from "../native/isa.ts";
import type { EnginePlan } from "../engine/result.ts";
import type { MemoryPlan } from "../plan/memory-plan.ts";
import { autoPresetNote, presetFooter, presets } from "../plan/presets.ts";
import type { TrunkPlan } from "../plan/trunk-plan.ts";
import { pct } from "./format.ts";
import { budgetGb, bytesToGb, formatBytes, formatGb } from "../units.ts";

/** The `--list-presets` text (runtime.md 2.2): name padded to 12, budgets to two decimals. */
export function presetListing(): string {
  const lines = ["presets (trunk / expert-cache, in GB):"];
  for (const p of presets) {
    const budgets = `${p.trunkGb.toFixed(2).padStart(6)} / ${p.cacheGb.toFixed(2).padStart(6)}`;
    lines.push(`  ${p.name.padEnd(12)}${budgets}  ${p.note}`);
  }
  lines.push(`  ${"auto".padEnd(12)}${"fit".padStart(5)} / ${"fit".padStart(5)}  ${autoPresetNote}`);
  lines.push(...presetFooter);
  return `${lines.join("\n")}\n`;
}

export function planText(plan: MemoryPlan, availableBytes: number | undefined): string {
  const lines = ["memory plan"];
  const width = Math.max(17, ...plan.terms.map((t) => t.name.length + 1));
  for (const term of plan.terms) lines.push(`  ${term.name.padEnd(width)}${formatBytes(term.bytes)}`);
  lines.push(`  ${"TOTAL".padEnd(width)}${formatBytes(plan.totalBytes)}`);
  lines.push(`  ${"available".padEnd(width)}${availableBytes === undefined ? "unknown (no /proc/meminfo)" : formatBytes(availableBytes)}`);
  return lines.join("\n");
}

/** The streaming banner (runtime.md 5.4); the draft trunk of hybrid decode has its own, naming its own budget flag. */
export function trunkBanner(
  plan: TrunkPlan, packedBytes: number, layerCount: number, direct: boolean, which = { label: "trunk stream:", flag: "--trunk-gb" },
  compressed?: { storedBytes: number; codec: string },
): string {
  const stored = compressed ? ` (stored ${formatBytes(compressed.storedBytes)}, ${compressed.codec}: pinned and read as stored, decoded into the slot)` : "";
  const lines = [
    `${which.label} ${formatBytes(packedBytes)} packed${stored}, ${plan.pinned}/${layerCount} layers PINNED (${formatBytes(plan.pinnedBytes)}), ring ${plan.ringSlots} x ${formatBytes(plan.slotBytes)}` +
      (plan.ringSlots === 1 && plan.ringBytes > plan.slotBytes ? ` + ${formatBytes(plan.ringBytes - plan.slotBytes)} to read ahead` : ""),
    `              ${direct ? "reads use O_DIRECT (page cache bypassed)" : "buffered I/O (the filesystem refuses O_DIRECT)"}`,
  ];
  if (plan.raised) lines.push(`              the budget was below one ring slot and was raised to ${formatBytes(plan.bytes)}; tokens are unchanged`);
  if (plan.ringSlots === 1 && plan.twoSlotBudget !== undefined) {
    lines.push(`              one slot: each layer is read ahead only as far as it fits beside the one in use. ${which.flag} ${bytesToGb(plan.twoSlotBudget).toFixed(6)} or more reads every layer ahead whole.`);
  }
  lines.push(`              deterministic hit rate ${pct(plan.pinned, layerCount)}% (a cyclic scan defeats LRU, so a pinned prefix is used instead)`);
  return lines.join("\n");
}

/**
 * The kernel variant and threads: `kernels: v4 (x86-64-v4: AVX-512), 2 threads`; on v4, whose
 * code alone reads it, also where it takes the CPU's vector operations to issue.
 */
export function kernelsLine(kernels: KernelVariant): string {
  const ports = kernels.isa === "v4" ? `, ${vectorPortsDescription[kernels.vectorPorts]}` : "";
  return `kernels: ${kernels.isa} (${kernels.description}), ${kernels.threads} thread${kernels.threads === 1 ? "" : "s"}${ports}`;
}

/** `k3 --version`'s second line (and `k3 doctor`'s kernels line): the variant in use and every one this machine runs. */
export function kernelsVersionLine(kernels: KernelVariant): string {
  return `kernels: ${kernelsChoice(kernels)}`;
}

export const kernelsChoice = (kernels: KernelVariant): string =>
  `${kernels.isa} (${kernels.description}); this machine runs ${kernels.runnable.join(", ")} (K3_ISA forces one)`;

/** What the run will do, as the caller described it (the engine does not know the prompt's source). */
export interface RunIntent {
  promptTokens: number;
  maxNewTokens: number;
  mode: string;
  /** Which config shape was read: "flat" or "nested". */
  configShape: string;
}

/** The lines between indexing and the memory plan: for consola's info level, in order. */
export function openingLines(plan: EnginePlan, intent: RunIntent): string[] {
  const { budgets } = plan;
  const lines: string[] = [];
  const a = budgets.auto;
  if (a) {
    lines.push(`auto budget: ${formatGb(a.availableBytes)} GB available, ${formatGb(a.reserveBytes)} GB reserved -> trunk ${formatGb(a.trunkBytes)} GB / expert cache ${formatGb(a.cacheBytes)} GB`);
  }
  lines.push(
    `model ${plan.modelDir}: ${plan.layerCount} layers, prompt ${intent.promptTokens} tokens, generating ${intent.maxNewTokens} (${intent.mode})` +
      (budgets.preset ? `; preset ${budgets.preset} (trunk ${budgetGb(budgets.trunkBytes)} GB / expert cache ${budgetGb(budgets.cacheBytes)} GB)` : ""),
  );
  lines.push(`indexed ${plan.tensorCount} tensors from ${plan.shardCount} shard(s) in ${plan.indexSeconds.toFixed(3)} s (config: ${intent.configShape})`);
  lines.push(kernelsLine(plan.kernels));
  return lines;
}

/** The memory plan and, when streaming, the trunk banner: printed as they are. */
export function planBlock(plan: EnginePlan): string {
  const blocks = [planText(plan.memory, plan.availableBytes)];
  if (plan.trunk.mode === "streamed") blocks.push(trunkBanner(plan.trunk.plan, plan.trunk.packedBytes, plan.layerCount, true, undefined, plan.trunk.compressed));
  if (plan.draft) blocks.push(trunkBanner(plan.draft.plan, plan.draft.packedBytes, plan.layerCount, true, { label: `draft trunk stream (${plan.draft.dir}):\n             `, flag: "--draft-trunk-gb" }));
  return blocks.join("\n");
}
