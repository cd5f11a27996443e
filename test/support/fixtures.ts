/** The reference fixtures of tools/reference (see its README for the formats). */
import { cpSync, existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const fixturesDir = resolve(import.meta.dir, "../fixtures");

export interface ModelExpectation {
  model: string;
  prompt_ids: number[];
  generated_ids: number[];
  generated_ids_recompute: number[];
  tf: { ids: number[]; argmax: number[] };
  long: { prompt_ids: number[]; generated_ids: number[] };
  logits_prompt_ids: number[];
  logits_file: string;
  logits_argmax: number;
  max_abs_logit: number;
  min_top2_gap: number;
  tolerance: { rule: string; w: number; rel: number; abs_for_logits_step0: number };
}

export const oracleModels = ["tiny13", "nested14"] as const;

const copies = new Map<string, string>();

/**
 * The fixture model `name`, as a copy made once per test process under the tests' temporary
 * root (tmpfs where there is one: support/tmp.ts says why), so its reads cost no device time.
 */
export function modelDir(name: string): string {
  let dir = copies.get(name);
  if (dir === undefined || !existsSync(join(dir, "config.json"))) {
    dir = join(tempDir(`fixture-${name}`), name);
    cpSync(join(fixturesDir, name), dir, { recursive: true });
    copies.set(name, dir);
  }
  return dir;
}

export function expectation(name: string): ModelExpectation {
  return JSON.parse(readFileSync(join(modelDir(name), "expected.json"), "utf8")) as ModelExpectation;
}

export function readF32(path: string): Float32Array {
  const bytes = readFileSync(path);
  return new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
}

import { loadConfig } from "../../src/checkpoint/config.ts";
import { indexCheckpoint } from "../../src/checkpoint/safetensors.ts";
import { openEngine, type Engine } from "../../src/engine/open.ts";
import { gbToBytes } from "../../src/units.ts";
import { TensorReader } from "../../src/weights/tensor-reader.ts";
import { tempDir } from "./tmp.ts";
import { packTrunk } from "../../src/offline/trunk-pack.ts";
import { budgetRequest } from "../../src/plan/budget.ts";

/** The trunk of the checkpoint in `dir`, every layer, packed into `trunkDir` in-process (what `k3 pack-trunk` writes). */
export function packTrunkOf(dir: string, trunkDir: string, compress = false): void {
  const { config } = loadConfig(join(dir, "config.json"));
  const index = indexCheckpoint(dir);
  const reader = new TensorReader(index);
  try {
    // Compressed in blocks of 16 KB, so the fixtures' small layers have many blocks (and pieces).
    packTrunk(index, reader, config, config.numLayers, trunkDir, { force: false, onProgress: () => {}, compress, codecBlockBytes: 16384 });
  } finally {
    reader.close();
  }
}

const packed = new Map<string, string>();

/**
 * The fixture model `name`'s trunk packed in-process, once per test process (what `k3 pack-trunk`
 * writes; test/cli/pack-trunk.test.ts tests that command). For tests that only read it: one that
 * damages a trunk packs its own.
 */
export function packedFixtureTrunk(name: string, compress = false): string {
  const key = `${name}${compress ? " compressed" : ""}`;
  let dir = packed.get(key);
  if (dir === undefined || !existsSync(join(dir, "trunk.json"))) {
    dir = join(tempDir(`packed-${name}${compress ? "-compressed" : ""}`), "packed");
    packTrunkOf(modelDir(name), dir, compress);
    packed.set(key, dir);
  }
  return dir;
}

/** A fixture model opened in-process (resident trunk, every expert cacheable); close it after. */
export function openFixture(name: string, positions: number): Engine {
  const dir = modelDir(name);
  const { config } = loadConfig(join(dir, "config.json"));
  return openEngine({
    modelDir: dir, config, layerCount: config.numLayers, positions, prefillChunk: positions,
    budgets: budgetRequest([{ kind: "cache", bytes: gbToBytes(1) }]), trunkDir: undefined,
  });
}
