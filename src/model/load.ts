/**
 * Opens a checkpoint for generation: index, bind-time checks, resident trunk, model tables,
 * expert source and the native operators, composed into a Model. The caller closes it.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { indexCheckpoint, type CheckpointIndex } from "../checkpoint/safetensors.ts";
import { checkBindable } from "../weights/bind.ts";
import { LruExpertCache } from "../weights/experts.ts";
import { loadModelTables } from "../weights/model-tables.ts";
import { ResidentTrunk } from "../weights/resident-trunk.ts";
import { TensorReader } from "../weights/tensor-reader.ts";
import { Model } from "./forward.ts";
import { nativeOps } from "./native-ops.ts";

export interface LoadedModel {
  model: Model;
  index: CheckpointIndex;
  trunkBytes: number;
  tableBytes: number;
  indexSeconds: number;
  loadSeconds: number;
  warnings: string[];
  experts: LruExpertCache;
  close(): void;
}

/** A bounded expert cache until the budgeted one lands: two layers' worth of selections. */
export function defaultExpertSlots(config: ModelConfig): number {
  return Math.max(config.numExpertsPerToken + 1, 2 * config.numExpertsPerToken);
}

export function loadModel(modelDir: string, config: ModelConfig, layerCount: number, capacity: number): LoadedModel {
  const indexStarted = performance.now();
  const index = indexCheckpoint(modelDir);
  const indexSeconds = (performance.now() - indexStarted) / 1000;
  checkBindable(index, config, layerCount);
  const reader = new TensorReader(index);
  const closers: (() => void)[] = [() => reader.close()];
  const close = () => {
    for (const fn of closers.reverse()) fn();
    closers.length = 0;
  };
  try {
    const loadStarted = performance.now();
    const warnings: string[] = [];
    const trunk = new ResidentTrunk(index, reader, config, layerCount, warnings);
    closers.push(() => trunk.close());
    const tables = loadModelTables(index, reader, config);
    closers.push(() => tables.close());
    const experts = new LruExpertCache(index, reader, config, defaultExpertSlots(config));
    closers.push(() => experts.close());
    const model = new Model(config, trunk, tables, experts, nativeOps(), capacity);
    return {
      model, index, trunkBytes: trunk.bytes, tableBytes: tables.bytes, indexSeconds,
      loadSeconds: (performance.now() - loadStarted) / 1000, warnings, experts, close,
    };
  } catch (error) {
    close();
    throw error;
  }
}
