/** Options several commands share, defined once: the same flag means the same thing everywhere. */
import { configCeilings, type ModelConfig } from "../checkpoint/config.ts";
import { envValue } from "../env.ts";
import { quoteArgument, usageError } from "../errors.ts";
import { defaultPrefillChunk, maxPrefillChunk } from "../plan/limits.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import { parseInteger, type OptionDef } from "./args.ts";

/** An option that takes a path: an empty one is a usage error naming the flag. */
export function requirePath(raw: string, flag: string): string {
  if (raw.length === 0) throw usageError(`${flag} needs a path`);
  return raw;
}

/** What a text command says without --tok; `who` is the flag or command that needs it. */
export const tokMissingMessage = (who: string): string =>
  `${who} needs --tok DIR: a directory holding tiktoken.model and tokenizer_config.json (normally the model directory)`;

export const helpOption: OptionDef<unknown> = { name: "help", alias: "h", description: "Print this usage and exit", apply: () => {} };

export function tokOption<T extends { tokDir: string | undefined }>(description: string): OptionDef<T> {
  return { name: "tok", value: "DIR", description, apply: (o, raw, flag) => { o.tokDir = requirePath(raw, flag); } };
}

export function configOption<T extends { configPath: string | undefined }>(): OptionDef<T> {
  return {
    name: "config", value: "PATH", description: "Model config (default <model_dir>/config.json)",
    apply: (o, raw, flag) => { o.configPath = requirePath(raw, flag); },
  };
}

/** --prefill-chunk: the run command, chat and serve feed prompts the same way. */
export function prefillChunkOption<T extends { prefillChunk: number }>(): OptionDef<T> {
  return {
    name: "prefill-chunk", value: "N",
    description: `Prompt ids per forward call, 1 to ${maxPrefillChunk} (default ${defaultPrefillChunk}): each chunk reads every weight and expert once; any size gives the same tokens`,
    apply: (o, raw, flag) => { o.prefillChunk = parseInteger(raw, flag, 1, maxPrefillChunk); },
  };
}

export function layersOption<T extends { layers: number | undefined }>(description: string): OptionDef<T> {
  return { name: "layers", value: "N", description, apply: (o, raw, flag) => { o.layers = parseInteger(raw, flag, 1, configCeilings.layers); } };
}

/** The layer count to use: all of them, or the first `layers`; more is a usage error. */
export function checkLayers(layers: number | undefined, config: ModelConfig): number {
  const count = layers ?? config.numLayers;
  if (count > config.numLayers) throw usageError(`--layers ${count} exceeds the model's ${config.numLayers} layers`);
  return count;
}

/**
 * The tokenizer must fit the model: every id ordinary text encodes to (its ranks) must have an
 * embedding, or a prompt would be refused or read wrongly. Returns a warning when the model can
 * emit ids the tokenizer has no text for (a vocabulary padded past the tokenizer); special ids
 * past the model's vocabulary (the byte-level test tokenizer on tiny13) are left alone, since
 * any use of one is refused as an id outside the vocabulary.
 */
export function checkTokenizerFits(tokenizer: Tokenizer, config: ModelConfig, tokDir: string): string | undefined {
  if (tokenizer.rankCount > config.vocabSize) {
    throw usageError(
      `--tok ${tokDir}: the tokenizer has ${tokenizer.rankCount} ranks but the model's vocabulary is ${config.vocabSize} ids (vocab_size): ` +
        "it is not this model's tokenizer",
    );
  }
  if (tokenizer.vocabSize < config.vocabSize) {
    return `--tok ${tokDir}: the tokenizer has ${tokenizer.vocabSize} ids, the model's vocabulary ${config.vocabSize}: ids ${tokenizer.vocabSize}..${config.vocabSize - 1} have no text`;
  }
  return undefined;
}

/** Fault injection for tests of the dropped-expert path: K3_INJECT_EXPERT_FAULT=layer:expert[,…]. */
export function injectedFaults(): Set<string> | undefined {
  const raw = envValue("K3_INJECT_EXPERT_FAULT");
  if (!raw) return undefined;
  const keys = raw.split(",").map((k) => k.trim());
  for (const key of keys) {
    if (!/^\d+:\d+$/.test(key)) throw usageError(`K3_INJECT_EXPERT_FAULT: ${quoteArgument(key)} is not layer:expert`);
  }
  return new Set(keys);
}

/** Fault injection for tests of a failing disk: K3_INJECT_TRUNK_READ_FAULT=layer:read[,…], that read of that packed layer fails with EIO. */
export function injectedTrunkReadFaults(): Map<number, number> | undefined {
  const raw = envValue("K3_INJECT_TRUNK_READ_FAULT");
  if (!raw) return undefined;
  const faults = new Map<number, number>();
  for (const key of raw.split(",").map((k) => k.trim())) {
    const match = /^(\d+):([1-9]\d*)$/.exec(key);
    if (!match) throw usageError(`K3_INJECT_TRUNK_READ_FAULT: '${key}' is not layer:read (read 1 is the first)`);
    faults.set(Number(match[1]), Number(match[2]));
  }
  return faults;
}
