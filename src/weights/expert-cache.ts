/**
 * The routed-expert cache (runtime.md section 6): one native arena cut into slots sized from
 * the checkpoint, LRU over slots, and a batch load per token and layer: every selected expert
 * that is not resident is reserved (INFLIGHT, never EMPTY, so two reads can't share a slot),
 * read on the background I/O threads in (shard, offset) order, and published only once its
 * read succeeded. The forward pass then takes the experts in top-k order, computing on those
 * already present while the rest are still arriving.
 *
 * An expert that cannot be read is dropped from its token's sum and counted; the run then
 * reports the tokens as corrupt and exits 4 (runtime.md 6.5). It is never skipped silently.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { expertTensors, ffnKind } from "../checkpoint/tensor-names.ts";
import { entriesOf, placeTensors } from "../checkpoint/tensor-run.ts";
import { K3Error, ExitCode } from "../errors.ts";
import type { PendingRead } from "../native/file.ts";
import { allocAlignment, NativeBuffer } from "../native/memory.ts";
import { ExpertTraceRecorder } from "./expert-trace.ts";
import type { ShardFiles } from "./shard-files.ts";
import type { ExpertWeights } from "./types.ts";

/** One expert's six tensors, relative to the start of its run on disk. */
interface ExpertLocation {
  shard: number;
  start: number;
  bytes: number;
  /** w1 packed, w1 scale, w2 packed, w2 scale, w3 packed, w3 scale offsets from `start`. */
  offsets: [number, number, number, number, number, number];
}

export interface ExpertStepStats {
  /** Routing picks: top-k for every token of every MoE layer (a chunk's tokens share loads). */
  picks: number;
  /** Distinct experts asked for: per chunk and layer, the union of its tokens' picks. */
  requests: number;
  /** Served from RAM: resident before this token's batch asked for it. */
  residentHits: number;
  /** Read from disk this step (by the batch). */
  reads: number;
  evictions: number;
  bytesRead: number;
  /** Device seconds of those reads (they overlap compute and each other, so they can add up past wall time). */
  readSeconds: number;
  /** Seconds the forward pass spent waiting for expert reads. */
  waitSeconds: number;
  drops: number;
}

export const emptyStats = (): ExpertStepStats => ({ picks: 0, requests: 0, residentHits: 0, reads: 0, evictions: 0, bytesRead: 0, readSeconds: 0, waitSeconds: 0, drops: 0 });

/** Adds every counter of `from` into `into`. */
export function addStats(into: ExpertStepStats, from: ExpertStepStats): void {
  for (const key of Object.keys(into) as (keyof ExpertStepStats)[]) into[key] += from[key];
}

export interface ExpertDrop {
  layer: number;
  expert: number;
  reason: string;
}

export interface ExpertCacheOptions {
  /** Fault injection for tests: these "layer:expert" keys read from past the end of their shard. */
  faults?: ReadonlySet<string>;
  trace?: boolean;
  /** Told about each drop as it happens, so the report names the step it spoiled. */
  onDrop?: (drop: ExpertDrop) => void;
}

export interface ExpertCachePlan {
  slotBytes: number;
  slots: number;
  requestedSlots: number;
  minimumSlots: number;
  totalExperts: number;
}

/** Slot size (expert bytes + 2 windows, aligned for direct reads) and count for a budget. */
export function planExpertCache(index: CheckpointIndex, config: ModelConfig, layerCount: number, budgetBytes: number): ExpertCachePlan {
  const moeLayers = Array.from({ length: layerCount }, (_, l) => l).filter((l) => ffnKind(config, l) === "moe");
  const totalExperts = moeLayers.length * config.numExperts;
  const probe = moeLayers.length > 0 ? locate(index, config, moeLayers[0] as number, 0) : undefined;
  const expertBytes = probe?.bytes ?? 0;
  const alignment = allocAlignment();
  const slotBytes = Math.ceil((expertBytes + 2 * alignment) / alignment) * alignment;
  const minimumSlots = config.numExpertsPerToken + 1;
  const requestedSlots = Math.floor(budgetBytes / slotBytes);
  const slots = totalExperts === 0 ? 0 : Math.min(Math.max(requestedSlots, minimumSlots), totalExperts);
  return { slotBytes, slots, requestedSlots, minimumSlots, totalExperts };
}

function locate(index: CheckpointIndex, config: ModelConfig, layer: number, expert: number): ExpertLocation {
  const { run, bytes, offsets } = placeTensors(entriesOf(index, expertTensors(config, layer, expert)));
  if (!run) {
    // The release stores each expert as one run; k3 relies on it to read an expert at once.
    throw new K3Error(ExitCode.runtime, `${index.dir}: the six tensors of expert ${expert} of layer ${layer} are not one contiguous run in one shard`);
  }
  return { shard: run.shard, start: run.start, bytes, offsets: offsets as ExpertLocation["offsets"] };
}

