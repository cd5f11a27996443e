/**
 * Memory budgets from the command line (runtime.md 1.4 and 2): `--preset`, `--trunk-gb` and
 * `--cache-gb` apply in argv order, so a later option wins, and `auto` follows the same rule
 * (a later `--cache-gb` overrides auto's cache). Auto sizes both budgets from MemAvailable,
 * trunk first. Everything here is in bytes; GB exist only where options are parsed and printed.
 */
import { readFileSync } from "node:fs";
import { usageError } from "../errors.ts";
import { bytesToGb, formatGb, gbToBytes } from "../units.ts";
import { findPreset, presets } from "./presets.ts";

export const defaultTrunkBytes = gbToBytes(16);
export const defaultCacheBytes = gbToBytes(64);
/** The draft trunk's budget in hybrid decode (runtime.md 9.3). */
export const defaultDraftTrunkBytes = gbToBytes(6);

/**
 * The constants of the auto budget (runtime.md 2.3). The reserve is what the system and k3's
 * own overheads keep: a fixed part, a share of what is available, the embedding and LM head
 * (always resident), and the runtime's headroom.
 */
export const autoBudgetConstants = {
  reserveFixedBytes: gbToBytes(2.0),
  reservePerAvailable: 0.02,
  runtimeHeadroomBytes: gbToBytes(1.7),
  /** Below one ring slot of the released model's largest layer the trunk cannot stream. */
  slotMinBytes: gbToBytes(2.5),
  /** The smallest expert cache auto hands out. */
  cacheMinBytes: gbToBytes(0.5),
  /** With no room for the whole trunk, it takes at most this share of MemTotal. */
  trunkShareOfTotal: 0.55,
  /** The packed trunk plus the vectors widened when bound: 111 GB for the released 108.81 GB. */
  widenHeadroom: 111.0 / 108.81,
} as const;

export type BudgetAction =
  | { kind: "preset"; name: string }
  /** `preset`: given as `--preset auto` (a preset: it switches ultra-low-memory mode off). */
  | { kind: "auto"; preset?: boolean }
  | { kind: "trunk"; bytes: number }
  | { kind: "cache"; bytes: number }
  /** `--ultra-low-memory` (runtime.md 2.4). */
  | { kind: "ultra" };

export interface Budgets {
  trunkBytes: number;
  cacheBytes: number;
  /** The preset named last, if any (shown in the banner). */
  preset: string | undefined;
  /** The auto computation, when one was applied. */
  auto: AutoBudget | undefined;
  /** Ultra-low-memory mode: the embedding and LM head streamed from the shard (runtime.md 2.4). */
  ultraLowMemory: boolean;
}

export interface MemoryFacts {
  availableBytes: number;
  totalBytes: number | undefined;
}

/** Model sizes auto needs: the whole trunk as it will be held, and the embedding + LM head. */
export interface ModelSizes {
  trunkBytes: number;
  tablesBytes: number;
}

export interface AutoBudget {
  availableBytes: number;
  reserveBytes: number;
  trunkBytes: number;
  cacheBytes: number;
}

/** MemAvailable and MemTotal from /proc/meminfo; undefined where it cannot be read. */
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
    return match ? Number(match[1]) * 1024 : undefined;
  };
  const availableBytes = kb("MemAvailable");
  return availableBytes === undefined ? undefined : { availableBytes, totalBytes: kb("MemTotal") };
}


