/**
 * What one token moves from disk at a trunk budget, for the plain and the compressed pack
 * (runtime.md §1: the unpinned trunk is re-read every token, and the routed experts the token
 * picks are read unless cached). The same plans the engine executes (trunk-plan.ts) decide
 * what is pinned.
 */
import { planCompressedTrunk, planTrunk } from "./trunk-plan.ts";

export interface TrunkLayerBytes {
  bytes: number;
  /** Of `bytes`, the bf16 matrices: what the code compresses. */
  bf16MatrixBytes: number;
}

export interface TokenBytes {
  pinnedLayers: number;
  /** Trunk bytes read from disk a token: the unpinned layers, plain or as stored. */
  trunkBytes: number;
  expertBytes: number;
  totalBytes: number;
}

/**
 * The stored share of bf16 matrices that the forecast assumes for a compressed trunk: measured
 * on the K3-width checkpoint with normally drawn weights (bench/compressed.ts, 2026-12-03:
 * 70.1%); a real trunk's own share is what `k3 pack-trunk --compress` prints.
 */
export const assumedBf16StoredShare = 0.701;

/** Per token at `trunkBudgetBytes`, with `expertBytesPerToken` of experts read (no reuse assumed by the caller). */
export function tokenBytes(
  layers: readonly TrunkLayerBytes[], trunkBudgetBytes: number, expertBytesPerToken: number,
  compressed?: { share: number; piece: { bytes: number; slotBytes: number; minimum: number } },
): TokenBytes {
  const costs = compressed ? layers.map((l) => l.bytes - l.bf16MatrixBytes * (1 - compressed.share)) : layers.map((l) => l.bytes);
  const pinned = compressed
    ? planCompressedTrunk(costs, Math.max(...layers.map((l) => l.bytes)), trunkBudgetBytes, compressed.piece).pinned
    : planTrunk(costs, trunkBudgetBytes).pinned;
  const trunkBytes = costs.slice(pinned).reduce((a, b) => a + b, 0);
  return { pinnedLayers: pinned, trunkBytes, expertBytes: expertBytesPerToken, totalBytes: trunkBytes + expertBytesPerToken };
}
