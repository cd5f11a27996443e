/**
 * Synthetic checkpoints (tools/checkpoint/writer.ts) for tests that need a model directory of
 * their own to damage or edit. Writing one takes about a second (its weights are generated in
 * JavaScript) and is deterministic, so each (config, options) is written once per test process
 * and copied after: the files are the writer's, byte for byte.
 */
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { basename, join } from "node:path";
import type { ModelConfig } from "../../src/checkpoint/config.ts";
import { writeCheckpoint, type CheckpointOptions } from "../../tools/checkpoint/writer.ts";
import { tempDir } from "./tmp.ts";

const written = new Map<string, { dir: string; shards: string[] }>();

/** writeCheckpoint(dir, config, options), from a copy of the first such write: the shard paths in `dir`. */
export function writeTestCheckpoint(dir: string, config: ModelConfig, options: CheckpointOptions): string[] {
  const key = JSON.stringify([config, options]);
  let source = written.get(key);
  if (!source) {
    const sourceDir = tempDir("checkpoint-source");
    source = { dir: sourceDir, shards: writeCheckpoint(sourceDir, config, options).map((p) => basename(p)) };
    written.set(key, source);
  }
  mkdirSync(dir, { recursive: true });
  for (const name of readdirSync(source.dir)) copyFileSync(join(source.dir, name), join(dir, name));
  return source.shards.map((name) => join(dir, name));
}
