/**
 * The prompt cache (src/session/prompt-cache.ts) on a fixture model: the longest cached exact
 * prefix is found, restored bit for bit (the next logits equal a cold state's), kept under its
 * bound by evicting the least recently used, read back by a second cache on the same directory,
 * and a damaged entry is refused and removed; the model identity changes with the weights.
 */
import { describe, expect, test } from "bun:test";
import { cpSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { stateFileBytes } from "../../../src/model/state-file.ts";
import { modelIdentity, PromptCache } from "../../../src/session/prompt-cache.ts";
import { expectation, modelDir, openFixture } from "../../support/fixtures.ts";
import { tempDir } from "../../support/tmp.ts";

const name = "tiny13";
const ids = expectation(name).long.prompt_ids.slice(0, 40);

describe("the prompt cache", () => {
  test("finds the longest prefix, restores it exactly, evicts the least recently used, and survives a restart", () => {
    using engine = openFixture(name, 64);
    const model = engine.model;
    const dir = tempDir("prompt-cache-unit");
    const warnings: string[] = [];
    const state = model.newState();
    const bytesAt = (n: number) => stateFileBytes(state, n, n);
    // Room for the 20- and 30-id entries together, not for the 10-id one beside them.
    const bound = bytesAt(20) + bytesAt(30) + 16;
    const cache = new PromptCache(dir, bound, "id-a", (m) => warnings.push(m));
    for (const n of [10, 20]) {
      state.reset();
      model.run(state, ids.slice(0, n));
      cache.save(ids.slice(0, n), state);
    }
    expect(cache.size).toBe(2);
    expect(cache.find(ids)?.ids.length).toBe(20);
    expect(cache.find(ids.slice(0, 20))?.ids.length).toBe(10); // an entry must leave an id to feed
    // Restored, the next logits equal a cold state's bit for bit.
    const cold = model.newState();
    const want = model.run(cold, ids.slice(0, 21)).slice();
    const warm = model.newState();
    expect(cache.restore(cache.find(ids)!, warm)).toBe(true);
    expect(Buffer.from(model.run(warm, [ids[20] as number]).buffer).equals(Buffer.from(want.buffer))).toBe(true);
    // A 30-id entry does not fit beside both: the least recently used (the 10-id one) goes.
    state.reset();
    model.run(state, ids.slice(0, 30));
    cache.save(ids.slice(0, 30), state);
    expect(cache.find(ids.slice(0, 15))).toBeUndefined();
    expect(cache.bytes).toBeLessThanOrEqual(bound);
    expect(cache.size).toBe(2);
    // Another process on the same directory and identity sees the entries.
    const again = new PromptCache(dir, 1e9, "id-a", (m) => warnings.push(m));
    expect(again.find(ids)?.ids.length).toBe(30);
    expect(new PromptCache(dir, 1e9, "id-b", () => {}).size).toBe(0); // another model's directory
    // A damaged entry is refused, removed, and the state is left reset.
    const file = readdirSync(join(dir, "id-a")).map((n) => join(dir, "id-a", n)).find((p) => readFileSync(p).length === bytesAt(30)) as string;
    const bytes = readFileSync(file);
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 1;
    writeFileSync(file, bytes);
    const target = model.newState();
    expect(again.restore(again.find(ids)!, target)).toBe(false);
    expect(target.position).toBe(0);
    expect(warnings.some((w) => w.includes("refused and removed"))).toBe(true);
    expect(again.find(ids)?.ids.length).toBe(20);
    for (const s of [state, cold, warm, target]) model.release(s);
  });

  test("the identity changes with a weight byte, not with where the checkpoint lies", () => {
    const a = tempDir("identity-a");
    const b = tempDir("identity-b");
    cpSync(modelDir(name), a, { recursive: true });
    cpSync(modelDir(name), b, { recursive: true });
    expect(modelIdentity(a, 13)).toBe(modelIdentity(b, 13));
    expect(modelIdentity(a, 13)).not.toBe(modelIdentity(a, 12));
    const shard = readdirSync(b).find((n) => n.endsWith(".safetensors")) as string;
    const bytes = readFileSync(join(b, shard));
    bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 1;
    writeFileSync(join(b, shard), bytes);
    expect(modelIdentity(b, 13)).not.toBe(modelIdentity(a, 13));
  });
});
