/**
 * Hybrid decode on an open engine (runtime.md 9.3): the draft model as the run's drafter, and
 * what it did. Every call into the drafter is metered against the expert cache's read counter,
 * so the run can show (and a test can check) that drafting read no expert from disk.
 */
import type { Drafter } from "../decode/drafter.ts";
import { ModelDrafter, type ModelDrafterStats } from "../decode/model-drafter.ts";
import { emptyDraftStats, type DraftExpertStats } from "../weights/cache-only-experts.ts";
import type { TrunkStats } from "../weights/trunk.ts";
import type { Engine } from "./open.ts";

export interface HybridStats {
  draftTrunk: string;
  budgetBytes: number;
  drafter: ModelDrafterStats;
  /** The draft's cache-only routing: picks served from the cache and picks skipped. */
  experts: DraftExpertStats;
  /** Expert reads the cache issued while the drafter ran: zero, or cache-only routing is broken. */
  expertReadsWhileDrafting: number;
  /** The draft trunk's stream over this run. */
  trunkStats: TrunkStats;
}

export interface HybridRun {
  drafter: Drafter;
  /** This run's figures (the engine's counters as differences). */
  stats(): HybridStats;
  close(): void;
}

function since<T extends object>(now: T, before: T): T {
  const delta = { ...now };
  for (const key of Object.keys(delta) as (keyof T)[]) (delta[key] as number) = (now[key] as number) - (before[key] as number);
  return delta;
}

/**
 * A drafter on the engine's draft model. It follows whatever sequence the exact model's decode
 * tells it (a resumed state, a conversation turn after turn), catching up or rebuilding itself.
 */
export function startHybrid(engine: Engine): HybridRun | undefined {
  const draft = engine.draft;
  const draftPlan = engine.plan.draft;
  if (!draft || !draftPlan) return undefined;
  const trunkBefore = { ...draft.trunk.stats };
  const expertsBefore = { ...draft.experts.stats };
  const model = new ModelDrafter(draft.model, { chunk: engine.plan.prefillChunk });
  let readsWhileDrafting = 0;
  const metered = <T>(work: () => T): T => {
    const before = engine.experts.readsIssued;
    try {
      return work();
    } finally {
      readsWhileDrafting += engine.experts.readsIssued - before;
    }
  };
  const drafter: Drafter = {
    propose: (sequence, max) => metered(() => model.propose(sequence, max)),
    sync: (fed) => metered(() => model.sync(fed)),
    close: () => model.close(),
  };
  return {
    drafter,
    stats: () => ({
      draftTrunk: draftPlan.dir, budgetBytes: draftPlan.budgetBytes, drafter: { ...model.stats },
      experts: since({ ...emptyDraftStats(), ...draft.experts.stats }, expertsBefore),
      expertReadsWhileDrafting: readsWhileDrafting, trunkStats: since(draft.trunk.stats, trunkBefore),
    }),
    close: () => model.close(),
  };
}
