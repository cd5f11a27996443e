/**
 * The snapshots a conversation keeps (chat.md 5.5): each is an exact id sequence and the state
 * after it. In RAM a snapshot holds only the recurrent part, bit for bit, and shares the live
 * state's MLA rows, which stay its own only while the live sequence starts with its ids. So
 * before those rows are rewritten, a snapshot that does not match the new ids is parked whole
 * in a state file (temporary file, then rename; fingerprinted and checksummed) or dropped. RAM
 * is bounded by --snapshot-gb, disk by --snapshot-disk-gb: when one is full, the least useful
 * snapshot goes first (parked from RAM, dropped from disk), by its kind and then least recently
 * used. Never partial reuse, never "close enough".
 */
import { rmSync } from "node:fs";
import { join } from "node:path";
import { runtimeError } from "../errors.ts";
import { readStateFile, stateFileBytes, writeStateFile } from "../model/state-file.ts";
import type { SequenceState, StateSnapshot } from "../model/state.ts";
import { makeSnapshotDir, removeSnapshotDir, sweepSnapshotDirs } from "./snapshot-dir.ts";

export interface SnapshotBudget {
  /** RAM for snapshots of the recurrent part (--snapshot-gb). */
  ramBytes: number;
  /** Disk for parked snapshots (--snapshot-disk-gb); 0 drops instead of parking. */
  diskBytes: number;
  /** Where parked files go: a private directory is made inside it on first use and removed at close or exit (snapshot-dir.ts). */
  parent: string;
}

type Place = { kind: "ram"; snapshot: StateSnapshot } | { kind: "parked"; path: string };

/**
 * Where a snapshot was taken (chat.md 5.5 (a), (b), (c)), most useful last. The reply's end
 * matches only an exact echo, and then the live state usually still serves it for free; the
 * messages' end matches almost every next request; the prompt's end matches it too whenever
 * the request had no notes (chat.md 5.4: the re-rendered reply starts with the generation
 * prompt), and is the longer match.
 */
export const snapshotKinds = ["reply end", "messages end", "prompt end"] as const;
export type SnapshotKind = (typeof snapshotKinds)[number];

export interface Snapshot {
  readonly ids: readonly number[];
  place: Place;
  /** RAM bytes (the recurrent copy) or file bytes. */
  bytes: number;
  kind: SnapshotKind;
  used: number;
}

/** The order in which snapshots give up their place: least useful kind first, then least recently used. */
const leastUseful = (a: Snapshot, b: Snapshot) => snapshotKinds.indexOf(a.kind) - snapshotKinds.indexOf(b.kind) || a.used - b.used;

/** What the store holds and has done, for statistics. */
export interface SnapshotCounts {
  inRam: number;
  parked: number;
  ramBytes: number;
  parkedBytes: number;
  /** Snapshots written to files so far. */
  parkedWrites: number;
  /** Snapshots dropped for lack of room, or refused when read back. */
  dropped: number;
}

/** Whether `of` starts with exactly `prefix`: the one test of reuse (snapshots, the conversation, the prompt cache). */
export const isPrefix = (prefix: readonly number[], of: readonly number[]) =>
  prefix.length <= of.length && prefix.every((id, i) => id === of[i]);

export const sameIds = (a: readonly number[], b: readonly number[]) => a.length === b.length && isPrefix(a, b);

export class SnapshotStore {
  readonly #budget: SnapshotBudget;
  readonly #warn: (message: string) => void;
  #entries: Snapshot[] = [];
  #clock = 0;
  #dir: string | undefined;
  #files = 0;
  #parkedWrites = 0;
  #dropped = 0;

  constructor(budget: SnapshotBudget, warn: (message: string) => void) {
    this.#budget = budget;
    this.#warn = warn;
    if (budget.diskBytes > 0) sweepSnapshotDirs(budget.parent);
  }

  get counts(): SnapshotCounts {
    const of = (kind: Place["kind"]) => this.#entries.filter((e) => e.place.kind === kind);
    const sum = (list: Snapshot[]) => list.reduce((total, e) => total + e.bytes, 0);
    return {
      inRam: of("ram").length, parked: of("parked").length, ramBytes: sum(of("ram")), parkedBytes: sum(of("parked")),
      parkedWrites: this.#parkedWrites, dropped: this.#dropped,
    };
  }

