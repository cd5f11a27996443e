/**
 * `k3 budget [model_dir]` (runtime.md 11.4; else $K3_MODEL_DIR): bytes per class and per dtype,
 * resident against streamable, the routed experts' bytes per parameter, the layer map the
 * tensors imply, and how many experts caches of common sizes hold. Headers only; a partial
 * download works. The report is the command's data, on stdout.
 */
import { envValue } from "../env.ts";
import { ExitCode, usageError } from "../errors.ts";
import { budgetCensus, ranges, tensorBudget, tensorClasses, type TensorBudget } from "../doctor/tensor-budget.ts";
import { mxfp4BytesPerWeight, tokenCensus } from "../plan/forecast.ts";
import { emit } from "../report/log.ts";
import { formatBytes } from "../units.ts";
import { percentText } from "../report/format.ts";
import type { OptionDef } from "./args.ts";
import { helpOption } from "./common-options.ts";
import { parseCommandArgs, usageText, type CommandInfo } from "./usage.ts";
import { findPreset } from "../plan/presets.ts";
import { assumedBf16StoredShare, tokenBytes } from "../plan/token-bytes.ts";
import { stagingPiece } from "../weights/compressed-trunk.ts";

const cacheSizesGb = [8, 16, 32, 64, 128, 256, 512, 1024] as const;

const command: CommandInfo<Record<string, never>> = {
  name: "k3 budget",
  description: "Classify every tensor from the shard headers (resident, streamable, unused) and size the expert cache",
  positionals: [{ name: "model_dir", description: "Checkpoint directory (default $K3_MODEL_DIR); a partial download works" }],
  options: [helpOption as OptionDef<Record<string, never>>],
};


export function budgetReport(b: TensorBudget): string {
  const lines: string[] = [];
  const shards = `${b.shardsRead} shard(s) read, headers only`;
  lines.push(`budget: ${b.dir}: ${shards}; ${b.tensors} tensors, ${formatBytes(b.bytes)}`);
  for (const s of b.shardsSkipped) lines.push(`  skipped ${s.name}: ${s.reason}`);
  lines.push("", `  ${"class".padEnd(24)} ${"tensors".padStart(8)} ${"bytes".padStart(16)}  ${"".padEnd(10)}  share`);
  for (const c of tensorClasses) {
    const t = b.byClass.get(c.name);
    if (!t) continue;
    lines.push(`  ${c.name.padEnd(24)} ${String(t.tensors).padStart(8)} ${String(t.bytes).padStart(16)}  ${formatBytes(t.bytes).padEnd(10)}  ${percentText(t.bytes, b.bytes)}  ${c.residency}`);
  }
  lines.push("", "  per dtype:");
  for (const [dtype, t] of [...b.byDtype].sort((x, y) => y[1].bytes - x[1].bytes)) {
    lines.push(`  ${dtype.padEnd(24)} ${String(t.tensors).padStart(8)} ${String(t.bytes).padStart(16)}  ${formatBytes(t.bytes)}`);
  }
  const r = (k: "resident" | "streamable" | "unused") => b.byResidency.get(k)?.bytes ?? 0;
  lines.push("", `  resident   : ${formatBytes(r("resident"))} (held in RAM or streamed as the trunk; never per-token expert reads)`);
  lines.push(`  streamable : ${formatBytes(r("streamable"))} (routed experts, read on demand)`);
  if (r("unused") > 0) lines.push(`  unused     : ${formatBytes(r("unused"))}`);
  if (b.routedExperts > 0) {
    const expertBytes = (b.byClass.get("routed experts")?.bytes ?? 0) / b.routedExperts;
    const perParameter = b.routedParameters > 0 ? (b.byClass.get("routed experts")?.bytes ?? 0) / b.routedParameters : 0;
    lines.push(`  experts    : ${b.routedExperts} routed experts, ${Math.round(expertBytes)} bytes each; ${perParameter.toFixed(5)} bytes/parameter measured (MXFP4 predicts ${mxfp4BytesPerWeight})`);
    lines.push("", "  expert cache sizes:");
    for (const gb of cacheSizesGb) {
      const slots = Math.floor((gb * 1e9) / expertBytes);
      const held = Math.min(slots, b.routedExperts);
      lines.push(`    ${`${gb} GB`.padStart(7)}: ${String(slots).padStart(9)} experts (${percentText(held, b.routedExperts)} of the ${b.routedExperts})`);
    }
  }
  lines.push(...tokenBytesLines(b));
  const kda = b.layers.filter((l) => l.attention === "KDA").map((l) => l.layer);
  const mla = b.layers.filter((l) => l.attention === "MLA").map((l) => l.layer);
  const dense = b.layers.filter((l) => l.ffn === "dense").map((l) => l.layer);
  const moe = b.layers.filter((l) => l.ffn === "MoE").map((l) => l.layer);
  const expertsPerLayer = [...new Set(b.layers.filter((l) => l.experts > 0).map((l) => l.experts))];
  lines.push("", `  layer map  : ${b.layers.length} layers seen (0-based)`);
  lines.push(`    KDA      : ${kda.length} layers: ${ranges(kda) || "-"}`);
  lines.push(`    MLA      : ${mla.length} layers: ${ranges(mla) || "-"}`);
  lines.push(`    dense    : ${dense.length} layers: ${ranges(dense) || "-"}`);
  lines.push(`    MoE      : ${moe.length} layers: ${ranges(moe) || "-"}${expertsPerLayer.length > 0 ? `; ${expertsPerLayer.join(" or ")} experts per layer` : ""}`);
  return `${lines.join("\n")}\n`;
}

