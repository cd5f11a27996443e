/**
 * Activations: f32 arrays in native memory, visible to TypeScript as a Float32Array and to
 * the kernels as a pointer. Views share memory; only `F32Pool` allocates.
 */
import { f32View, NativeBuffer, offsetPointer, type Pointer } from "../native/memory.ts";

export class F32 {
  readonly ptr: Pointer;
  readonly length: number;
  readonly a: Float32Array;

  constructor(ptr: Pointer, length: number) {
    this.ptr = ptr;
    this.length = length;
    this.a = f32View(ptr, 0, length);
  }

  /** `length` floats starting at float `offset`. */
  sub(offset: number, length: number): F32 {
    if (offset < 0 || offset + length > this.length) throw new Error(`F32 view [${offset}, ${offset + length}) outside ${this.length}`);
    return new F32(offsetPointer(this.ptr, offset * 4), length);
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

/**
 * Owns the native buffers behind a set of activations. `reset` makes every buffer available
 * again without freeing it, so a forward pass allocates only until it has seen its largest
 * step; buffers handed out again hold stale values, and every operator writes its whole output.
 */
export class F32Pool {
  /** Available buffers, smallest first. */
  readonly #available: NativeBuffer[] = [];
  readonly #inUse: NativeBuffer[] = [];

  alloc(length: number, purpose: string): F32 {
    const bytes = Math.max(length, 1) * 4;
    const at = this.#available.findIndex((b) => b.bytes >= bytes);
    const buffer = at >= 0 ? (this.#available.splice(at, 1)[0] as NativeBuffer) : NativeBuffer.allocate(bytes, purpose);
    this.#inUse.push(buffer);
    return new F32(buffer.ptr, length);
  }

  /** Every buffer is available again (views handed out before must no longer be used). */
  reset(): void {
    this.#available.push(...this.#inUse.splice(0));
    this.#available.sort((a, b) => a.bytes - b.bytes);
  }

  free(): void {
    for (const buffer of [...this.#available, ...this.#inUse]) buffer.free();
    this.#available.length = 0;
    this.#inUse.length = 0;
  }
}
