/**
 * Native memory: buffers allocated and freed by libk3, typed views of native memory without
 * copying, and pointer arithmetic, so code outside src/native never touches bun:ffi.
 */
import { toArrayBuffer, type Pointer } from "bun:ffi";
import { K3Error, ExitCode } from "../errors.ts";
import { allocHuge, allocZero } from "./abi.ts";
import { native } from "./library.ts";
import { envValue } from "../env.ts";

export type { Pointer };

/** f32 values in native memory: `length` floats at `ptr` (src/model's F32 and the bound vectors are). */
export interface F32Ref {
  readonly ptr: Pointer;
  readonly length: number;
}

/** The address `bytes` past `ptr`. */
export function offsetPointer(ptr: Pointer, bytes: number): Pointer {
  return (ptr + bytes) as Pointer;
}

/** `length` bytes at `byteOffset` past `ptr`, viewed in place; valid while the memory is. */
export function u8View(ptr: Pointer, byteOffset: number, length: number): Uint8Array {
  return new Uint8Array(toArrayBuffer(ptr, byteOffset, length));
}

/** `length` u16 values at `byteOffset` past `ptr`, viewed in place; valid while the memory is. */
export function u16View(ptr: Pointer, byteOffset: number, length: number): Uint16Array {
  return new Uint16Array(toArrayBuffer(ptr, byteOffset, length * 2));
}

/** `length` f32 values at `byteOffset` past `ptr`, viewed in place; valid while the memory is. */
export function f32View(ptr: Pointer, byteOffset: number, length: number): Float32Array {
  return new Float32Array(toArrayBuffer(ptr, byteOffset, length * 4));
}

let alignment: number | undefined;

/**
 * The alignment libk3 gives every allocation, which is also the O_DIRECT granularity: direct
 * reads start, end and land at multiples of it. Asked of the library once (`k3_alloc_alignment`),
 * so TypeScript never writes the number down.
 */
export function allocAlignment(): number {
  alignment ??= Number(native().k3_alloc_alignment());
  return alignment;
}

export class NativeBuffer {
  readonly bytes: number;
  #ptr: Pointer | null;

  private constructor(ptr: Pointer, bytes: number) {
    this.#ptr = ptr;
    this.bytes = bytes;
  }

  /**
   * Aligned to `allocAlignment()`. "zeroed" memory starts at zero (state, small vectors); a
   * "read-target" is filled by reads before use, so it is not zeroed (one pass over fresh pages
   * fewer) and large ones are advised for transparent huge pages unless K3_NOHUGE is set.
   * Failing to allocate is a runtime failure (exit 1).
   */
  static allocate(bytes: number, purpose: string, kind: "zeroed" | "read-target" = "zeroed"): NativeBuffer {
    const flags = kind === "zeroed" ? allocZero : envValue("K3_NOHUGE") !== undefined ? 0 : allocHuge;
    const ptr = native().k3_alloc(bytes, flags);
    if (ptr === null || typeof ptr === "bigint") {
      throw new K3Error(ExitCode.runtime, `could not allocate ${bytes} bytes for ${purpose}`);
    }
    return new NativeBuffer(ptr, bytes);
  }

  get ptr(): Pointer {
    if (this.#ptr === null) throw new Error("NativeBuffer used after free");
    return this.#ptr;
  }

  /** A view of `length` bytes at `offset`; valid until `free`. A view past the end is refused, never made. */
  u8(offset = 0, length = this.bytes - offset): Uint8Array {
    if (!(offset >= 0 && length >= 0 && offset + length <= this.bytes)) {
      throw new Error(`a view of [${offset}, ${offset + length}) of a ${this.bytes}-byte native buffer`);
    }
    return u8View(this.ptr, offset, length);
  }

  free(): void {
    if (this.#ptr !== null) native().k3_free(this.#ptr);
    this.#ptr = null;
  }
}
