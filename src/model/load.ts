/**
 * Opening a checkpoint for generation, in two steps so the memory plan is printed and checked
 * before anything large is allocated: `prepareEngine` indexes the shards, checks every tensor
 * by name, resolves the budgets and plans the trunk and the expert cache; `materialize` then
 * loads (or opens for streaming) the trunk, the model tables and the expert cache, and composes
 * the Model. The caller closes it.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { indexCheckpoint, type CheckpointIndex } from "../checkpoint/safetensors.ts";
import { lmHeadName, modelTensors } from "../checkpoint/tensor-names.ts";
import { readMemory, resolveBudgets, type BudgetAction, type Budgets } from "../plan/budget.ts";
import { memoryPlan, type MemoryPlan } from "../plan/memory-plan.ts";
import { readCapacity } from "../native/file.ts";
import { resetBadScaleBytes } from "../native/kernels.ts";
import { checkBindable, vectorBytes } from "../weights/bind.ts";
import { ExpertCache, planExpertCache, type ExpertCachePlan, type ExpertDrop } from "../weights/expert-cache.ts";
import { loadModelTables } from "../weights/model-tables.ts";
import { ResidentTrunk } from "../weights/resident-trunk.ts";
import { StreamedTrunk } from "../weights/streamed-trunk.ts";
import { TensorReader } from "../weights/tensor-reader.ts";
import type { Trunk } from "../weights/trunk.ts";
import { layerLayout } from "../weights/trunk-layout.ts";
import { Model } from "./forward.ts";

export interface EngineRequest {
  modelDir: string;
  config: ModelConfig;
  layerCount: number;
  /** Positions the sequence state must hold: prompt + gen + 1. */
  positions: number;
  promptTokens: number;
  budgets: readonly BudgetAction[];
  trunkDir: string | undefined;
  /** "layer:expert" keys whose reads are made to fail (tests of the dropped-expert path). */
  faults?: ReadonlySet<string>;
  trace?: boolean;
  onDrop?: (drop: ExpertDrop) => void;
}

export interface PreparedEngine {
  index: CheckpointIndex;
  indexSeconds: number;
  budgets: Budgets;
  /** Memory the resident trunk takes (with alignment windows and widened vectors). */
  residentTrunkBytes: number;
  /** Bytes of the bound layers' trunk tensors in the checkpoint. */
  trunkPayloadBytes: number;
  streamed: StreamedTrunk | undefined;
  expertPlan: ExpertCachePlan;
  plan: MemoryPlan;
  availableBytes: number | undefined;
  materialize(onLayer?: (loaded: number) => void): LoadedModel;
  close(): void;
}

export interface LoadedModel {
  model: Model;
  trunk: Trunk;
  experts: ExpertCache;
  loadSeconds: number;
  warnings: string[];
}

/** Bytes of the model-level tensors (embedding, LM head, norms). */
function tableBytes(index: CheckpointIndex, config: ModelConfig): number {
  return modelTensors(config).reduce((sum, spec) => sum + (spec.name === lmHeadName && config.tieWordEmbeddings ? 0 : index.get(spec.name)?.nbytes ?? 0), 0);
}

export function prepareEngine(request: EngineRequest): PreparedEngine {
  const { config, layerCount } = request;
  const indexStarted = performance.now();
  const index = indexCheckpoint(request.modelDir);
  const indexSeconds = (performance.now() - indexStarted) / 1000;
  checkBindable(index, config, layerCount);
  const layouts = Array.from({ length: layerCount }, (_, l) => layerLayout(index, config, l));
  // Each resident layer: its bytes, the read's alignment window, and its widened vectors.
  const residentTrunkBytes = layouts.reduce((sum, layout) => sum + readCapacity(layout.bytes) + vectorBytes(layout), 0);
  const tablesBytes = tableBytes(index, config);
  const memory = readMemory();
  const budgets = resolveBudgets(request.budgets, memory, { trunkGb: residentTrunkBytes / 1e9, tablesGb: tablesBytes / 1e9 });
  const warnings: string[] = [];
  const streamed = request.trunkDir
    ? new StreamedTrunk(request.trunkDir, config, layouts, budgets.trunkGb * 1e9, warnings)
    : undefined;
  const expertPlan = planExpertCache(index, config, layerCount, budgets.cacheGb * 1e9);
  const plan = memoryPlan({
    config, layerCount, positions: request.positions, promptTokens: request.promptTokens,
    trunk: streamed ? { mode: "streamed", bytes: streamed.plan.bytes } : { mode: "resident", bytes: residentTrunkBytes },
    tablesBytes, expertCacheBytes: expertPlan.slots * expertPlan.slotBytes, baselineBytes: process.memoryUsage().rss,
  });
  const reader = new TensorReader(index);
  const closers: (() => void)[] = [() => reader.close()];
  if (streamed) closers.push(() => streamed.close());
  const close = () => {
    for (const fn of closers.reverse()) fn();
    closers.length = 0;
  };
  const materialize = (onLayer?: (loaded: number) => void): LoadedModel => {
    const loadStarted = performance.now();
    const trunk: Trunk = streamed ?? new ResidentTrunk(index, reader, config, layouts, warnings, onLayer);
    if (!streamed) closers.push(() => trunk.close());
    const tables = loadModelTables(index, reader, config);
    closers.push(() => tables.close());
    reader.releaseScratch(); // loading is done; nothing should hold a read-sized buffer now
    const experts = new ExpertCache(index, config, layerCount, {
      budgetBytes: budgets.cacheGb * 1e9, faults: request.faults, trace: request.trace, onDrop: request.onDrop,
    });
    closers.push(() => experts.close());
    resetBadScaleBytes(); // the run reports the bad scale bytes this model meets
    const model = new Model(config, trunk, tables, experts, request.positions);
    closers.push(() => model.close());
    return { model, trunk, experts, loadSeconds: (performance.now() - loadStarted) / 1000, warnings };
  };
  return {
    index, indexSeconds, budgets, residentTrunkBytes, trunkPayloadBytes: layouts.reduce((sum, l) => sum + l.bytes, 0), streamed, expertPlan, plan,
    availableBytes: memory ? memory.availableGb * 1e9 : undefined, materialize, close,
  };
}
