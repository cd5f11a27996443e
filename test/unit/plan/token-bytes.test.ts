/**
 * The per-token forecast of `k3 budget` (src/plan/token-bytes.ts) on the released config's own
 * tensor table: the spec's figures for the plain pack (runtime.md §1: 108.81 GB of trunk and
 * 25.83 GB of experts a token when nothing is pinned), and a compressed pack that reads less
 * and pins at least as many layers at every preset.
 */
import { expect, test } from "bun:test";
import { tensorBytes } from "../../../tools/checkpoint/writer.ts";
import { releasedConfig } from "../../../tools/checkpoint/released-config.ts";
import { expertTensors, trunkTensors } from "../../../src/checkpoint/tensor-names.ts";
import { findPreset } from "../../../src/plan/presets.ts";
import { assumedBf16StoredShare, tokenBytes } from "../../../src/plan/token-bytes.ts";
import { stagingPiece } from "../../../src/weights/compressed-trunk.ts";

const config = releasedConfig;
const layers = Array.from({ length: config.numLayers }, (_, l) => {
  const specs = trunkTensors(config, l);
  return {
    bytes: specs.reduce((sum, s) => sum + tensorBytes(s.dtype, s.shape), 0),
    bf16MatrixBytes: specs.filter((s) => s.dtype === "BF16" && s.shape.length >= 2).reduce((sum, s) => sum + tensorBytes(s.dtype, s.shape), 0),
  };
});
const expertBytes = expertTensors(config, config.numLayers - 1, 0).reduce((sum, s) => sum + tensorBytes(s.dtype, s.shape), 0);
const moeLayers = config.numLayers - config.firstKDenseReplace;
const perToken = config.numExpertsPerToken * moeLayers * expertBytes;

test("released config: the spec's bytes a token, and the compressed pack's fewer at every preset", () => {
  expect((layers.reduce((sum, l) => sum + l.bytes, 0) / 1e9).toFixed(2)).toBe("108.81");
  expect((perToken / 1e9).toFixed(2)).toBe("25.83");
  const largest = Math.max(...layers.map((l) => l.bytes - l.bf16MatrixBytes * (1 - assumedBf16StoredShare)));
  const compressed = { share: assumedBf16StoredShare, piece: stagingPiece(largest) };
  for (const name of ["laptop", "desktop", "workstation"]) {
    const budget = findPreset(name)!.trunkGb * 1e9;
    const plain = tokenBytes(layers, budget, perToken);
    const packed = tokenBytes(layers, budget, perToken, compressed);
    expect(packed.pinnedLayers).toBeGreaterThanOrEqual(plain.pinnedLayers);
    expect(packed.trunkBytes).toBeLessThan(plain.trunkBytes);
    expect(packed.expertBytes).toBe(plain.expertBytes);
    // Nothing pinned would read the whole trunk (plain) or its stored bytes (compressed).
    expect(plain.trunkBytes).toBeLessThanOrEqual(108.81e9 + 0.01e9);
  }
  // The workstation budget pins more layers compressed.
  const workstation = findPreset("workstation")!.trunkGb * 1e9;
  expect(tokenBytes(layers, workstation, perToken, compressed).pinnedLayers).toBeGreaterThan(tokenBytes(layers, workstation, perToken).pinnedLayers);
});
