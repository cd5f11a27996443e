/** Request limits (runtime.md 1.6): named once, used by validation and reports. */
export const maxGeneratedTokens = 4096;
export const maxPromptIds = 32_768;
/** prompt + generated + 1 must fit. */
export const maxPositions = maxPromptIds + maxGeneratedTokens;
export const defaultGeneratedTokens = 8;