type SlotState =
  | { kind: "empty" }
  /** Chosen for a read of this batch that has not been issued yet: not a victim, not a hit. */
  | { kind: "reserved"; key: number }
  | { kind: "inflight"; key: number; read: PendingRead }
  | { kind: "resident"; key: number; payload: number };

export class ExpertCache {
  readonly plan: ExpertCachePlan;
  readonly #index: CheckpointIndex;
  readonly #config: ModelConfig;
  #arena: NativeBuffer | undefined;
  readonly #slots: SlotState[];
  /** Monotonic use stamps; the smallest is the least recently used. */
  readonly #stamps: Float64Array;
  #clock = 0;
  readonly #where = new Map<number, number>();
  readonly #locations = new Map<number, ExpertLocation>();
  /** The tensor reader's files: it closes them, after this cache has collected its reads. */
  readonly #files: ShardFiles;
  readonly #faults: ReadonlySet<string>;
  readonly #onDrop: (drop: ExpertDrop) => void;
  /** Keys of the batch being served: never evicted while the token still needs them. */
  #batch = new Set<number>();
  /** Keys the batch had to read (the rest were resident hits). */
  #readThisBatch = new Set<number>();
  step: ExpertStepStats = emptyStats();
  readonly total: ExpertStepStats = emptyStats();
  readonly drops: ExpertDrop[] = [];
  readonly trace: ExpertTraceRecorder | undefined;
  /** Every read this cache has issued, ever (counters above reset per step; this one never does). */
  readsIssued = 0;
  /** Bytes of every read collected, ever (a server's totals across requests). */
  bytesReadEver = 0;
  /** Expert requests ever, and those that found their expert already in RAM (a server's retention). */
  requestsEver = 0;
  retainedEver = 0;

  /** `plan` (from `planExpertCache`) sets the slots; reads go through the reader's `files`. */
  constructor(index: CheckpointIndex, config: ModelConfig, plan: ExpertCachePlan, files: ShardFiles, options: ExpertCacheOptions = {}) {
    this.#index = index;
    this.#config = config;
    this.#files = files;
    this.plan = plan;
    this.#faults = options.faults ?? new Set();
    this.#onDrop = options.onDrop ?? (() => {});
    this.#slots = Array.from({ length: this.plan.slots }, () => ({ kind: "empty" }));
    this.#stamps = new Float64Array(this.plan.slots);
    this.trace = options.trace ? new ExpertTraceRecorder(config.numLayers, config.numExperts) : undefined;
  }

