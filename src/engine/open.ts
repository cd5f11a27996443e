/**
 * Opening a checkpoint for generation. The plan comes first and is handed to the caller before
 * anything large is allocated: the shards are indexed, every tensor is checked by name, the
 * budgets are resolved and the trunk, the expert cache and the memory are planned; then the
 * request is refused if it cannot fit, and only then are the trunk, the model tables and the
 * expert cache loaded (or opened for streaming) and composed into the Model. Everything opened
 * is released on every path: by `close()`, or at once if opening fails half-way.
 */
import { readFileSync } from "node:fs";
import type { ModelConfig } from "../checkpoint/config.ts";
import { indexCheckpoint, type CheckpointIndex } from "../checkpoint/safetensors.ts";
import { modelTensors, tensorList } from "../checkpoint/tensor-names.ts";
import { Model } from "../model/forward.ts";
import { readCapacity, setBufferedFallbackReporter } from "../native/file.ts";
import { badScaleBytes, kernelVariant, threadsFromEnv, type KernelVariant } from "../native/kernel-runtime.ts";
import type { DecodeMode } from "../decode/loop.ts";
import { ExitCode, K3Error, usageError } from "../errors.ts";
import { formatBytes } from "../units.ts";
import { readMemory, resolveBudgets, trunkBudgetGiven, type BudgetRequest, type Budgets } from "../plan/budget.ts";
import { checkKvFits, checkPlanFits, memoryPlan, recurrentSlotBytes, sequencesFitting, type MemoryPlan, type PlanInputs } from "../plan/memory-plan.ts";
import { planCompressedTrunk, planTrunk, type CompressedTrunkPlan, type TrunkPlan } from "../plan/trunk-plan.ts";
import { checkBindable, vectorBytes } from "../weights/bind.ts";
import { CacheOnlyExperts } from "../weights/cache-only-experts.ts";
import { openDraftTrunk } from "../weights/draft-trunk.ts";
import { ExpertCache, planExpertCache, type ExpertCachePlan, type ExpertDrop } from "../weights/expert-cache.ts";
import { loadModelTables, type ModelTables } from "../weights/model-tables.ts";
import { lmHeadWalk, openStreamedTables, streamedTableBytes } from "../weights/streamed-tables.ts";
import { ResidentTrunk } from "../weights/resident-trunk.ts";
import { openPackedTrunk, StreamedTrunk } from "../weights/streamed-trunk.ts";
import { TensorReader } from "../weights/tensor-reader.ts";
import type { StreamingTrunk, Trunk } from "../weights/trunk.ts";
import { CompressedTrunk, readTables, stagingPiece } from "../weights/compressed-trunk.ts";
import { layerLayout } from "../weights/trunk-layout.ts";

export interface EngineRequest {
  modelDir: string;
  config: ModelConfig;
  layerCount: number;
  /** Positions each sequence state holds: prompt + new tokens + 1 for one run. */
  positions: number;
  /** Ids per forward call when feeding a prompt: the largest call, which sizes the activations. */
  prefillChunk: number;
  /** Budget options in the order given (a later one wins), with the ultra decision they made. */
  budgets: BudgetRequest;
  /** A packed trunk directory: the trunk is streamed from it instead of held resident. */
  trunkDir: string | undefined;
  /** "layer:expert" keys whose reads are made to fail (tests of the dropped-expert path). */
  faults?: ReadonlySet<string>;
  /** Packed-trunk layer -> the read of it that fails with EIO (tests of a failing disk). */
  trunkReadFaults?: ReadonlyMap<number, number>;
  /** A compressed pack's staging piece size (tests: small pieces, so a layer is read in many). */
  stagingPieceBytes?: number;
  /** Record every expert request (for --dump-cache-trace). */
  trace?: boolean;
  /** RAM the caller will hold in state snapshots (multi-turn reuse), counted in the plan. */
  snapshotBytes?: number;
  /** Speculative decode: the most drafted ids per sweep (the sweep's snapshot and replay record are planned). */
  speculative?: number;
  /**
   * Sequences decoded together (`--parallel`): each holds its own state and KV cache of
   * `positions`, and `prefillChunk` is then the largest batched step's ids. Default 1.
   */
  sequences?: number;
  /** Hybrid decode: a draft trunk (usually `k3 quantize-trunk`'s), streamed within its own budget. */
  draft?: { trunkDir: string; budgetBytes: number };
  /** How the run decodes: in ultra-low-memory mode full recompute reuses one recurrent slot. */
  mode?: DecodeMode;
}

