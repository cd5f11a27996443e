/**
 * The Kimi tokenizer (runtime.md 10): `loadTokenizer(dir)` reads `tiktoken.model` and
 * `tokenizer_config.json`; the Tokenizer encodes text or raw bytes to ids and decodes ids to bytes.
 */
export { reservedTokenText, SPECIAL_ID_COUNT, type SpecialToken } from "./added-tokens.ts";
export { CONFIG_FILE, loadTokenizer, RANK_FILE } from "./load.ts";
export { KIMI_PATTERN } from "./pattern.ts";
export { type EncodeOptions, Tokenizer } from "./tokenizer.ts";
