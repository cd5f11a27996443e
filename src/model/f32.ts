/**
 * Activations: f32 arrays in native memory, visible to TypeScript as a Float32Array and to
 * the kernels as a pointer. Views share memory; only `F32Pool` allocates.
 */
import { toArrayBuffer, type Pointer } from "bun:ffi";
import { NativeBuffer } from "../native/memory.ts";

export class F32 {
  readonly ptr: Pointer;
  readonly length: number;
  readonly a: Float32Array;

  constructor(ptr: Pointer, length: number) {
    this.ptr = ptr;
    this.length = length;
    this.a = new Float32Array(toArrayBuffer(ptr, 0, length * 4));
  }

  /** `length` floats starting at float `offset`. */
  sub(offset: number, length: number): F32 {
    if (offset < 0 || offset + length > this.length) throw new Error(`F32 view [${offset}, ${offset + length}) outside ${this.length}`);
    return new F32((this.ptr + offset * 4) as Pointer, length);
  }

  /** Row `t` of a row-major [rows][width] array. */
  row(t: number, width: number): F32 {
    return this.sub(t * width, width);
  }

  fill(value: number): void {
    this.a.fill(value);
  }

  copyFrom(source: F32): void {
    this.a.set(source.a);
  }
}

/** Owns the native buffers behind a set of activations; everything is freed together. */
export class F32Pool {
  readonly #buffers: NativeBuffer[] = [];

  alloc(length: number, purpose: string): F32 {
    const buffer = NativeBuffer.allocate(Math.max(length, 1) * 4, purpose);
    this.#buffers.push(buffer);
    return new F32(buffer.ptr as Pointer, length);
  }

  free(): void {
    for (const buffer of this.#buffers) buffer.free();
    this.#buffers.length = 0;
  }
}