/** Ultra-low-memory mode as planned (runtime.md 2.4). */
export interface UltraPlan {
  /** LM head rows per 4 MiB chunk, and chunks per projection. */
  rowsPerChunk: number;
  chunks: number;
  /** Resident: the chunk buffer, an embedding row's buffer, the final vectors. */
  residentBytes: number;
  /** Full recompute: one recurrent slot cleared and reused for every KDA layer. */
  oneRecurrentSlot: boolean;
  recurrentSlotBytes: number;
}

/** The draft model's trunk as planned: its own ring within its own budget (runtime.md 9.3). */
export interface DraftPlan {
  dir: string;
  budgetBytes: number;
  plan: TrunkPlan;
  packedBytes: number;
}

/** How the trunk is held: resident (read whole at open), or streamed from a packed trunk. */
export type TrunkPlacement =
  | { mode: "resident"; bytes: number }
  | { mode: "streamed"; plan: TrunkPlan; packedBytes: number; compressed?: { storedBytes: number; codec: string } };

/** Everything known before anything large is allocated. */
export interface EnginePlan {
  modelDir: string;
  layerCount: number;
  modelLayers: number;
  tensorCount: number;
  shardCount: number;
  indexSeconds: number;
  budgets: Budgets;
  trunk: TrunkPlacement;
  /** Bytes of the bound layers' trunk tensors in the checkpoint. */
  trunkPayloadBytes: number;
  expertCache: ExpertCachePlan;
  memory: MemoryPlan;
  /** MemAvailable when the plan was made; undefined without /proc/meminfo. */
  availableBytes: number | undefined;
  positions: number;
  /** Ids per forward call when a prompt is fed. */
  prefillChunk: number;
  /** Hybrid decode's draft trunk; undefined without --draft-trunk. */
  draft: DraftPlan | undefined;
  /** Ultra-low-memory mode; undefined when the embedding and LM head are resident. */
  ultra: UltraPlan | undefined;
  /** The model's hidden width (E). */
  hiddenSize: number;
  /** The kernel variant and compute threads the run uses. */
  kernels: KernelVariant;
}

export interface EngineEvents {
  /** The plan is made and nothing large is allocated yet; the refusal checks come next. */
  onPlan?: (plan: EnginePlan) => void;
  /** Every layer bound while loading a resident trunk. */
  onLayerBound?: (bound: number, total: number, seconds: number) => void;
  onWarning?: (message: string) => void;
  /** A routed expert failed to load: the tokens of this run are invalid. */
  onDrop?: (drop: ExpertDrop) => void;
  /** The first time a filesystem refuses O_DIRECT (reads then go through the page cache). */
  onBufferedFallback?: (path: string) => void;
}

/**
 * The draft model of hybrid decode: its own streamed trunk and bindings, the exact model's
 * embedding, LM head and final vectors, and the exact model's expert cache through cache-only
 * routing (never a read). Its states are made from `model` like the exact model's.
 */
export interface DraftModel {
  readonly model: Model;
  readonly trunk: StreamedTrunk;
  readonly experts: CacheOnlyExperts;
}

export interface Engine {
  readonly config: ModelConfig;
  readonly plan: EnginePlan;
  readonly model: Model;
  readonly experts: ExpertCache;
  readonly streamed: StreamingTrunk | undefined;
  readonly draft: DraftModel | undefined;
  /** The embedding, LM head and final vectors: resident, or streamed in ultra-low-memory mode. */
  readonly tables: ModelTables;
  readonly loadSeconds: number;
  readonly peakRssAfterLoadBytes: number;
  /** Warnings from binding layers; a streamed trunk binds during the run, so this can grow. */
  readonly warnings: readonly string[];
  /** How many of `warnings` were there when loading finished (and were reported then). */
  readonly warningsAtLoad: number;
  /**
   * MXFP4 scale bytes of 255 (NaN in OCP MX) met so far in this process, each treated as a zero
   * multiplier; a run reports the difference over its own steps.
   */
  badScaleBytes(): number;
  /** When opening started (performance.now), for whole-run wall time. */
  readonly openedAt: number;
  close(): void;
  [Symbol.dispose](): void;
}

export function peakRssBytes(): number {
  // Linux keeps getrusage's ru_maxrss across execve, so a process started by a large parent
  // (posix_spawn shares the parent's memory until the exec) would report the parent's peak;
  // /proc/self/status's VmHWM is this process's own high-water mark.
  if (process.platform === "linux") {
    try {
      const hwm = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "latin1"));
      if (hwm?.[1] !== undefined) return Number(hwm[1]) * 1024;
    } catch {
      // /proc not mounted: fall back to getrusage
    }
  }
  return process.resourceUsage().maxRSS * 1024; // kilobytes
}