  /** The id sequences held, most recently used first (for tests and statistics). */
  get held(): readonly Snapshot[] {
    return [...this.#entries].sort((a, b) => b.used - a.used);
  }

  /**
   * The longest snapshot whose ids are an exact prefix of `ids` with at least one id after it.
   * A RAM snapshot qualifies only while `live` (the ids whose MLA rows the state holds) starts
   * with its ids; the store keeps that true, and this checks it again.
   */
  find(ids: readonly number[], live: readonly number[]): Snapshot | undefined {
    let best: Snapshot | undefined;
    for (const e of this.#entries) {
      if (e.ids.length >= ids.length || !isPrefix(e.ids, ids)) continue;
      if (e.place.kind === "ram" && !isPrefix(e.ids, live)) continue;
      if (!best || e.ids.length > best.ids.length) best = e;
    }
    return best;
  }

  /**
   * Called before the live rows from some position on are rewritten toward `ids`: a RAM
   * snapshot that is not a prefix of `ids` would lose its rows, so it is parked whole now
   * (while `state` still holds them) or dropped.
   */
  protect(ids: readonly number[], state: SequenceState): void {
    for (const e of [...this.#entries].sort((a, b) => b.used - a.used)) {
      if (e.place.kind === "ram" && !isPrefix(e.ids, ids)) this.#park(e, state);
    }
  }

  /**
   * Puts `state` where `entry` was taken. A parked file that is refused (or fails to read) is
   * dropped with a warning; the state is then reset, and because a failed read may have
   * overwritten shared rows, every RAM snapshot is dropped too. Returns whether it was restored.
   */
  restore(entry: Snapshot, state: SequenceState): boolean {
    entry.used = ++this.#clock;
    if (entry.place.kind === "ram") {
      state.restore(entry.place.snapshot);
      return true;
    }
    try {
      const { position, ids } = readStateFile(entry.place.path, state);
      if (position !== entry.ids.length || !sameIds(ids, entry.ids)) throw runtimeError(`${entry.place.path}: holds other ids than the snapshot it was parked for`);
      return true;
    } catch (error) {
      this.#warn(`a parked snapshot was refused and dropped; the prompt is prefilled instead (${error instanceof Error ? error.message : String(error)})`);
      this.#drop(entry);
      for (const e of [...this.#entries]) if (e.place.kind === "ram") this.#drop(e);
      state.reset();
      return false;
    }
  }

  /** A snapshot of `state` as it is now, after exactly `ids` (the live sequence so far). */
  add(ids: readonly number[], state: SequenceState, kind: SnapshotKind): void {
    if (state.position !== ids.length) throw new Error(`snapshot: ${ids.length} ids for a state at position ${state.position}`);
    const same = this.#entries.find((e) => sameIds(e.ids, ids));
    if (same) {
      same.used = ++this.#clock; // the same ids give the same state: nothing to copy
      if (snapshotKinds.indexOf(kind) > snapshotKinds.indexOf(same.kind)) same.kind = kind;
      return;
    }
    const snapshot = state.snapshot();
    const entry: Snapshot = { ids: [...ids], place: { kind: "ram", snapshot }, bytes: snapshot.bytes, kind, used: ++this.#clock };
    this.#entries.push(entry);
    // Over budget: park the least useful (all RAM snapshots are prefixes of the live ids here).
    for (;;) {
      const ram = this.#entries.filter((e) => e.place.kind === "ram");
      if (ram.reduce((sum, e) => sum + e.bytes, 0) <= this.#budget.ramBytes) break;
      this.#park(ram.sort(leastUseful)[0] as Snapshot, state);
    }
  }

  /** Writes a RAM snapshot out whole (its recurrent copy beside the live rows) and frees its RAM, or drops it. */
  #park(entry: Snapshot, state: SequenceState): void {
    if (entry.place.kind !== "ram") return;
    const fileBytes = stateFileBytes(state, entry.ids.length, entry.ids.length);
    if (fileBytes > this.#budget.diskBytes) return this.#drop(entry);
    for (;;) {
      const parked = this.#entries.filter((e) => e.place.kind === "parked").sort(leastUseful);
      if (parked.reduce((sum, e) => sum + e.bytes, 0) + fileBytes <= this.#budget.diskBytes) break;
      this.#drop(parked[0] as Snapshot);
    }
    try {
      this.#dir ??= makeSnapshotDir(this.#budget.parent);
      const path = join(this.#dir, `snapshot-${++this.#files}.k3st`);
      writeStateFile(path, state, entry.ids, entry.place.snapshot);
      entry.place.snapshot.free();
      entry.place = { kind: "parked", path };
      entry.bytes = fileBytes;
      this.#parkedWrites++;
    } catch (error) {
      this.#warn(`a snapshot could not be parked and was dropped (${error instanceof Error ? error.message : String(error)})`);
      this.#drop(entry);
    }
  }

  #drop(entry: Snapshot): void {
    this.#entries = this.#entries.filter((e) => e !== entry);
    this.#dropped++;
    if (entry.place.kind === "ram") entry.place.snapshot.free();
    else rmSync(entry.place.path, { force: true });
  }

  /** Frees every snapshot and removes the parked files. */
  clear(): void {
    for (const e of [...this.#entries]) this.#drop(e);
    this.#dropped = 0;
  }

  close(): void {
    this.clear();
    if (this.#dir) removeSnapshotDir(this.#dir);
    this.#dir = undefined;
  }
}
