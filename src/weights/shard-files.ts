/**
 * The open shards of one checkpoint: one DirectFile per shard, opened on first use. The tensor
 * reader owns them and the expert cache reads through the same files, so each shard is opened
 * once and closed once.
 */
import type { CheckpointIndex } from "../checkpoint/safetensors.ts";
import { DirectFile } from "../native/file.ts";

export class ShardFiles {
  readonly #index: CheckpointIndex;
  readonly #files = new Map<number, DirectFile>();

  constructor(index: CheckpointIndex) {
    this.#index = index;
  }

  get(shard: number): DirectFile {
    let file = this.#files.get(shard);
    if (!file) {
      file = new DirectFile(this.#index.shards[shard]!.path);
      this.#files.set(shard, file);
    }
    return file;
  }

  /** Frees the per-shard buffers synchronous reads went through. */
  releaseScratch(): void {
    for (const file of this.#files.values()) file.releaseScratch();
  }

  /** Background reads into these files must all have been collected first. */
  close(): void {
    for (const file of this.#files.values()) file.close();
    this.#files.clear();
  }
}