/** Bytes of the model-level tensors (embedding, LM head unless tied, norms). */
function tableBytes(index: CheckpointIndex, config: ModelConfig): number {
  return tensorList(modelTensors(config)).reduce((sum, spec) => sum + (index.get(spec.name)?.nbytes ?? 0), 0);
}

/** `use` with a reader of its own, closed after (small reads before the plan is made). */
function withReader<T>(index: CheckpointIndex, use: (reader: TensorReader) => T): T {
  const reader = new TensorReader(index);
  try {
    return use(reader);
  } finally {
    reader.close();
  }
}

export function openEngine(request: EngineRequest, events: EngineEvents = {}): Engine {
  const openedAt = performance.now();
  const { config, layerCount } = request;
  threadsFromEnv(); // a bad K3_THREADS is a usage error before anything is loaded
  const kernels = kernelVariant(); // and a K3_ISA this CPU lacks is refused before anything is read
  setBufferedFallbackReporter(events.onBufferedFallback ?? (() => {}));
  const warn = events.onWarning ?? (() => {});
  if (request.budgets.ultraLowMemory && !request.trunkDir) {
    throw usageError("ultra-low-memory mode (--ultra-low-memory or --preset ultra) needs --trunk: a resident trunk cannot keep its memory bound");
  }
  // Like --draft-trunk-gb without --draft-trunk: a flag that cannot take effect is refused. A
  // preset still sets the expert cache, so it runs, with a word that its trunk part is unused.
  if (!request.trunkDir && trunkBudgetGiven(request.budgets.actions)) throw usageError("--trunk-gb is the streamed trunk's budget: it needs --trunk DIR");
  if (!request.trunkDir && request.budgets.actions.some((b) => b.kind === "preset" || b.kind === "auto")) {
    warn("--preset without --trunk: the trunk is held resident, so only the preset's expert cache budget applies");
  }
  const index = indexCheckpoint(request.modelDir);
  const indexSeconds = (performance.now() - openedAt) / 1000;
  checkBindable(index, config, layerCount);
  const layouts = Array.from({ length: layerCount }, (_, l) => layerLayout(index, config, l));
  // Each resident layer: its bytes, the read's alignment window, and its widened vectors.
  const residentBytes = layouts.reduce((sum, layout) => sum + readCapacity(layout.bytes) + vectorBytes(layout), 0);
  const memory = readMemory();
  const budgets = resolveBudgets(request.budgets, memory, { trunkBytes: residentBytes, tablesBytes: tableBytes(index, config) });
  const walk = budgets.ultraLowMemory ? lmHeadWalk(index, config) : undefined;
  const ultra: UltraPlan | undefined = walk && {
    rowsPerChunk: walk.rowsPerChunk, chunks: walk.chunks, residentBytes: streamedTableBytes(index, config),
    oneRecurrentSlot: request.mode === "recompute", recurrentSlotBytes: recurrentSlotBytes(config),
  };
  const tablesBytes = ultra ? ultra.residentBytes : tableBytes(index, config);
  const packed = request.trunkDir ? withReader(index, (reader) => openPackedTrunk(request.trunkDir as string, layouts, reader)) : undefined;
  const compressed = packed?.compressed;
  const compressedPlan: CompressedTrunkPlan | undefined = compressed
    ? planCompressedTrunk(compressed.storedCosts, compressed.decodedSlotBytes, budgets.trunkBytes, stagingPiece(request.stagingPieceBytes ?? compressed.largestStoredBytes))
    : undefined;
  const streamedPlan: TrunkPlan | undefined = packed && (compressedPlan ?? planTrunk(packed.layerCosts, budgets.trunkBytes));
  const trunk: TrunkPlacement = packed && streamedPlan
    ? {
      mode: "streamed", plan: streamedPlan, packedBytes: packed.packedBytes,
      ...(compressed && { compressed: { storedBytes: compressed.storedBytes, codec: compressed.codec.name } }),
    }
    : { mode: "resident", bytes: residentBytes };
  const expertCache = planExpertCache(index, config, layerCount, budgets.cacheBytes);
  const draftPacked = request.draft ? withReader(index, (reader) => openDraftTrunk((request.draft as { trunkDir: string }).trunkDir, layouts, reader)) : undefined;
  const draft: DraftPlan | undefined = request.draft && draftPacked && {
    dir: request.draft.trunkDir, budgetBytes: request.draft.budgetBytes,
    plan: planTrunk(draftPacked.layerCosts, request.draft.budgetBytes), packedBytes: draftPacked.packedBytes,
  };
  let planInputs: PlanInputs;
  const plan: EnginePlan = {
    modelDir: request.modelDir, layerCount, modelLayers: config.numLayers, tensorCount: index.tensorCount,
    shardCount: index.shards.length, indexSeconds, budgets, trunk, expertCache, positions: request.positions,
    prefillChunk: request.prefillChunk, draft, ultra, hiddenSize: config.hiddenSize, kernels,
    trunkPayloadBytes: layouts.reduce((sum, l) => sum + l.bytes, 0),
    availableBytes: memory?.availableBytes,
    memory: memoryPlan(planInputs = {
      config, layerCount, positions: request.positions, callTokens: request.prefillChunk, sequences: request.sequences,
      trunk: { mode: trunk.mode, bytes: trunk.mode === "streamed" ? trunk.plan.bytes : trunk.bytes },
      tablesBytes, expertCacheBytes: expertCache.slots * expertCache.slotBytes, baselineBytes: process.memoryUsage().rss,
      snapshotBytes: request.snapshotBytes ?? 0, sweepTokens: request.speculative ? request.speculative + 1 : undefined,
      draft: draft && { trunkBytes: draft.plan.bytes }, tablesStreamed: ultra !== undefined, oneRecurrentSlot: ultra?.oneRecurrentSlot,
    }),
  };
  events.onPlan?.(plan);
  // More sequences than fit is said as such first, naming the most that do; then the KV preflight.
  const sequences = request.sequences ?? 1;
  if (sequences > 1 && plan.availableBytes !== undefined && plan.memory.totalBytes > 0.95 * plan.availableBytes) {
    const fit = sequencesFitting(planInputs, plan.availableBytes);
    throw new K3Error(
      ExitCode.runtime,
      `REFUSING TO START: --parallel ${sequences} needs ${formatBytes(plan.memory.totalBytes)} but only ${formatBytes(plan.availableBytes)} is available (95% usable); ` +
        (fit > 0 ? `at most --parallel ${fit} fits` : "not even one sequence fits: lower --cache-gb or --trunk-gb"),
    );
  }
  checkKvFits(plan.memory, plan.availableBytes, request.positions);
  checkPlanFits(plan.memory, plan.availableBytes);

  using opened = new DisposableStack();
  // First in, so closed last: the expert cache reads through the reader's shard files.
  const reader = opened.adopt(new TensorReader(index), (r) => r.close());
  const loadStarted = performance.now();
  const warnings: string[] = [];
  let streamed: StreamingTrunk | undefined;
  if (packed && compressed && compressedPlan) {
    const tables = readTables(packed.dir, packed.layers, compressed.codec, compressedPlan.pieceBytes);
    streamed = opened.adopt(new CompressedTrunk(packed.dir, tables, packed.layouts, compressed.codec, config, compressedPlan, warnings, request.trunkReadFaults), (t) => t.close());
  } else if (packed && streamedPlan) {
    streamed = opened.adopt(new StreamedTrunk(packed, config, streamedPlan, warnings, request.trunkReadFaults), (t) => t.close());
  }
  const onLayer = (bound: number) => events.onLayerBound?.(bound, layerCount, (performance.now() - loadStarted) / 1000);
  const held: Trunk = streamed ?? opened.adopt(new ResidentTrunk(index, reader, config, layouts, warnings, onLayer), (t) => t.close());
  const tables = opened.adopt(ultra ? openStreamedTables(index, reader, config) : loadModelTables(index, reader, config), (t) => t.close());
  reader.releaseScratch(); // loading is done; nothing should hold a read-sized buffer now
  const experts = opened.adopt(
    new ExpertCache(index, config, expertCache, reader.files, { faults: request.faults, trace: request.trace, onDrop: events.onDrop }),
    (e) => e.close(),
  );
  const model = opened.adopt(new Model(config, held, tables, experts, request.positions, { oneRecurrentSlot: ultra?.oneRecurrentSlot }), (m) => m.close());
  let draftModel: DraftModel | undefined;
  if (draft && draftPacked) {
    const trunk = opened.adopt(new StreamedTrunk(draftPacked, config, draft.plan, warnings), (t) => t.close());
    const cacheOnly = new CacheOnlyExperts(experts);
    draftModel = { model: opened.adopt(new Model(config, trunk, tables, cacheOnly, request.positions), (m) => m.close()), trunk, experts: cacheOnly };
  }
  for (const warning of warnings) warn(warning);
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  const owned = opened.move(); // opened: from here the engine owns everything
  const close = () => owned.dispose();
  return {
    config, plan, model, experts, streamed, draft: draftModel, tables, loadSeconds, peakRssAfterLoadBytes: peakRssBytes(), openedAt,
    warnings, warningsAtLoad: warnings.length, badScaleBytes,
    close, [Symbol.dispose]: close,
  };
}
