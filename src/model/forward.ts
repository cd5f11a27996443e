/**
 * The Kimi K3 forward pass (model.md 6.9): embed → each layer (AttnRes → KDA | MLA → AttnRes →
 * dense | LatentMoE) → output aggregator → final norm → LM head, over the new tokens of a step,
 * continuing the sequence state. Reads top to bottom as the model's equations.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import * as kernels from "../native/kernels.ts";
import { stopIfSignalled } from "../native/signals.ts";
import type { ExpertSource } from "../weights/experts.ts";
import type { ModelTables } from "../weights/model-tables.ts";
import type { Trunk } from "../weights/trunk.ts";
import { denseMlp, kda, latentMoe, mla, replayKda, type BlockContext, type Segment } from "./blocks.ts";
import { F32Pool, type F32 } from "./f32.ts";
import type { BatchedCall, BatchForward, Forward, Outputs, RunOptions } from "./sequence.ts";
import { SequenceState, StateSnapshot } from "./state.ts";

type BatchStep = BatchedCall<SequenceState>;

export class Model implements Forward<SequenceState>, BatchForward<SequenceState> {
  readonly config: ModelConfig;
  readonly vocabSize: number;
  readonly #trunk: Trunk;
  readonly #tables: ModelTables;
  readonly #experts: ExpertSource;
  readonly #capacity: number;
  readonly #oneRecurrentSlot: boolean;
  /**
   * Activations, reused so nothing is allocated once the largest step has run: the step pool
   * holds what lives across layers (the embedding, the block list, the running sum), the layer
   * pool what one layer needs, and it is recycled at every layer, so memory does not grow with
   * depth.
   */
  readonly #stepPool = new F32Pool();
  readonly #layerPool = new F32Pool();

  /**
   * `oneRecurrentSlot`: states share one KDA slot across layers (ultra-low-memory full recompute,
   * runtime.md 2.4); each such state takes one pass over its whole sequence.
   */
  constructor(config: ModelConfig, trunk: Trunk, tables: ModelTables, experts: ExpertSource, capacity: number, options: { oneRecurrentSlot?: boolean } = {}) {
    this.config = config;
    this.vocabSize = config.vocabSize;
    this.#trunk = trunk;
    this.#tables = tables;
    this.#experts = experts;
    this.#capacity = capacity;
    this.#oneRecurrentSlot = options.oneRecurrentSlot ?? false;
  }

  newState(): SequenceState {
    return new SequenceState(this.config, this.#trunk.layerCount, this.#capacity, { oneRecurrentSlot: this.#oneRecurrentSlot });
  }

  release(state: SequenceState): void {
    state.free();
  }

  run(state: SequenceState, ids: readonly number[], outputs: Outputs = "last", options: RunOptions = {}): Float32Array {
    return this.runBatch([{ state, ids, outputs, replayable: options.replayable }])[0] as Float32Array;
  }

  /**
   * One step for several sequences: each step's `ids` after what its state has consumed, all
   * of them through one read of every layer (and one load of each expert any of them picked).
   * Returns each step's logits, in order: the bits `run` gives that step alone, whatever else
   * is in the batch and wherever (the operators that read a sequence's history run on its own
   * rows; every other one gives each row the bits it gets alone).
   */
  runBatch(steps: readonly BatchStep[]): Float32Array[] {
    const c = this.config;
    const E = c.hiddenSize;
    if (steps.length === 0) throw new Error("a batch of no sequences");
    if (new Set(steps.map((s) => s.state)).size !== steps.length) throw new Error("a batch holds one step per sequence");
    const segments: (Segment & { step: BatchStep; first: number })[] = [];
    let T = 0;
    for (const step of steps) {
      const { state, ids } = step;
      const first = state.position;
      if (ids.length === 0) throw new Error("a step of no ids");
      if (first + ids.length > state.capacity) throw new Error(`sequence of ${first + ids.length} positions exceeds the state's ${state.capacity}`);
      if (state.oneRecurrentSlot && (first > 0 || steps.length > 1)) throw new Error("a one-slot state takes one pass over its whole sequence, alone, not a continuation");
      state.recorded = undefined; // this call moves the state on: an earlier record no longer starts where it is
      segments.push({ start: T, rows: ids.length, step, first });
      T += ids.length;
    }
    const stepPool = this.#stepPool;
    const pool = this.#layerPool;
    stepPool.reset();
    const ctx: BlockContext = { config: c, pool, tokens: T };
    const embedded = stepPool.alloc(T * E, "embeddings");
    this.#tables.embed(steps.flatMap((s) => [...s.ids]), embedded); // an exact widen of one row each, no scaling
    const blocks: F32[] = []; // B: completed block representations, the embedding first
    let partial: F32 | undefined = embedded; // r: the running sum of the current block
    for (let layer = 0; layer < this.#trunk.layerCount; layer++) {
      stopIfSignalled(); // Ctrl-C lands within a layer's time, even in a long prefill chunk
      pool.reset();
      const w = this.#trunk.layer(layer);
      const r = partial as F32;
      let a = r;
      if (blocks.length > 0) {
        a = pool.alloc(T * E, "attnres pre-attention");
        kernels.attnRes([...blocks, r], w.phiAttn, a, undefined, T, E, c.rmsNormEps);
      }
      if (layer % c.attnResBlockSize === 0) {
        blocks.push(r); // boundary: snapshot after aggregating, then start a new block
        partial = undefined;
      }
      const normed = pool.alloc(T * E, "input norm");
      kernels.rmsnorm(a, w.inputNorm, normed, T, E, c.rmsNormEps);
      let attended: F32;
      if (w.attention.kind === "kda") {
        const kdaSegments = segments.map((s) => {
          const state = s.step.state;
          if (state.oneRecurrentSlot) state.clearRecurrentSlot(); // this layer's turn of the one slot
          return { ...s, state: state.kda.get(layer)!, record: s.step.replayable ? state.replayRecord(layer, s.rows) : undefined };
        });
        attended = kda(ctx, w.attention, kdaSegments, normed);
      } else {
        attended = mla(ctx, w.attention, segments.map((s) => ({ ...s, cache: s.step.state.mla.get(layer)! })), normed);
      }
      // Layer 0 is always a boundary, so `partial` is never the embedding snapshot here.
      if (partial) {
        kernels.add(partial, attended, partial, T * E);
      } else {
        partial = stepPool.alloc(T * E, "running sum"); // outlives this layer's pool
        partial.copyFrom(attended);
      }
      const m = pool.alloc(T * E, "attnres pre-ffn");
      kernels.attnRes([...blocks, partial], w.phiMlp, m, undefined, T, E, c.rmsNormEps);
      const ffnIn = pool.alloc(T * E, "post-attention norm");
      kernels.rmsnorm(m, w.postNorm, ffnIn, T, E, c.rmsNormEps);
      const ffnOut = w.ffn.kind === "dense" ? denseMlp(ctx, w.ffn, ffnIn, T) : latentMoe(ctx, w.ffn, this.#experts, layer, ffnIn);
      kernels.add(partial, ffnOut, partial, T * E);
    }
    pool.reset();
    // Aggregate, normalise and project only the rows asked for: decoding needs each step's last.
    const outRows = segments.flatMap((s) => (s.step.outputs === "all" ? Array.from({ length: s.rows }, (_, i) => s.start + i) : [s.start + s.rows - 1]));
    const rows = outRows.length;
    const sources = [...blocks, partial as F32].map((x) => this.#pickRows(x, outRows, E, pool));
    const out = pool.alloc(rows * E, "output aggregate");
    kernels.attnRes(sources, this.#tables.phiOut, out, undefined, rows, E, c.rmsNormEps);
    const normed = pool.alloc(rows * E, "final norm");
    kernels.rmsnorm(out, this.#tables.finalNorm, normed, rows, E, c.rmsNormEps);
    const logits = pool.alloc(rows * c.vocabSize, "logits");
    this.#tables.project(normed, logits, rows);
    const V = c.vocabSize;
    let at = 0;
    return segments.map((s) => {
      const n = s.step.outputs === "all" ? s.rows : 1;
      const state = s.step.state;
      state.position += s.rows;
      if (s.step.replayable) state.recorded = { first: s.first, tokens: s.rows };
      const own = logits.a.slice(at * V, (at + n) * V);
      at += n;
      return own;
    });
  }

  /** The rows `picked` (ascending) of [rows][width] `x`: a view when they run on without a gap, else gathered. */
  #pickRows(x: F32, picked: readonly number[], width: number, pool: F32Pool): F32 {
    const firstRow = picked[0] as number;
    if (picked.every((row, i) => row === firstRow + i)) return x.sub(firstRow * width, picked.length * width);
    const gathered = pool.alloc(picked.length * width, "output rows");
    picked.forEach((row, i) => gathered.a.set(x.row(row, width).a, i * width));
    return gathered;
  }

  /**
   * Takes `state` back to `snapshot` (taken just before its last call, a replayable one) and
   * forward over that call's first `tokens` ids, exactly as feeding them would, from what the
   * call recorded: no weight is read. The MLA rows of those positions were written by the call
   * and are the same bits a call over only them writes (chunking never changes the bits); rows
   * past them are stale and unreachable until rewritten.
   */
  replay(state: SequenceState, snapshot: unknown, tokens: number): void {
    if (!(snapshot instanceof StateSnapshot)) throw new Error("replay: the snapshot is not a sequence state's");
    const recorded = state.recorded;
    if (!recorded || recorded.first !== snapshot.position || tokens < 1 || tokens > recorded.tokens) {
      throw new Error(`replay: ${tokens} ids from position ${snapshot.position}, but the last replayable call recorded ${recorded ? `${recorded.tokens} from ${recorded.first}` : "nothing"}`);
    }
    state.restore(snapshot);
    const pool = this.#layerPool;
    for (const [layer, kdaState] of state.kda) {
      pool.reset();
      replayKda({ config: this.config, pool, tokens }, kdaState, state.replayRecord(layer, recorded.tokens));
    }
    pool.reset();
    state.position = snapshot.position + tokens;
    state.recorded = undefined;
  }

  /** Frees the activation buffers (the weights belong to the trunk and tables). */
  close(): void {
    this.#stepPool.free();
    this.#layerPool.free();
  }
}
