/** Reads tensors named in the index from their shards, through the O_DIRECT reader. */
import type { CheckpointIndex, TensorEntry } from "../checkpoint/safetensors.ts";
import { DirectFile } from "../native/file.ts";
import { NativeBuffer } from "../native/memory.ts";

export class TensorReader {
  readonly index: CheckpointIndex;
  readonly #files = new Map<number, DirectFile>();
  /** Bytes read so far, for reports. */
  bytesRead = 0;

  constructor(index: CheckpointIndex) {
    this.index = index;
  }

  #file(shard: number): DirectFile {
    let file = this.#files.get(shard);
    if (!file) {
      file = new DirectFile(this.index.shards[shard]!.path);
      this.#files.set(shard, file);
    }
    return file;
  }

  /** The raw bytes of [offset, offset + length) of a shard; valid until the next read. */
  readRange(shard: number, offset: number, length: number): Uint8Array {
    const bytes = this.#file(shard).read(offset, length);
    this.bytesRead += length;
    return bytes;
  }

  /** The raw bytes of a tensor; valid until the next read of the same shard. */
  readRaw(entry: TensorEntry): Uint8Array {
    return this.readRange(entry.shard, entry.offset, entry.nbytes);
  }

  /** A tensor copied into its own native buffer. */
  readToNative(entry: TensorEntry): NativeBuffer {
    const buffer = NativeBuffer.allocate(Math.max(entry.nbytes, 1), entry.name);
    buffer.u8(0, entry.nbytes).set(this.readRaw(entry));
    return buffer;
  }

  close(): void {
    for (const file of this.#files.values()) file.close();
    this.#files.clear();
  }
}
