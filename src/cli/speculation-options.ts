/**
 * Speculative and hybrid decode on the command line (runtime.md 9): `--spec N`, `--draft-trunk
 * DIR` and `--draft-trunk-gb X`, one table for the run command, `k3 chat` and `k3 serve`, and
 * the one set of rules for when they can take effect.
 */
import { defaultHybridDraftIds, maxDraftIds } from "../decode/drafter.ts";
import { usageError } from "../errors.ts";
import { defaultDraftTrunkBytes } from "../plan/budget.ts";
import { bytesToGb } from "../units.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { requirePath } from "./common-options.ts";
import { parseGb } from "./memory-options.ts";

export interface SpeculationTarget {
  /** Speculative decode: ids drafted per sweep at most (runtime.md 9.1); undefined: off. */
  spec: number | undefined;
  /** Hybrid decode: the draft model's packed trunk (runtime.md 9.3). */
  draftTrunk: string | undefined;
  /** Its trunk budget; undefined: the default (given without --draft-trunk, a usage error). */
  draftTrunkBytes: number | undefined;
}

export const speculationDefaults: SpeculationTarget = { spec: undefined, draftTrunk: undefined, draftTrunkBytes: undefined };

export function speculationOptions<T extends SpeculationTarget>(): OptionDef<T>[] {
  return [
    {
      name: "spec", value: "N",
      description: `Speculative decode: draft up to N ids per sweep from the sequence's own n-grams (clamped to ${maxDraftIds}) and verify them in one forward; the ids do not change`,
      apply: (o, raw, flag) => { o.spec = Math.min(parseInteger(raw, flag, 1, 1_000_000), maxDraftIds); },
    },
    {
      name: "draft-trunk", value: "DIR",
      description: `Hybrid decode: a draft model on this packed trunk (k3 quantize-trunk) proposes ids, routed only to experts already cached, and the model verifies every one (implies --spec ${defaultHybridDraftIds}); the ids do not change`,
      apply: (o, raw, flag) => { o.draftTrunk = requirePath(raw, flag); },
    },
    {
      name: "draft-trunk-gb", value: "X",
      description: `The draft trunk's budget in GB, pinned layers plus its own streaming ring (default ${bytesToGb(defaultDraftTrunkBytes)})`,
      apply: (o, raw, flag) => { o.draftTrunkBytes = parseGb(raw, flag); },
    },
  ];
}

/** What decides whether speculation can take effect: the decode mode and the memory plan's ultra decision. */
export interface SpeculationContext {
  recompute: boolean;
  ultra: boolean;
}

/** Flags that cannot take effect are usage errors (exit 2), each naming the flag it lacks or clashes with. */
export function checkSpeculation(o: SpeculationTarget, context: SpeculationContext): void {
  if (o.draftTrunkBytes !== undefined && !o.draftTrunk) throw usageError("--draft-trunk-gb is the draft trunk's budget: it needs --draft-trunk DIR");
  if (context.recompute) {
    if (o.spec !== undefined) throw usageError("--spec needs incremental decode (it carries the sequence state); drop --recompute");
    if (o.draftTrunk) throw usageError("--draft-trunk needs incremental decode (the draft carries its own state); drop --recompute");
  }
  if (context.ultra) {
    const serialOnly = [["--spec", o.spec], ["--draft-trunk", o.draftTrunk]].find(([, v]) => v !== undefined);
    if (serialOnly) throw usageError(`ultra-low-memory mode (--ultra-low-memory or --preset ultra) decodes serially: it cannot be combined with ${serialOnly[0]}`);
  }
}

/** What the engine is opened with: the most drafted ids per sweep, and the draft trunk with its budget. */
export function speculationRequest(o: SpeculationTarget): { speculative?: number; draft?: { trunkDir: string; budgetBytes: number } } {
  const speculative = o.spec ?? (o.draftTrunk ? defaultHybridDraftIds : undefined);
  return {
    ...(speculative !== undefined && { speculative }),
    ...(o.draftTrunk && { draft: { trunkDir: o.draftTrunk, budgetBytes: o.draftTrunkBytes ?? defaultDraftTrunkBytes } }),
  };
}
