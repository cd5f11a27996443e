/**
 * The prompt cache (`--prompt-cache DIR`, issue 58): snapshots that outlive the server, in state
 * files keyed by the exact ids they hold, under a directory named for the model's identity, so
 * any conversation whose prompt starts with a cached prefix, in this server or the next, prefills
 * only the rest and answers the ids a cold run does. Written through a temporary file and a
 * rename; read back with the state file's own checks (architecture, shape, checksum), so a
 * damaged or foreign entry is discarded with a warning, never used. Bounded by
 * `--prompt-cache-gb`, the least recently used going first.
 */
import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { readStateFile, stateFileBytes, stateFileIds, stateFileVersion, writeStateFile } from "../model/state-file.ts";
import type { SequenceState } from "../model/state.ts";
import { isPrefix, sameIds } from "./snapshots.ts";

interface Entry {
  readonly path: string;
  readonly ids: readonly number[];
  bytes: number;
  used: number;
}


/** Files hashed whole when a checkpoint is at most this large (the demo, fixtures); above it, their size and time. */
const wholeHashBytes = 1 << 30;

/**
 * What a cached state is a state of: the config, the index, every shard (hashed whole for a
 * small checkpoint, by name, size and modification time for a large one), the packed trunk's
 * manifest when there is one, the layers bound and the state file version.
 */
export function modelIdentity(modelDir: string, layers: number, trunkDir?: string): string {
  const h = createHash("sha256");
  h.update(`k3-state-${stateFileVersion}\nlayers ${layers}\n`);
  const files = readdirSync(modelDir).filter((n) => n.endsWith(".json") || n.endsWith(".safetensors")).sort()
    .map((name) => ({ name, path: join(modelDir, name), stat: statSync(join(modelDir, name)) }));
  const total = files.reduce((n, f) => n + f.stat.size, 0);
  for (const { name, path, stat } of files) {
    h.update(`${name}\n`);
    if (name.endsWith(".json") || total <= wholeHashBytes) h.update(readFileSync(path));
    else h.update(`${stat.size} ${stat.mtimeMs}\n`);
  }
  if (trunkDir) {
    try {
      h.update(readFileSync(join(trunkDir, "trunk.json")));
    } catch {
      h.update(`trunk ${trunkDir}\n`);
    }
  }
  return h.digest("hex").slice(0, 32);
}

export class PromptCache {
  readonly #dir: string;
  readonly #bound: number;
  readonly #warn: (message: string) => void;
  #entries: Entry[] = [];
  #clock = 0;

  /** Opens (or makes) DIR/<identity>/ and reads which ids each entry holds; an entry that cannot be read is removed. */
  constructor(dir: string, boundBytes: number, identity: string, warn: (message: string) => void) {
    this.#dir = join(dir, identity);
    this.#bound = boundBytes;
    this.#warn = warn;
    mkdirSync(this.#dir, { recursive: true });
    const found = readdirSync(this.#dir).filter((n) => n.endsWith(".k3st"));
    for (const name of found) {
      const path = join(this.#dir, name);
      try {
        const { position, ids, bytes } = stateFileIds(path);
        if (position !== ids.length) throw new Error("holds a pending id");
        this.#entries.push({ path, ids, bytes, used: statSync(path).mtimeMs });
      } catch (error) {
        this.#warn(`prompt cache: ${name} could not be read and was removed (${error instanceof Error ? error.message : String(error)})`);
        rmSync(path, { force: true });
      }
    }
    this.#clock = Math.max(0, ...this.#entries.map((e) => e.used));
  }

  get bytes(): number {
    return this.#entries.reduce((n, e) => n + e.bytes, 0);
  }

  get size(): number {
    return this.#entries.length;
  }

  /** The longest entry whose ids are an exact prefix of `ids` with at least one id after it. */
  find(ids: readonly number[]): Entry | undefined {
    let best: Entry | undefined;
    for (const e of this.#entries) if (e.ids.length < ids.length && isPrefix(e.ids, ids) && (!best || e.ids.length > best.ids.length)) best = e;
    return best;
  }

  /** Puts `state` at the entry; a refused entry (damaged, foreign) is removed with a warning and the state reset. */
  restore(entry: Entry, state: SequenceState): boolean {
    try {
      const { position, ids } = readStateFile(entry.path, state);
      if (position !== entry.ids.length || !sameIds(entry.ids, ids)) throw new Error("holds other ids than its name says");
      this.#touch(entry);
      return true;
    } catch (error) {
      this.#warn(`prompt cache: an entry was refused and removed; the prompt is prefilled instead (${error instanceof Error ? error.message : String(error)})`);
      this.#remove(entry);
      state.reset();
      return false;
    }
  }

  /** Keeps `state` (after exactly `ids`); the least recently used go to make room. A failed write (ENOSPC) is a warning: the answer is exact either way. */
  save(ids: readonly number[], state: SequenceState): void {
    const same = this.#entries.find((e) => sameIds(e.ids, ids));
    if (same) return this.#touch(same);
    const bytes = stateFileBytes(state, ids.length, ids.length);
    if (bytes > this.#bound) return;
    while (this.bytes + bytes > this.#bound && this.#entries.length > 0) {
      this.#remove([...this.#entries].sort((a, b) => a.used - b.used)[0] as Entry);
    }
    const name = createHash("sha256").update(Buffer.from(Int32Array.from(ids).buffer)).digest("hex").slice(0, 40);
    const path = join(this.#dir, `${name}.k3st`);
    try {
      writeStateFile(path, state, ids);
      this.#entries.push({ path, ids: [...ids], bytes, used: ++this.#clock });
    } catch (error) {
      this.#warn(`prompt cache: a prefix could not be kept (${error instanceof Error ? error.message : String(error)}); it is recomputed when needed`);
    }
  }

  #touch(entry: Entry): void {
    entry.used = Math.max(++this.#clock, Date.now());
    this.#clock = entry.used;
    try {
      const seconds = entry.used / 1000;
      utimesSync(entry.path, seconds, seconds);
    } catch {
      // the order in RAM holds for this server; the next one reads the times it can
    }
  }

  #remove(entry: Entry): void {
    this.#entries = this.#entries.filter((e) => e !== entry);
    rmSync(entry.path, { force: true });
  }
}
