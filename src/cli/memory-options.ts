/**
 * The memory options every command that runs the model takes: `--preset`, `--trunk`,
 * `--trunk-gb`, `--cache-gb`. Budgets apply in argv order (a later one wins), so they are kept
 * as a list of actions; GB become bytes here, at the edge.
 */
import { quoteArgument, usageError } from "../errors.ts";
import { defaultCacheBytes, defaultTrunkBytes, presetNames, type BudgetAction } from "../plan/budget.ts";
import { findPreset } from "../plan/presets.ts";
import { presetListing } from "../report/plan-report.ts";
import { bytesToGb, gbToBytes } from "../units.ts";
import type { OptionDef } from "./args.ts";
import { requirePath } from "./common-options.ts";

export interface MemoryTarget {
  budgets: BudgetAction[];
  trunkDir: string | undefined;
}

/** A size given in GB (a non-negative decimal number), in bytes. */
export function parseGb(raw: string, flag: string): number {
  const value = Number(raw);
  if (!/^\d+(\.\d+)?$/.test(raw.trim()) || !Number.isFinite(value)) {
    throw usageError(`${flag} expects a size in GB (a number such as 16 or 0.5), got ${quoteArgument(raw)}`);
  }
  return gbToBytes(value);
}

export function memoryOptions<T extends MemoryTarget>(): OptionDef<T>[] {
  return [
    {
      name: "preset", value: "NAME",
      description: `Memory preset, sets --trunk-gb and --cache-gb: ${presetNames().join(", ")} (see --list-presets)`,
      apply: (o, raw, flag) => {
        if (raw === "auto") o.budgets.push({ kind: "auto" });
        else if (findPreset(raw)) o.budgets.push({ kind: "preset", name: raw });
        else throw usageError(`${flag}: unknown preset ${quoteArgument(raw)}`, presetListing());
      },
    },
    {
      name: "trunk", value: "DIR",
      description: "Packed trunk directory (k3 pack-trunk): streams the trunk instead of holding it resident",
      apply: (o, raw, flag) => { o.trunkDir = requirePath(raw, flag); },
    },
    {
      name: "trunk-gb", value: "X|auto",
      description: `Trunk budget in GB for pinned layers plus the streaming ring (default ${bytesToGb(defaultTrunkBytes)}; needs --trunk)`,
      apply: (o, raw, flag) => { o.budgets.push(raw === "auto" ? { kind: "auto" } : { kind: "trunk", bytes: parseGb(raw, flag) }); },
    },
    {
      name: "cache-gb", value: "X",
      description: `Routed-expert cache budget in GB (default ${bytesToGb(defaultCacheBytes)}, at most what all experts need)`,
      apply: (o, raw, flag) => { o.budgets.push({ kind: "cache", bytes: parseGb(raw, flag) }); },
    },
  ];
}
