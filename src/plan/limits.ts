/**
 * Request limits (runtime.md 1.6): named once, used by validation and reports.
 *
 * A request's positions (prompt + generated + 1) are bounded by the model's context length
 * (config `max_position_embeddings`) and by what the memory plan fits; both need the config
 * and MemAvailable, so they are checked when the engine opens, before anything large is
 * allocated (memory-plan.ts `checkKvFits`, with the ceiling `positionCeiling` reports). With
 * the latent MLA cache (55,296 B per position on the released model) memory no longer stops
 * a request near 36,864 positions, so no build constant does either.
 */
export { positionCeiling } from "./memory-plan.ts";

export const maxGeneratedTokens = 4096;
/**
 * What can be checked before a config is read: positions are u32 in libk3's ABI and in the
 * sequence-state bytes, so no request can name more.
 */
export const maxPositions = 0xffff_ffff;
/** prompt + 0 generated + 1 must fit. */
export const maxPromptIds = maxPositions - 1;
/** The positions a run needs (runtime.md 1.6: prompt + gen + 1), counting the ids a resumed state brings first. */
export const positionsNeeded = (priorIds: number, promptIds: number, generated: number): number => priorIds + promptIds + generated + 1;
export const defaultGeneratedTokens = 8;
/**
 * Ids per forward call when a prompt is fed, unless --prefill-chunk says otherwise: enough
 * tokens that each trunk matrix and expert read serves many of them, few enough that the
 * chunk's activations stay small next to the weights (they are counted in the memory plan).
 */
export const defaultPrefillChunk = 64;
export const maxPrefillChunk = 4096;
/**
 * Sequences decoded together (--parallel): each holds its own state and KV cache, counted in
 * the memory plan; a batched step's rows are at most this many prefill chunks.
 */
export const maxParallel = 256;
