/** Request limits (runtime.md 1.6): named once, used by validation and reports. */
export const maxGeneratedTokens = 4096;
export const maxPromptIds = 32_768;
/** prompt + generated + 1 must fit. */
export const maxPositions = maxPromptIds + maxGeneratedTokens;
export const defaultGeneratedTokens = 8;
/**
 * Ids per forward call when a prompt is fed, unless --prefill-chunk says otherwise: enough
 * tokens that each trunk matrix and expert read serves many of them, few enough that the
 * chunk's activations stay small next to the weights (they are counted in the memory plan).
 */
export const defaultPrefillChunk = 64;
export const maxPrefillChunk = 4096;
