/** Memory presets: the table lives in presets/presets.json and is embedded at build time. */
import table from "../../presets/presets.json" with { type: "json" };

export interface Preset {
  name: string;
  trunkGb: number;
  cacheGb: number;
  note: string;
}

export const presets: readonly Preset[] = table.presets;

export function findPreset(name: string): Preset | undefined {
  return presets.find((p) => p.name === name);
}

/** The `--list-presets` text (runtime.md 2.2): name padded to 12, budgets to two decimals. */
export function presetListing(): string {
  const lines = ["presets (trunk / expert-cache, in GB):"];
  for (const p of presets) {
    const budgets = `${p.trunkGb.toFixed(2).padStart(6)} / ${p.cacheGb.toFixed(2).padStart(6)}`;
    lines.push(`  ${p.name.padEnd(12)}${budgets}  ${p.note}`);
  }
  lines.push(`  ${"auto".padEnd(12)}${"fit".padStart(5)} / ${"fit".padStart(5)}  ${table.auto.note}`);
  lines.push(...table.footer);
  return `${lines.join("\n")}\n`;
}
