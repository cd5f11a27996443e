/**
 * The seam multi-turn reuse and speculative decoding stand on: snapshots of the recurrent part
 * that share the MLA rows, and state files (runtime.md 8, version 2). Restoring either and
 * continuing gives the bits of never having stopped; a file that is not a state of this model
 * and run is refused naming the path, before a float is read.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { feed } from "../../../src/decode/loop.ts";
import { K3Error } from "../../../src/errors.ts";
import { readStateFile, stateFileBytes, writeStateFile } from "../../../src/model/state-file.ts";
import { expectation, openFixture } from "../../support/fixtures.ts";
import { tempDir } from "../../support/tmp.ts";

// Each test opens engines and runs several turns: seconds on a loaded 2-core machine.
setDefaultTimeout(30_000);

const name = "nested14";
const ids = expectation(name).tf.ids;
const bits = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

describe("snapshots and state files", () => {
  test("restore a snapshot, or read a state file, and continue = continue from the original, bit for bit", () => {
    using engine = openFixture(name, ids.length + 3);
    const model = engine.model;
    const state = model.newState();
    model.run(state, ids.slice(0, 10));
    const snapshot = state.snapshot();
    const path = join(tempDir("state"), "ten.k3st");
    const written = writeStateFile(path, state, ids.slice(0, 10));
    expect(readFileSync(path).length).toBe(written);
    const straight = model.run(state, ids.slice(10), "all");
    // Diverge past the snapshot, then go back: KDA and conv state cannot be trimmed, only restored.
    model.run(state, [ids[3] as number, ids[4] as number]);
    state.restore(snapshot);
    expect(state.position).toBe(10);
    expect(Buffer.compare(bits(straight), bits(model.run(state, ids.slice(10), "all")))).toBe(0);
    const other = model.newState();
    expect(readStateFile(path, other)).toEqual({ position: 10, ids: ids.slice(0, 10) });
    expect(Buffer.compare(bits(straight), bits(model.run(other, ids.slice(10), "all")))).toBe(0);
    // A state that had not been primed would make the comparisons vacuous: the logits do differ.
    const fresh = model.newState();
    expect(Buffer.compare(bits(straight), bits(model.run(fresh, ids.slice(10), "all")))).not.toBe(0);
    snapshot.free();
    for (const s of [state, other, fresh]) model.release(s);
  });

  test("a file written from a snapshot after the live state moved on holds the snapshot's state", () => {
    using engine = openFixture(name, ids.length + 3);
    const model = engine.model;
    const state = model.newState();
    model.run(state, ids.slice(0, 8));
    const snapshot = state.snapshot();
    model.run(state, ids.slice(8, 14)); // rows 8.. are the live state's now; rows 0..8 still the snapshot's
    const path = join(tempDir("state"), "eight.k3st");
    writeStateFile(path, state, ids.slice(0, 8), snapshot);
    const restored = model.newState();
    readStateFile(path, restored);
    const reference = model.newState();
    model.run(reference, ids.slice(0, 8));
    const want = model.run(reference, ids.slice(8), "all");
    expect(Buffer.compare(bits(want), bits(model.run(restored, ids.slice(8), "all")))).toBe(0);
    snapshot.free();
    for (const s of [state, restored, reference]) model.release(s);
  });

  test("a prefill stopped at a snapshot position inside a chunk: the same bytes as token at a time", () => {
    using engine = openFixture(name, ids.length + 1);
    const model = engine.model;
    const [chunked, single] = [model.newState(), model.newState()];
    feed(model, chunked, ids.slice(0, 13), 64);
    for (const id of ids.slice(0, 13)) model.run(single, [id]);
    const dir = tempDir("state");
    writeStateFile(join(dir, "a"), chunked, ids.slice(0, 13));
    writeStateFile(join(dir, "b"), single, ids.slice(0, 13));
    expect(Buffer.compare(readFileSync(join(dir, "a")), readFileSync(join(dir, "b")))).toBe(0);
    for (const s of [chunked, single]) model.release(s);
  });

  test("files that are not a state of this model and run are refused, naming the path, and leave the state alone", () => {
    using engine = openFixture(name, ids.length + 1);
    const model = engine.model;
    const state = model.newState();
    model.run(state, ids.slice(0, 5));
    const dir = tempDir("state");
    const goodPath = join(dir, "good.k3st");
    writeStateFile(goodPath, state, ids.slice(0, 6)); // one pending id (runtime.md 8.3)
    const good = readFileSync(goodPath);
    const target = model.newState();
    const refuse = (bytes: Uint8Array, pattern: RegExp) => {
      const path = join(dir, "bad.k3st");
      writeFileSync(path, bytes);
      expect(() => readStateFile(path, target)).toThrow(pattern);
      try {
        readStateFile(path, target);
      } catch (error) {
        expect(error).toBeInstanceOf(K3Error);
        expect((error as K3Error).exitCode).toBe(1);
        expect((error as K3Error).message).toContain(path);
      }
    };
    const edited = (at: number, write: (v: DataView) => void) => {
      const copy = new Uint8Array(good);
      write(new DataView(copy.buffer, at));
      return copy;
    };
    refuse(good.subarray(0, 50), /bad\.k3st is not a k3 state file$/);
    refuse(edited(0, (v) => v.setUint8(0, 0x4a)), /is not a k3 state file$/);
    refuse(edited(4, (v) => v.setInt32(0, 1, true)), /state file version 1; this build reads and writes version 2$/);
    refuse(edited(8, (v) => v.setInt32(0, 4096, true)), /^REFUSING .*bad\.k3st: written by a different model architecture \(hidden_size 4096, this model has \d+\); restoring it would produce fluent, wrong output$/);
    refuse(edited(56, (v) => v.setInt32(0, 3, true)), /REFUSING .*: it holds 3 bound layers \(\d+ MLA\); this run binds 14 \(\d+ MLA\)$/);
    refuse(edited(64, (v) => (v.setInt32(0, 100_000, true), v.setInt32(4, 100_001, true))), /^REFUSING .*: it holds 100000 positions; this run's context holds \d+ \(ask for more positions or a shorter prompt\)$/);
    refuse(edited(64, (v) => v.setInt32(0, 2, true)), /6 ids for 2 cached positions \(expected 2 or 3\)/);
    refuse(good.subarray(0, good.length - 4), /is truncated \(\d+ bytes, the header implies \d+\)$/);
    refuse(new Uint8Array([...good, 0]), /the header implies \d+ \(trailing bytes\)$/);
    refuse(edited(104, (v) => v.setInt32(0, 1 << 30, true)), /id 1073741824 at index 0 is outside the vocabulary/);
    refuse(edited(good.length - 9, (v) => v.setUint8(0, v.getUint8(0) ^ 0x10)), /the checksum does not match: the file is damaged$/);
    expect(target.position).toBe(0);
    // A state with room for fewer positions than the file holds refuses it too.
    using small = openFixture(name, 3);
    const tiny = small.model.newState();
    expect(() => readStateFile(goodPath, tiny)).toThrow(/holds 5 positions; this run's context holds 3/);
    expect(readStateFile(goodPath, target)).toEqual({ position: 5, ids: ids.slice(0, 6) });
    expect(stateFileBytes(target, 5, 6)).toBe(good.length);
    for (const s of [state, target]) model.release(s);
    small.model.release(tiny);
  });

  test("hostile state files: random cuts and byte flips are refused as K3Errors, never crash or load", () => {
    using engine = openFixture(name, ids.length + 1);
    const model = engine.model;
    const state = model.newState();
    model.run(state, ids.slice(0, 4));
    const dir = tempDir("state");
    const path = join(dir, "s.k3st");
    writeStateFile(path, state, ids.slice(0, 4));
    const good = readFileSync(path);
    const target = model.newState();
    let seed = 0x9e3779b9;
    const random = (n: number) => {
      seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
      return seed % n;
    };
    let refused = 0;
    for (let round = 0; round < 300; round++) {
      const bytes = new Uint8Array(good.subarray(0, round % 3 === 0 ? random(good.length) : good.length));
      let changed = round % 3 === 0;
      for (let flips = 1 + random(4); flips > 0 && bytes.length > 0; flips--) {
        const at = random(bytes.length);
        const value = random(256);
        changed ||= value !== bytes[at];
        bytes[at] = value;
      }
      writeFileSync(path, bytes);
      try {
        readStateFile(path, target);
        expect(changed).toBe(false); // only an unchanged file may load
      } catch (error) {
        expect(error).toBeInstanceOf(K3Error);
        expect((error as K3Error).message).toContain(path);
        refused++;
      }
    }
    expect(refused).toBeGreaterThan(280);
    for (const s of [state, target]) model.release(s);
  });
});
