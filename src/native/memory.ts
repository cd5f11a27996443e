/** Native buffers: allocated and freed by libk3, viewed from TypeScript without copying. */
import { toArrayBuffer, type Pointer } from "bun:ffi";
import { K3Error, ExitCode } from "../errors.ts";
import { native } from "./library.ts";

export class NativeBuffer {
  readonly bytes: number;
  #ptr: Pointer | null;

  private constructor(ptr: Pointer, bytes: number) {
    this.#ptr = ptr;
    this.bytes = bytes;
  }

  /** Zero-filled, aligned for O_DIRECT. Failing to allocate is a runtime failure (exit 1). */
  static allocate(bytes: number, purpose: string): NativeBuffer {
    const ptr = native().k3_alloc(bytes);
    if (ptr === null || typeof ptr === "bigint") {
      throw new K3Error(ExitCode.runtime, `could not allocate ${bytes} bytes for ${purpose}`);
    }
    return new NativeBuffer(ptr, bytes);
  }

  get ptr(): Pointer {
    if (this.#ptr === null) throw new Error("NativeBuffer used after free");
    return this.#ptr;
  }

  /** A view of `length` bytes at `offset`; valid until `free`. */
  u8(offset = 0, length = this.bytes - offset): Uint8Array {
    return new Uint8Array(toArrayBuffer(this.ptr, offset, length));
  }

  free(): void {
    if (this.#ptr !== null) native().k3_free(this.#ptr);
    this.#ptr = null;
  }
}
