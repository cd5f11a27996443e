/**
 * What one sequence carries between forward calls (model.md section 9), and nothing else:
 * per KDA layer the recurrent matrices and the ShortConv histories, per MLA layer the cache
 * of expanded keys, values and the shared rope key, and the position count.
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
  /** [capacity][heads][dn + dv]: per position and head, the key content then the value. */
  kv: F32;
  /** [capacity][dr], one rope key per position shared by all heads. */
  kr: F32;
}

export class SequenceState {
  /** Positions consumed so far. */
  position = 0;
  readonly capacity: number;
  readonly kda = new Map<number, KdaState>();
  readonly mla = new Map<number, MlaCache>();
  readonly #pool = new F32Pool();

  constructor(config: ModelConfig, layerCount: number, capacity: number) {
    this.capacity = capacity;
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
        const H = c.numAttentionHeads;
        this.mla.set(layer, {
          kv: this.#pool.alloc(capacity * H * (c.qkNopeHeadDim + c.vHeadDim), `MLA keys and values of layer ${layer}`),
          kr: this.#pool.alloc(capacity * c.qkRopeHeadDim, `MLA rope keys of layer ${layer}`),
        });
      }
    }
  }

  free(): void {
    this.#pool.free();
  }
}
