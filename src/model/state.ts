/**
 * What one sequence carries between forward calls (model.md section 9), and nothing else:
 * per KDA layer the recurrent matrices and the ShortConv histories, per MLA layer the latent
 * cache (the normalised c_kv and the shared rope key of every position: kv_lora_rank +
 * qk_rope_head_dim floats, never the expanded keys and values), and the position count.
 *
 * KDA and the convolutions fold every past token into fixed-size state, so a sequence cannot be
 * trimmed back to an earlier position: going back means restoring a snapshot taken there.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { attentionKind } from "../checkpoint/tensor-names.ts";
import { F32, F32Pool } from "./f32.ts";

export interface KdaState {
  /** [heads][dim][dim]: row = key channel, column = value channel. */
  recurrent: F32;
  /** [P][Kc-1] raw projection outputs, oldest first. */
  convQ: F32;
  convK: F32;
  convV: F32;
}

export interface MlaCache {
  /** [capacity][kvLoraRank]: per position the kv_a_layernorm output, shared by all heads. */
  latent: F32;
  /** [capacity][dr], one rope key per position shared by all heads. */
  kr: F32;
}

/**
 * What one KDA layer's recurrence and conv histories consumed during the last replayable call
 * (a verification sweep), position by position: enough to bring the layer from a snapshot taken
 * before the call to any prefix of the call's positions without its weights (runtime.md 9.2).
 * Rows are [tokens][P] (beta [tokens][heads]), the first `recorded.tokens` valid.
 */
export interface KdaReplayRecord {
  /** The raw projections, as the conv histories take them. */
  qRaw: F32;
  kRaw: F32;
  vRaw: F32;
  /** The recurrence's inputs: k L2-normalised, v, the decay and the write strength. */
  k: F32;
  v: F32;
  alpha: F32;
  beta: F32;
}

/** The kinds of carried buffer, in the order a layer's sections are stored. */
const sectionKinds = ["kda recurrent", "kda conv q", "kda conv k", "kda conv v", "mla latent", "mla kr"] as const;
type SectionKind = (typeof sectionKinds)[number];

/** One carried buffer: whole for KDA, the first `position` rows for the MLA cache. */
interface Section {
  layer: number;
  kind: SectionKind;
  buffer: F32;
  /** Floats per position for the MLA cache (the stored part grows with position); 0 for KDA. */
  rowFloats: number;
}

const floatsAt = (s: Section, position: number) => (s.rowFloats > 0 ? s.rowFloats * position : s.buffer.length);

export class SequenceState {
  /** Positions consumed so far. */
  position = 0;
  readonly capacity: number;
  readonly config: ModelConfig;
  readonly kda = new Map<number, KdaState>();
  readonly mla = new Map<number, MlaCache>();
  /**
   * Ultra-low-memory full recompute (runtime.md 2.4): every KDA layer shares one recurrent slot,
   * cleared before each layer uses it. Safe only for one pass over the whole sequence from
   * position 0, because no later layer reads an earlier layer's KDA state within a pass; such a
   * state cannot be snapshot, written out or fed twice.
   */
  readonly oneRecurrentSlot: boolean;
  /**
   * The last replayable call: the position it started at and its positions, while each KDA
   * layer's record still holds them; any other call clears it (its rows would be stale).
   */
  recorded: { first: number; tokens: number } | undefined;
  readonly #pool = new F32Pool();
  /** Per KDA layer, allocated on the first replayable call and replaced by a larger one when a call needs it. */
  readonly #records = new Map<number, { tokens: number; record: KdaReplayRecord; pool: F32Pool }>();

