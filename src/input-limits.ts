/**
 * The most k3 reads of each kind of input before it refuses: one table, so that no parser
 * allocates or loops on a number it has not bounded (`--config /dev/zero` is refused after
 * `configBytes + 1` bytes, not read forever). Every limit is far above what the released model
 * needs (the figure beside it), so only a corrupt or hostile input ever meets one.
 */
const MiB = 1024 * 1024;

export const inputLimits = {
  /** config.json (released: a few KB, vision_config included). */
  configBytes: 4 * MiB,
  /** One shard's JSON header (released: under 1 MB each). */
  safetensorsHeaderBytes: 256 * MiB,
  /** tiktoken.model (released: 2.8 MB). */
  rankFileBytes: 64 * MiB,
  /** tokenizer_config.json (released: 3 KB). */
  tokenizerConfigBytes: 16 * MiB,
  /** A packed trunk's trunk.json (released: about 0.5 MB for 93 layers). */
  trunkManifestBytes: 64 * MiB,
  /** `--ids -` text (1,048,576 ids, the context length, are about 7.3 MB). */
  idsTextBytes: 64 * MiB,
  /** `--prompt-file`, `k3 tokenize` input (a context of 1,048,576 tokens is about 4 MB of text). */
  promptTextBytes: 256 * MiB,
  /** A chat-completions request body or file, and a saved transcript. */
  requestBytes: 64 * MiB,
  /** Messages in one request or transcript (a context of 1,048,576 positions holds under 200,000 short ones). */
  requestMessages: 262_144,
  /** `n`, the choices of one request (a server holds it to its --parallel, itself at most 256). */
  requestChoices: 256,
  /** An expert trace for `k3 sim-cache` (8 bytes a request: 134 million requests). */
  traceBytes: 1024 * MiB,
  /** One answer of the Hub's API: revision info, a page of the tree listing (the release's: ~30 KB). */
  hubAnswerBytes: 64 * MiB,
  /** k3 download's record, .k3-download.json (the release's: ~40 KB). */
  downloadRecordBytes: 64 * MiB,
  /** model.safetensors.index.json, read by k3 verify (the release's: ~60 MB for 497,220 names). */
  indexJsonBytes: 512 * MiB,
  /** Nesting levels of any JSON value (the released files use 3, tool schemas tens). */
  jsonDepth: 256,
  /** Characters of an input a message quotes: more is cut and marked with "...". */
  excerptChars: 40,
} as const;
