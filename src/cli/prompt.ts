/**
 * Where the prompt's ids come from: `--ids` (or `--ids -` from stdin), `--prompt TEXT` or
 * `--prompt-file PATH` (bytes read verbatim) through the tokenizer in `--tok DIR`.
 */
import { usageError } from "../errors.ts";
import { readCapped } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { maxPositions, maxPromptIds, positionsNeeded } from "../plan/limits.ts";
import { JsonSyntaxError, parseJsonData } from "../json.ts";
import { log } from "../report/log.ts";
import { loadTokenizer, type Tokenizer } from "../tokenizer/index.ts";
import { parseIdList } from "./args.ts";
import { tokMissingMessage } from "./common-options.ts";

export interface PromptRequest {
  /** The prompt flag given: --ids, --prompt or --prompt-file. */
  source: string;
  /** Its raw value (ids text, "-", prompt text, or a path). */
  value: string;
  tokDir: string | undefined;
}

export interface Prompt {
  ids: number[];
  tokenizer: Tokenizer | undefined;
}

/** All of standard input as bytes, at most `maxBytes` of them (an `inputLimits` entry). */
export function readStdin(maxBytes: number, what: string): Uint8Array {
  return new Uint8Array(readCapped(0, maxBytes, what));
}

/** Ids given as text: comma/space separated, or the `{"ids":[...]}` object `k3 tokenize --json` prints. */
export function parseIdsText(text: string, source: string): number[] {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = parseJsonData(trimmed);
    } catch (error) {
      if (error instanceof JsonSyntaxError) throw usageError(`${source}:${error.message}`);
      throw error;
    }
    const ids = (parsed as { ids?: unknown }).ids;
    if (!Array.isArray(ids) || !ids.every((id) => Number.isSafeInteger(id) && id >= 0)) {
      throw usageError(`${source}: expected {"ids":[whole numbers >= 0]}`);
    }
    if (ids.length === 0) throw usageError(`${source}: no prompt ids parsed`);
    return ids as number[];
  }
  return parseIdList(trimmed, source);
}

/**
 * Request limits (runtime.md 1.6): refused, never truncated. `prior`: ids a resumed state
 * brings; `where`: what the message starts with, when the prompt is one of several (a --batch line).
 */
export function checkRequest(promptIds: number, gen: number, prior = 0, where?: string): void {
  const at = where ? `${where}: ` : "";
  if (promptIds > maxPromptIds) throw usageError(`${at}the prompt has ${promptIds} ids; the ceiling is ${maxPromptIds}`);
  if (positionsNeeded(prior, promptIds, gen) > maxPositions) {
    const resumed = prior > 0 ? `the resumed state's ${prior} ids + ` : "";
    throw usageError(`${at}${resumed}prompt (${promptIds}) + --gen (${gen}) + 1 exceeds the ${maxPositions}-position ceiling`);
  }
}

/** Refuses (exit 2) a prompt with an id the model has no row for, naming where it came from. */
export function checkInVocabulary(ids: readonly number[], vocabSize: number, where: string): void {
  const outside = ids.find((id) => id >= vocabSize);
  if (outside !== undefined) throw usageError(`${where}: token id ${outside} is outside the vocabulary (size ${vocabSize})`);
}

export function resolvePrompt(request: PromptRequest): Prompt {
  if (request.source === "--ids") {
    const text = request.value === "-" ? new TextDecoder().decode(readStdin(inputLimits.idsTextBytes, "the prompt ids")) : request.value;
    // With --tok the generated ids are also given as text, as for a text prompt.
    const ids = parseIdsText(text, request.value === "-" ? "--ids - (stdin)" : "--ids");
    return { ids, tokenizer: request.tokDir ? loadTokenizer(request.tokDir) : undefined };
  }
  if (!request.tokDir) throw usageError(tokMissingMessage(request.source));
  let bytes: Uint8Array;
  if (request.source === "--prompt-file") {
    bytes = new Uint8Array(readCapped(request.value, inputLimits.promptTextBytes, "the prompt file"));
  } else {
    bytes = new TextEncoder().encode(request.value);
  }
  const tokenizer = loadTokenizer(request.tokDir);
  log.info(tokenizer.loadLine);
  const ids = tokenizer.encode(bytes);
  log.info(`tokenized: ${bytes.length} bytes -> ${ids.length} ids`);
  if (ids.length === 0) throw usageError(`${request.source}: no prompt ids parsed (the prompt is empty)`);
  return { ids, tokenizer };
}
