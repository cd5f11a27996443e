/**
 * What `k3 demo`, `k3 chat --demo` and `k3 serve --demo` ship (assets/demo, issue 21): the trained
 * demo Kimi K3 in the released layout and its BPE tokenizer. Everything but the index is
 * embedded; the config is the released nested shape; the shards are the set the index names;
 * the tokenizer's K3 control ids sit at the released offsets inside the vocabulary; and the
 * training data's record of the tokenizer (tools/train-demo/data-manifest.json) agrees.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, realpathSync } from "node:fs";
import { join, resolve } from "node:path";
import { controlIds, controlNames } from "../../../src/chat/specials.ts";
import { loadConfig } from "../../../src/checkpoint/config.ts";
import { demoFiles } from "../../../src/cli/demo-assets.ts";
import { loadTokenizer } from "../../../src/tokenizer/index.ts";
import { demoDir } from "../../support/demo.ts";
import { fixturesDir } from "../../support/fixtures.ts";

const indexName = "model.safetensors.index.json";
const listing = readdirSync(demoDir).sort();
const readJson = (path: string) => JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;

describe("assets/demo", () => {
  test("every file but the index is embedded, from assets/demo, and nothing else is", () => {
    expect(listing).toContain(indexName);
    expect(Object.keys(demoFiles).sort()).toEqual(listing.filter((name) => name !== indexName));
    for (const [name, embedded] of Object.entries(demoFiles)) expect(realpathSync(embedded)).toBe(realpathSync(join(demoDir, name)));
  });

  test("the config is the released nested shape, and the shards are the ones the index names", () => {
    const raw = readJson(join(demoDir, "config.json"));
    expect(raw.model_type).toBe("kimi_k3");
    expect(raw.architectures).toEqual(["KimiK3ForConditionalGeneration"]);
    expect(typeof raw.text_config).toBe("object");
    const { config, shape, warnings } = loadConfig(join(demoDir, "config.json"));
    expect(shape).toBe("nested");
    expect(warnings).toEqual([]);
    expect(config.numLayers).toBeGreaterThan(0);
    // model-0000k-of-0000N: all N shards, numbered as the release numbers them.
    const shards = listing.filter((name) => name.endsWith(".safetensors"));
    const count = Number(/-of-(\d+)\.safetensors$/.exec(shards[0] ?? "")?.[1]);
    expect(shards).toEqual(Array.from({ length: count }, (_, i) => `model-${String(i + 1).padStart(5, "0")}-of-${String(count).padStart(6, "0")}.safetensors`));
    const weightMap = readJson(join(demoDir, indexName)).weight_map as Record<string, string>;
    expect([...new Set(Object.values(weightMap))].sort()).toEqual(shards);
  });

  test("the tokenizer fills the vocabulary, with the K3 control ids at their released offsets", () => {
    const { config } = loadConfig(join(demoDir, "config.json"));
    const tokenizer = loadTokenizer(demoDir);
    expect(tokenizer.vocabSize).toBe(config.vocabSize);
    expect(tokenizer.rankCount).toBe(config.vocabSize - 256);
    const ids = controlIds(tokenizer);
    for (const id of Object.values(ids)) expect(id).toBeLessThan(config.vocabSize);
    // The config's eos_token_id is one of the ids that end a turn.
    const eos = (readJson(join(demoDir, "config.json")).text_config as { eos_token_id: number }).eos_token_id;
    expect([ids.endOfMessage, ids.eos]).toContain(eos);
    // The offsets after the ranks, as the chat fixture tokenizer (built to the release's) has them.
    const fixture = loadTokenizer(join(fixturesDir, "chat-tokenizer"));
    for (const text of Object.values(controlNames)) {
      expect(tokenizer.specialId(text)! - tokenizer.rankCount).toBe(fixture.specialId(text)! - fixture.rankCount);
    }
  });

  test("tools/train-demo/data-manifest.json records this tokenizer", () => {
    const manifest = readJson(resolve(import.meta.dir, "../../../tools/train-demo/data-manifest.json")).manifest as {
      tokenizer: { rank_count: number; vocab_size: number; special_ids: Record<string, number> };
    };
    const tokenizer = loadTokenizer(demoDir);
    expect(manifest.tokenizer.rank_count).toBe(tokenizer.rankCount);
    expect(manifest.tokenizer.vocab_size).toBe(tokenizer.vocabSize);
    expect(manifest.tokenizer.vocab_size).toBe(loadConfig(join(demoDir, "config.json")).config.vocabSize);
    for (const [text, id] of Object.entries(manifest.tokenizer.special_ids)) expect(tokenizer.specialId(text)).toBe(id);
  });
});
