/** Memory presets: the table lives in presets/presets.json and is embedded at build time. */
import table from "../../presets/presets.json" with { type: "json" };

export interface Preset {
  name: string;
  trunkGb: number;
  cacheGb: number;
  /** Naming this preset switches ultra-low-memory mode on (runtime.md 2.4); any other preset switches it off. */
  ultraLowMemory?: boolean;
  note: string;
}

export const presets: readonly Preset[] = table.presets;

/** What the table says of `auto`, and the lines that close the listing. */
export const autoPresetNote: string = table.auto.note;
export const presetFooter: readonly string[] = table.footer;

export function findPreset(name: string): Preset | undefined {
  return presets.find((p) => p.name === name);
}
