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
import { denseMlp, kda, latentMoe, mla, replayKda, type BlockContext } from "./blocks.ts";
import { F32Pool, type F32 } from "./f32.ts";
import type { Forward, Outputs, RunOptions } from "./sequence.ts";
import { SequenceState, StateSnapshot } from "./state.ts";

export class Model implements Forward<SequenceState> {
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
    const c = this.config;
    const T = ids.length;
    const E = c.hiddenSize;
    const first = state.position;
    if (first + T > state.capacity) throw new Error(`sequence of ${first + T} positions exceeds the state's ${state.capacity}`);
    if (state.oneRecurrentSlot && first > 0) throw new Error("a one-slot state takes one pass over its whole sequence, not a continuation");
    state.recorded = undefined; // this call moves the state on: an earlier record no longer starts where it is
    const stepPool = this.#stepPool;
    const pool = this.#layerPool;
    stepPool.reset();
    const ctx: BlockContext = { config: c, pool, tokens: T };
    const embedded = stepPool.alloc(T * E, "embeddings");
    this.#tables.embed(ids, embedded); // an exact widen of one row each, no scaling
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
      if (w.attention.kind === "kda" && state.oneRecurrentSlot) state.clearRecurrentSlot(); // this layer's turn of the one slot
      const attended = w.attention.kind === "kda"
        ? kda(ctx, w.attention, state.kda.get(layer)!, normed, options.replayable ? state.replayRecord(layer, T) : undefined)
        : mla(ctx, w.attention, state.mla.get(layer)!, first, normed);
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
    // Aggregate, normalise and project only the rows asked for: decoding needs the last.
    const rows = outputs === "all" ? T : 1;
    const sources = [...blocks, partial as F32].map((x) => (outputs === "all" ? x : x.row(T - 1, E)));
    const out = pool.alloc(rows * E, "output aggregate");
    kernels.attnRes(sources, this.#tables.phiOut, out, undefined, rows, E, c.rmsNormEps);
    const normed = pool.alloc(rows * E, "final norm");
    kernels.rmsnorm(out, this.#tables.finalNorm, normed, rows, E, c.rmsNormEps);
    const logits = pool.alloc(rows * c.vocabSize, "logits");
    this.#tables.project(normed, logits, rows);
    state.position += T;
    if (options.replayable) state.recorded = { first, tokens: T };
    return logits.a.slice();
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