  constructor(config: ModelConfig, layerCount: number, capacity: number, options: { oneRecurrentSlot?: boolean } = {}) {
    this.capacity = capacity;
    this.config = config;
    this.oneRecurrentSlot = options.oneRecurrentSlot ?? false;
    const c = config;
    const P = c.kdaNumHeads * c.kdaHeadDim;
    let shared: KdaState | undefined;
    for (let layer = 0; layer < layerCount; layer++) {
      if (attentionKind(c, layer) === "kda") {
        const history = P * (c.shortConvKernel - 1);
        const slot = shared ?? {
          recurrent: this.#pool.alloc(c.kdaNumHeads * c.kdaHeadDim * c.kdaHeadDim, `KDA state of layer ${layer}`),
          convQ: this.#pool.alloc(history, "conv history"),
          convK: this.#pool.alloc(history, "conv history"),
          convV: this.#pool.alloc(history, "conv history"),
        };
        if (this.oneRecurrentSlot) shared = slot;
        this.kda.set(layer, slot);
      } else {
        this.mla.set(layer, {
          latent: this.#pool.alloc(capacity * c.kvLoraRank, `MLA latent cache of layer ${layer}`),
          kr: this.#pool.alloc(capacity * c.qkRopeHeadDim, `MLA rope keys of layer ${layer}`),
        });
      }
    }
  }

  /** The replay record of KDA layer `layer`, with room for `tokens` positions. */
  replayRecord(layer: number, tokens: number): KdaReplayRecord {
    if (this.oneRecurrentSlot) throw new Error("a one-slot recompute state cannot be replayed");
    const held = this.#records.get(layer);
    if (held && held.tokens >= tokens) return held.record;
    held?.pool.free();
    const c = this.config;
    const rows = tokens * c.kdaNumHeads * c.kdaHeadDim;
    const pool = new F32Pool();
    const alloc = (length: number, what: string) => pool.alloc(length, `KDA replay record (${what}) of layer ${layer}`);
    const record: KdaReplayRecord = {
      qRaw: alloc(rows, "raw q"), kRaw: alloc(rows, "raw k"), vRaw: alloc(rows, "raw v"),
      k: alloc(rows, "k"), v: alloc(rows, "v"), alpha: alloc(rows, "alpha"), beta: alloc(tokens * c.kdaNumHeads, "beta"),
    };
    this.#records.set(layer, { tokens, record, pool });
    return record;
  }

  /** Zeroes the shared slot of a one-slot state before the next KDA layer takes it over. */
  clearRecurrentSlot(): void {
    if (!this.oneRecurrentSlot) throw new Error("clearRecurrentSlot: this state has one slot per layer");
    const k = this.kda.values().next().value as KdaState | undefined;
    if (k) for (const buffer of [k.recurrent, k.convQ, k.convK, k.convV]) buffer.fill(0);
  }

