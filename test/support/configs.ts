/** Model configs the tests share: the tiny recipe of model.md 10.1 (MXFP4 widths). */
import { defaultContextLength, type ModelConfig } from "../../src/checkpoint/config.ts";

export function tinyConfig(): ModelConfig {
  return {
    hiddenSize: 128, numLayers: 13, vocabSize: 256, rmsNormEps: 1e-5,
    kdaNumHeads: 4, kdaHeadDim: 16, shortConvKernel: 4, gateLowerBound: -5,
    numAttentionHeads: 4, qLoraRank: 64, kvLoraRank: 32, qkNopeHeadDim: 24, qkRopeHeadDim: 8, vHeadDim: 16,
    mlaUseOutputGate: true, numExperts: 8, numExpertsPerToken: 2, numSharedExperts: 2,
    routedExpertHiddenSize: 64, moeIntermediateSize: 64, routedScalingFactor: 1, moeRenormalize: true,
    latentMoeUseNorm: true, firstKDenseReplace: 1, intermediateSize: 96, attnResBlockSize: 3,
    situBeta: 4, situLinearBeta: 25, fullAttnLayers: [4, 8, 12, 13], tieWordEmbeddings: false,
    maxPositionEmbeddings: defaultContextLength, // what the reference fixtures' configs (no key) read as
  };
}
