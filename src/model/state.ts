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
  readonly #pool = new F32Pool();

  constructor(config: ModelConfig, layerCount: number, capacity: number) {
    this.capacity = capacity;
    this.config = config;
    const c = config;
    const P = c.kdaNumHeads * c.kdaHeadDim;
    for (let layer = 0; layer < layerCount; layer++) {
      if (attentionKind(c, layer) === "kda") {
        const history = P * (c.shortConvKernel - 1);
        this.kda.set(layer, {
          recurrent: this.#pool.alloc(c.kdaNumHeads * c.kdaHeadDim * c.kdaHeadDim, `KDA state of layer ${layer}`),
          convQ: this.#pool.alloc(history, "conv history"),
          convK: this.#pool.alloc(history, "conv history"),
          convV: this.#pool.alloc(history, "conv history"),
        });
      } else {
        this.mla.set(layer, {
          latent: this.#pool.alloc(capacity * c.kvLoraRank, `MLA latent cache of layer ${layer}`),
          kr: this.#pool.alloc(capacity * c.qkRopeHeadDim, `MLA rope keys of layer ${layer}`),
        });
      }
    }
  }

  /** Every carried buffer, in layer order: the one list that snapshots and bytes walk. */
  #sections(): Section[] {
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

  free(): void {
    this.#pool.free();
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
