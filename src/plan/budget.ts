/**
 * Memory budgets from the command line (runtime.md 1.4 and 2): `--preset`, `--trunk-gb` and
 * `--cache-gb` apply in argv order, so a later option wins, and `auto` follows the same rule
 * (a later `--cache-gb` overrides auto's cache). Auto sizes both budgets from MemAvailable,
 * trunk first.
 */
import { readFileSync } from "node:fs";
import { usageError } from "../errors.ts";
import { findPreset, presets } from "./presets.ts";

export const defaultTrunkGb = 16;
export const defaultCacheGb = 64;

export type BudgetAction =
  | { kind: "preset"; name: string }
  | { kind: "auto" }
  | { kind: "trunk"; gb: number }
  | { kind: "cache"; gb: number };

export interface Budgets {
  trunkGb: number;
  cacheGb: number;
  /** The preset named last, if any (shown in the banner). */
  preset: string | undefined;
  /** The auto computation, when one was applied. */
  auto: AutoBudget | undefined;
}

export interface MemoryFacts {
  availableGb: number;
  totalGb: number | undefined;
}

/** Model sizes auto needs: the whole packed trunk and the embedding + LM head, in GB. */
export interface ModelSizes {
  trunkGb: number;
  tablesGb: number;
}

export interface AutoBudget {
  availableGb: number;
  reserveGb: number;
  trunkGb: number;
  cacheGb: number;
}

/** MemAvailable and MemTotal from /proc/meminfo, in GB; undefined where it cannot be read. */
export function readMemory(meminfo?: string): MemoryFacts | undefined {
  let text = meminfo;
  if (text === undefined) {
    try {
      text = readFileSync("/proc/meminfo", "utf8");
    } catch {
      return undefined;
    }
  }
  const kb = (key: string) => {
    const match = text.match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"));
    return match ? (Number(match[1]) * 1024) / 1e9 : undefined;
  };
  const availableGb = kb("MemAvailable");
  return availableGb === undefined ? undefined : { availableGb, totalGb: kb("MemTotal") };
}

/** runtime.md 2.3, with the released model's constants replaced by this model's sizes. */
export function autoBudget(memory: MemoryFacts, sizes: ModelSizes): AutoBudget {
  const avail = memory.availableGb;
  const reserve = 2.0 + 0.02 * avail + sizes.tablesGb + 1.7;
  const usable = avail - reserve;
  const slotMin = 2.5;
  const cacheMin = 0.5;
  if (usable < slotMin + cacheMin) {
    throw usageError(
      `--preset auto: ${usable.toFixed(2)} GB usable (${avail.toFixed(2)} GB available - ${reserve.toFixed(2)} GB reserved) ` +
        `is below the ${(slotMin + cacheMin).toFixed(1)} GB floor; give --trunk-gb and --cache-gb explicitly`,
    );
  }
  // Whole packed trunk with widen headroom (111 GB for the released 108.81 GB).
  const fullTrunk = sizes.trunkGb * (111.0 / 108.81);
  if (usable - cacheMin >= fullTrunk) {
    return { availableGb: avail, reserveGb: reserve, trunkGb: fullTrunk, cacheGb: usable - fullTrunk };
  }
  const ceiling = memory.totalGb !== undefined ? 0.55 * memory.totalGb : usable;
  const cap = Math.max(ceiling - reserve - cacheMin, slotMin);
  return { availableGb: avail, reserveGb: reserve, trunkGb: Math.min(usable - cacheMin, cap), cacheGb: cacheMin };
}

/** Applies the budget options in the order given. */
export function resolveBudgets(actions: readonly BudgetAction[], memory: MemoryFacts | undefined, sizes: ModelSizes): Budgets {
  const budgets: Budgets = { trunkGb: defaultTrunkGb, cacheGb: defaultCacheGb, preset: undefined, auto: undefined };
  for (const action of actions) {
    if (action.kind === "trunk") budgets.trunkGb = action.gb;
    else if (action.kind === "cache") budgets.cacheGb = action.gb;
    else if (action.kind === "preset") {
      const preset = findPreset(action.name);
      if (!preset) throw new Error(`unknown preset ${action.name} (checked at parse time)`);
      budgets.trunkGb = preset.trunkGb;
      budgets.cacheGb = preset.cacheGb;
      budgets.preset = preset.name;
    } else {
      if (!memory) throw usageError("--preset auto needs /proc/meminfo (MemAvailable); give --trunk-gb and --cache-gb instead");
      const auto = autoBudget(memory, sizes);
      budgets.trunkGb = auto.trunkGb;
      budgets.cacheGb = auto.cacheGb;
      budgets.auto = auto;
    }
  }
  return budgets;
}

export const presetNames = (): string[] => [...presets.map((p) => p.name), "auto"];