  #key(layer: number, expert: number): number {
    return layer * this.#config.numExperts + expert;
  }

  #location(key: number): ExpertLocation {
    let location = this.#locations.get(key);
    if (!location) {
      location = locate(this.#index, this.#config, Math.floor(key / this.#config.numExperts), key % this.#config.numExperts);
      this.#locations.set(key, location);
    }
    return location;
  }

  /** Starts a new decode step's counters (the whole-run totals keep accumulating). */
  beginStep(): void {
    this.step = emptyStats();
  }

  #victim(): number {
    let best = -1;
    for (let s = 0; s < this.#slots.length; s++) {
      const slot = this.#slots[s]!;
      if (slot.kind === "empty") return s;
      if (slot.kind !== "resident" || this.#batch.has(slot.key)) continue;
      if (best < 0 || this.#stamps[s]! < this.#stamps[best]!) best = s;
    }
    if (best < 0) throw new Error("expert cache: every slot is in use by this batch (fewer than top-k + 1 slots)");
    return best;
  }

  /** Experts a batch can hold at once: a union larger than this is loaded in waves. */
  get waveCapacity(): number {
    return this.plan.slots;
  }

  /** One token's routing picks for `layer`, in top-k order: counted, and traced in token order. */
  pick(layer: number, experts: readonly number[]): void {
    this.step.picks += experts.length;
    if (this.trace) for (const expert of experts) this.trace.append(layer, expert);
  }

  /**
   * Starts a batch for `layer` (a token's top-k, or a wave of a chunk's union): reserves slots for the selected experts that are not
   * resident and starts their reads, sorted by (shard, offset) so the device sees a forward
   * sweep. Resident experts of the batch are protected from eviction until the next batch.
   */
  prefetch(layer: number, experts: readonly number[]): void {
    this.#batch = new Set(experts.map((e) => this.#key(layer, e)));
    this.#readThisBatch = new Set();
    this.#load([...this.#batch].filter((key) => !this.#where.has(key)));
  }

  #load(keys: readonly number[]): void {
    // The arena is allocated on first use, after the memory plan has been printed and checked.
    this.#arena ??= NativeBuffer.allocate(this.plan.slots * this.plan.slotBytes, "the expert cache", "read-target");
    const reservations = keys.map((key) => {
      const slot = this.#victim();
      const previous = this.#slots[slot]!;
      if (previous.kind === "resident") {
        this.#where.delete(previous.key);
        this.step.evictions++;
      }
      // Reserved from the moment it is chosen (runtime.md 6.3 step 1): the next reservation of
      // this batch cannot take the same slot.
      this.#slots[slot] = { kind: "reserved", key };
      this.#stamps[slot] = ++this.#clock;
      this.#where.set(key, slot);
      return { key, slot, location: this.#location(key) };
    });
    reservations.sort((a, b) => a.location.shard - b.location.shard || a.location.start - b.location.start);
    for (const { key, slot, location } of reservations) {
      const layer = Math.floor(key / this.#config.numExperts);
      const expert = key % this.#config.numExperts;
      // Fault injection reads past the end of the shard, so the real failure path runs.
      const faulty = this.#faults.has(`${layer}:${expert}`);
      const offset = faulty ? this.#index.shards[location.shard]!.fileBytes + allocAlignment() : location.start;
      const read = this.#files.get(location.shard).submit(offset, location.bytes, this.#arena!, slot * this.plan.slotBytes);
      this.#slots[slot] = { kind: "inflight", key, read };
      this.readsIssued++;
      this.#readThisBatch.add(key);
    }
  }

  /** The expert, waiting for its read if needed; undefined if it could not be loaded (a drop). */
  get(layer: number, expert: number): ExpertWeights | undefined {
    const key = this.#key(layer, expert);
    this.step.requests++;
    this.requestsEver++;
    if (!this.#batch.has(key)) {
      this.#batch.add(key); // asked outside a batch: load it on its own
      if (!this.#where.has(key)) this.#load([key]);
    }
    const slot = this.#where.get(key) as number;
    const state = this.#slots[slot]!;
    if (state.kind === "inflight") {
      try {
        const waitStarted = performance.now();
        const { payload, seconds } = state.read.wait();
        this.step.waitSeconds += (performance.now() - waitStarted) / 1000;
        const location = this.#location(key);
        this.step.reads++;
        this.step.bytesRead += location.bytes;
        this.bytesReadEver += location.bytes;
        this.step.readSeconds += seconds;
        this.#slots[slot] = { kind: "resident", key, payload };
      } catch (error) {
        this.#slots[slot] = { kind: "empty" };
        this.#where.delete(key);
        return this.#drop(layer, expert, (error as Error).message);
      }
    } else if (state.kind === "resident" && !this.#readThisBatch.has(key)) {
      this.step.residentHits++;
      this.retainedEver++;
    }
    this.#stamps[slot] = ++this.#clock;
    return this.#weightsIn(slot, layer, expert);
  }

  /** The tensors of the resident expert in `slot`. */
  #weightsIn(slot: number, layer: number, expert: number): ExpertWeights {
    const resident = this.#slots[slot] as { kind: "resident"; payload: number };
    const location = this.#location(this.#key(layer, expert));
    const base = slot * this.plan.slotBytes + resident.payload;
    const [w1Packed, w1Scale, w2Packed, w2Scale, w3Packed, w3Scale] = location.offsets.map((o) => base + o) as ExpertLocation["offsets"];
    return { layer, expert, buffer: this.#arena!, w1Packed, w1Scale, w2Packed, w2Scale, w3Packed, w3Scale };
  }

  /**
   * The expert if it is resident now, else undefined; never a read, and nothing changes: no
   * statistics, no use stamp, no batch. The hybrid draft routes through this (runtime.md 9.3),
   * so drafting leaves the exact model's cache, and what it will read, exactly as they were.
   */
  peek(layer: number, expert: number): ExpertWeights | undefined {
    const slot = this.#where.get(this.#key(layer, expert));
    if (slot === undefined || this.#slots[slot]!.kind !== "resident") return undefined;
    return this.#weightsIn(slot, layer, expert);
  }

  #drop(layer: number, expert: number, reason: string): undefined {
    this.step.drops++;
    const drop = { layer, expert, reason };
    this.drops.push(drop);
    this.#onDrop(drop);
    return undefined;
  }

  /** Adds the step's counters to the whole-run totals. */
  endStep(): void {
    addStats(this.total, this.step);
  }

  /** Slots holding an expert now, for reports. */
  get residentSlots(): number {
    return this.#slots.filter((s) => s.kind === "resident").length;
  }

  close(): void {
    for (const slot of this.#slots) if (slot.kind === "inflight") {
      try {
        slot.read.wait();
      } catch {
        // Closing: the read's outcome no longer matters, only that it has landed.
      }
    }
    this.#arena?.free();
  }
}
