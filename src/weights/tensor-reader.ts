/** Reads tensors named in the index from their shards, through the O_DIRECT reader. */
import type { CheckpointIndex, TensorEntry } from "../checkpoint/safetensors.ts";
import { readCapacity } from "../native/file.ts";
import { NativeBuffer, offsetPointer, type Pointer } from "../native/memory.ts";
import { ShardFiles } from "./shard-files.ts";

export class TensorReader {
  readonly index: CheckpointIndex;
  /** Shared with the expert cache, which reads through them; closed here. */
  readonly files: ShardFiles;

  constructor(index: CheckpointIndex) {
    this.index = index;
    this.files = new ShardFiles(index);
  }

  /** The raw bytes of [offset, offset + length) of a shard; valid until the next read. */
  readRange(shard: number, offset: number, length: number): Uint8Array {
    return this.files.get(shard).read(offset, length);
  }

  /** The raw bytes of a tensor; valid until the next read of the same shard. */
  readRaw(entry: TensorEntry): Uint8Array {
    return this.readRange(entry.shard, entry.offset, entry.nbytes);
  }

  /**
   * [offset, offset + length) of a shard read straight into a buffer of its own (no copy, no
   * scratch); `ptr` is where the bytes start in it.
   */
  readRangeToNative(shard: number, offset: number, length: number, purpose: string): { buffer: NativeBuffer; ptr: Pointer } {
    const buffer = NativeBuffer.allocate(readCapacity(length), purpose, "read-target");
    try {
      const { payload } = this.files.get(shard).readInto(offset, length, buffer);
      return { buffer, ptr: offsetPointer(buffer.ptr, payload) };
    } catch (error) {
      buffer.free();
      throw error;
    }
  }

  /** A tensor read into its own native buffer. */
  readToNative(entry: TensorEntry): { buffer: NativeBuffer; ptr: Pointer } {
    return this.readRangeToNative(entry.shard, entry.offset, entry.nbytes, entry.name);
  }

  /** Frees the per-shard buffers synchronous reads went through; loading is done. */
  releaseScratch(): void {
    this.files.releaseScratch();
  }

  close(): void {
    this.files.close();
  }
}