/** runtime.md 2.3, with the released model's constants replaced by this model's sizes. */
export function autoBudget(memory: MemoryFacts, sizes: ModelSizes): AutoBudget {
  const k = autoBudgetConstants;
  const available = memory.availableBytes;
  const reserve = k.reserveFixedBytes + k.reservePerAvailable * available + sizes.tablesBytes + k.runtimeHeadroomBytes;
  const usable = available - reserve;
  if (usable < k.slotMinBytes + k.cacheMinBytes) {
    throw usageError(
      `--preset auto: ${formatGb(usable)} GB usable (${formatGb(available)} GB available - ${formatGb(reserve)} GB reserved) ` +
        `is below the ${bytesToGb(k.slotMinBytes + k.cacheMinBytes).toFixed(1)} GB floor; give --trunk-gb and --cache-gb explicitly`,
    );
  }
  const fullTrunk = sizes.trunkBytes * k.widenHeadroom;
  if (usable - k.cacheMinBytes >= fullTrunk) {
    return { availableBytes: available, reserveBytes: reserve, trunkBytes: fullTrunk, cacheBytes: usable - fullTrunk };
  }
  const ceiling = memory.totalBytes !== undefined ? k.trunkShareOfTotal * memory.totalBytes : usable;
  const cap = Math.max(ceiling - reserve - k.cacheMinBytes, k.slotMinBytes);
  return {
    availableBytes: available, reserveBytes: reserve, trunkBytes: Math.min(usable - k.cacheMinBytes, cap), cacheBytes: k.cacheMinBytes,
  };
}

/** Whether `--trunk-gb` (a number or `auto`) was given: a budget only a streamed trunk has. */
export function trunkBudgetGiven(actions: readonly BudgetAction[]): boolean {
  return actions.some((a) => a.kind === "trunk" || (a.kind === "auto" && !a.preset));
}

/**
 * The budget options as given (argv order), with the one decision they make before anything
 * is sized: ultra-low-memory mode or not (runtime.md 2.4). Made once, by budgetRequest, where
 * the options are parsed; everything after reads `ultraLowMemory`.
 */
export interface BudgetRequest {
  readonly actions: readonly BudgetAction[];
  readonly ultraLowMemory: boolean;
}

/**
 * Decides ultra-low-memory mode: `--ultra-low-memory` or `--preset ultra` switch it on, any
 * other preset (auto included) off, in argv order (runtime.md 1.4). With an auto budget still in
 * effect it is refused: ultra needs explicit, bounded budgets.
 */
export function budgetRequest(actions: readonly BudgetAction[]): BudgetRequest {
  let ultra = false;
  for (const action of actions) {
    if (action.kind === "ultra") ultra = true;
    else if (action.kind === "preset") ultra = findPreset(action.name)?.ultraLowMemory === true;
    else if (action.kind === "auto" && action.preset) ultra = false;
  }
  if (ultra && actions.some((a) => a.kind === "auto")) {
    throw usageError("ultra-low-memory mode (--ultra-low-memory or --preset ultra) needs explicit budgets: it cannot be combined with auto");
  }
  return { actions: [...actions], ultraLowMemory: ultra };
}

/** Applies the budget options in the order given. */
export function resolveBudgets(request: BudgetRequest, memory: MemoryFacts | undefined, sizes: ModelSizes): Budgets {
  const budgets: Budgets = {
    trunkBytes: defaultTrunkBytes, cacheBytes: defaultCacheBytes, preset: undefined, auto: undefined, ultraLowMemory: request.ultraLowMemory,
  };
  for (const action of request.actions) {
    if (action.kind === "ultra") continue;
    if (action.kind === "trunk") budgets.trunkBytes = action.bytes;
    else if (action.kind === "cache") budgets.cacheBytes = action.bytes;
    else if (action.kind === "preset") {
      const preset = findPreset(action.name);
      if (!preset) throw new Error(`unknown preset ${action.name} (checked at parse time)`);
      budgets.trunkBytes = gbToBytes(preset.trunkGb);
      budgets.cacheBytes = gbToBytes(preset.cacheGb);
      budgets.preset = preset.name;
    } else {
      if (!memory) throw usageError("--preset auto needs /proc/meminfo (MemAvailable); give --trunk-gb and --cache-gb instead");
      const auto = autoBudget(memory, sizes);
      budgets.trunkBytes = auto.trunkBytes;
      budgets.cacheBytes = auto.cacheBytes;
      budgets.auto = auto;
    }
  }
  return budgets;
}

export const presetNames = (): string[] => [...presets.map((p) => p.name), "auto"];
