/** The released Kimi K3 config (model.md section 0 and 1.2), for tools and benchmarks. */
import type { ModelConfig } from "../../src/checkpoint/config.ts";

export const releasedConfig: ModelConfig = {
  hiddenSize: 7168, numLayers: 93, vocabSize: 163840, rmsNormEps: 1e-5,
  kdaNumHeads: 96, kdaHeadDim: 128, shortConvKernel: 4, gateLowerBound: -5,
  numAttentionHeads: 96, qLoraRank: 1536, kvLoraRank: 512, qkNopeHeadDim: 128, qkRopeHeadDim: 64, vHeadDim: 128,
  mlaUseOutputGate: true, numExperts: 896, numExpertsPerToken: 16, numSharedExperts: 2,
  routedExpertHiddenSize: 3584, moeIntermediateSize: 3072, routedScalingFactor: 1, moeRenormalize: true,
  latentMoeUseNorm: true, firstKDenseReplace: 1, intermediateSize: 33792, attnResBlockSize: 12,
  situBeta: 4, situLinearBeta: 25,
  // One-based: every fourth layer, plus the last (so 92 and 93 are both MLA).
  fullAttnLayers: [...Array.from({ length: 23 }, (_, i) => 4 * (i + 1)), 93],
  tieWordEmbeddings: false,
  // Not given by model.md; the 2^20 positions its section 9 sizes the MLA cache at.
  maxPositionEmbeddings: 1_048_576,
};