/** The presets the per-token table prints (the budgets most users have). */
const forecastPresets = ["laptop", "desktop", "workstation"] as const;

/**
 * Bytes read from disk a token at the presets, plain pack against compressed: the forecast's own
 * census (src/plan/forecast.ts, which `k3 doctor` turns into seconds), so the two never disagree.
 */
function tokenBytesLines(b: TensorBudget): string[] {
  const model = budgetCensus(b);
  if (!model) return [];
  const largest = Math.max(...b.trunkLayers.map((l) => l.bytes - l.bf16MatrixBytes * (1 - assumedBf16StoredShare)));
  const compressed = { share: assumedBf16StoredShare, piece: stagingPiece(largest) };
  const lines = [
    "", `  per token from disk (trunk not pinned + the misses of ${model.expertsPerToken} x ${model.moeLayers} routed experts, ${formatBytes(model.expertsPerToken * model.moeLayers * model.expertBytes)} in all):`,
    `    experts: routing spread evenly, so a cache of S slots serves S/${model.routedExperts} of the picks; seconds on this machine: k3 doctor ${b.dir} --preset <name>`,
    `    compressed assumes bf16 matrices stored in ${(100 * assumedBf16StoredShare).toFixed(1)}% (K3-width, normal weights; pack-trunk --compress prints a real trunk's)`,
  ];
  for (const name of forecastPresets) {
    const preset = findPreset(name);
    if (!preset) continue;
    const budget = { label: name, trunkBytes: preset.trunkGb * 1e9, cacheBytes: preset.cacheGb * 1e9 };
    const plain = tokenCensus(model, budget);
    const plainBytes = plain.trunkDiskBytes + plain.expertDiskBytes;
    const packed = tokenBytes(b.trunkLayers, budget.trunkBytes, plain.expertDiskBytes, compressed);
    const ratio = plainBytes > 0 ? `${(packed.totalBytes / plainBytes).toFixed(2)}x` : "1.00x";
    lines.push(
      `    ${name.padEnd(12)} (--trunk-gb ${preset.trunkGb}): plain ${formatBytes(plainBytes)} (${plain.pinnedLayers} layers pinned, trunk ${formatBytes(plain.trunkDiskBytes)}, experts ${(100 * plain.expertHitShare).toFixed(1)}% cached); ` +
        `compressed ${formatBytes(packed.totalBytes)} (${packed.pinnedLayers} pinned, trunk ${formatBytes(packed.trunkBytes)}): ${ratio}`,
    );
  }
  return lines;
}

export async function main(args: readonly string[]): Promise<number> {
  const positionals = await parseCommandArgs(args, command, {});
  if (!positionals) return ExitCode.ok;
  const dir = positionals[0] ?? envValue("K3_MODEL_DIR");
  if (!dir) throw usageError("budget needs <model_dir> (or K3_MODEL_DIR)", await usageText(command));
  emit(budgetReport(tensorBudget(dir)));
  return ExitCode.ok;
}