  /** Every carried buffer, in layer order: the one list that snapshots and bytes walk. */
  #sections(): Section[] {
    if (this.oneRecurrentSlot) throw new Error("a one-slot recompute state is not carried: it cannot be snapshot or written out");
    const sections: Section[] = [];
    const layers = [...this.kda.keys(), ...this.mla.keys()].sort((a, b) => a - b);
    for (const layer of layers) {
      const k = this.kda.get(layer);
      if (k) {
        const parts = [k.recurrent, k.convQ, k.convK, k.convV];
        parts.forEach((buffer, i) => sections.push({ layer, kind: sectionKinds[i] as SectionKind, buffer, rowFloats: 0 }));
        continue;
      }
      const m = this.mla.get(layer) as MlaCache;
      sections.push({ layer, kind: "mla latent", buffer: m.latent, rowFloats: m.latent.length / this.capacity });
      sections.push({ layer, kind: "mla kr", buffer: m.kr, rowFloats: m.kr.length / this.capacity });
    }
    return sections;
  }

  /** Back to position 0 with zero recurrent and conv state, as a fresh state starts. */
  reset(): void {
    for (const k of this.kda.values()) for (const buffer of [k.recurrent, k.convQ, k.convK, k.convV]) buffer.fill(0);
    this.recorded = undefined;
    this.position = 0; // MLA rows are rewritten before they are read, so they need no clearing
  }

  /**
   * A copy of the recurrent part (KDA matrices and conv histories) at this position, in native
   * memory, bit for bit; free it when done. The MLA rows are not copied: the cache is
   * append-only, so rows [0, position) stay the snapshot's for as long as this state's first
   * `position` ids are unchanged (chat.md 5.5). Whoever rewrites those rows must first drop the
   * snapshot or write it out whole (`stateParts(state, snapshot)`).
   */
  snapshot(into?: StateSnapshot): StateSnapshot {
    const recurrent = this.#sections().filter((s) => s.rowFloats === 0);
    if (into) {
      // Speculative decoding snapshots every sweep: reuse the copy's buffers, never allocate per token.
      if (into.copies.length !== recurrent.length) throw new Error("snapshot: the buffers to reuse belong to another state's shape");
      recurrent.forEach((s, i) => (into.copies[i] as F32).a.set(s.buffer.a));
      into.position = this.position;
      return into;
    }
    const pool = new F32Pool();
    const copies = recurrent.map((s) => {
      const copy = pool.alloc(s.buffer.length, `snapshot of ${s.kind} of layer ${s.layer}`);
      copy.a.set(s.buffer.a);
      return copy;
    });
    return new StateSnapshot(this.position, copies, pool);
  }

  /** Puts the recurrent part back where `snapshot` was taken; rows [0, its position) must still be its rows. */
  restore(snapshot: StateSnapshot): void {
    const sections = this.#sections().filter((s) => s.rowFloats === 0);
    const copies = snapshot.copies;
    if (copies.length !== sections.length || snapshot.position > this.capacity) {
      throw new Error(`restore: a snapshot of ${copies.length} buffers at position ${snapshot.position} does not fit this state`);
    }
    sections.forEach((s, i) => {
      const copy = copies[i] as F32;
      if (copy.length !== s.buffer.length) throw new Error(`restore: ${s.kind} of layer ${s.layer} differs in size`);
      s.buffer.a.set(copy.a);
    });
    this.position = snapshot.position;
  }

  /**
   * The carried floats at `position` in state-file order (runtime.md 8.2): each KDA layer's
   * recurrent matrix and conv histories, then every MLA layer's latent rows, then every MLA
   * layer's rope rows. Views of this state's own buffers (so a reader can fill them in place),
   * or with `snapshot`, its copies of the recurrent part beside this state's MLA rows.
   */
  parts(position: number, snapshot?: StateSnapshot): Float32Array[] {
    const sections = this.#sections();
    const recurrent = sections.filter((s) => s.rowFloats === 0).map((s, i) => (snapshot ? (snapshot.copies[i] as F32) : s.buffer).a);
    const rows = (kind: SectionKind) => sections.filter((s) => s.kind === kind).map((s) => s.buffer.a.subarray(0, floatsAt(s, position)));
    return [...recurrent, ...rows("mla latent"), ...rows("mla kr")];
  }

  /**
   * Becomes `other` at its position, bit for bit: its recurrent part and its MLA rows [0,
   * position). The choices of one request fork this way from one shared prefill.
   */
  copyFrom(other: SequenceState): void {
    if (other === this) return;
    if (other.capacity !== this.capacity || other.kda.size !== this.kda.size || other.mla.size !== this.mla.size) {
      throw new Error("copyFrom: the states differ in shape");
    }
    const from = other.parts(other.position);
    const into = this.parts(other.position);
    from.forEach((part, i) => (into[i] as Float32Array).set(part));
    this.position = other.position;
    this.recorded = undefined;
  }

  free(): void {
    this.#pool.free();
    for (const held of this.#records.values()) held.pool.free();
    this.#records.clear();
    this.recorded = undefined;
  }
}

/** A sequence state frozen at one position (see `SequenceState.snapshot`). */
export class StateSnapshot {
  position: number;
  readonly copies: readonly F32[];
  readonly #pool: F32Pool;

  constructor(position: number, copies: readonly F32[], pool: F32Pool) {
    this.position = position;
    this.copies = copies;
    this.#pool = pool;
  }

  /** Bytes of native memory the snapshot holds. */
  get bytes(): number {
    return this.copies.reduce((sum, c) => sum + 4 * c.length, 0);
  }

  free(): void {
    this.#pool.free();
  }
}
