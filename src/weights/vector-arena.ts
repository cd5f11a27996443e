/**
 * Native f32 storage for a layer's small vectors (norm gains, AttnRes folds, conv taps,
 * A_log, dt_bias, routing bias), widened from their stored dtype once per bind. One arena
 * per resident layer, or per streaming slot, reused on every bind.
 */
import { NativeBuffer, offsetPointer } from "../native/memory.ts";
import type { Vector } from "./types.ts";

const vectorAlignment = 64;

export class VectorArena {
  readonly #buffer: NativeBuffer;
  #used = 0;

  constructor(bytes: number, purpose: string) {
    this.#buffer = NativeBuffer.allocate(Math.max(bytes, vectorAlignment), purpose);
  }

  reset(): void {
    this.#used = 0;
  }

  store(name: string, values: Float32Array): Vector {
    const bytes = values.byteLength;
    if (this.#used + bytes > this.#buffer.bytes) throw new Error(`vector arena overflow storing ${name}`);
    this.#buffer.u8(this.#used, bytes).set(new Uint8Array(values.buffer, values.byteOffset, bytes));
    const ptr = offsetPointer(this.#buffer.ptr, this.#used);
    this.#used = Math.ceil((this.#used + bytes) / vectorAlignment) * vectorAlignment;
    return { name, ptr, length: values.length };
  }

  free(): void {
    this.#buffer.free();
  }

  /** Capacity an arena needs for vectors of these element counts. */
  static bytesFor(counts: readonly number[]): number {
    return counts.reduce((sum, n) => sum + Math.ceil((n * 4) / vectorAlignment) * vectorAlignment, 0);
  }
}
