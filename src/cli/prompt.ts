/**
 * Where the prompt's ids come from: `--ids` (or `--ids -` from stdin), `--prompt TEXT` or
 * `--prompt-file PATH` (bytes read verbatim) through the tokenizer in `--tok DIR`.
 */
import { readFileSync } from "node:fs";
import { K3Error, ExitCode, usageError } from "../errors.ts";
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

/** Reads all of standard input as bytes. */
export function readStdin(): Uint8Array {
  try {
    return new Uint8Array(readFileSync(0));
  } catch (error) {
    throw new K3Error(ExitCode.runtime, `cannot read standard input (${(error as NodeJS.ErrnoException).code ?? "error"})`);
  }
}

/** Ids given as text: comma/space separated, or the `{"ids":[...]}` object `k3 tokenize --json` prints. */
export function parseIdsText(text: string, source: string): number[] {
  const trimmed = text.trim();
  if (trimmed.startsWith("{")) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(trimmed);
    } catch {
      throw usageError(`${source}: not valid JSON`);
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

export function resolvePrompt(request: PromptRequest): Prompt {
  if (request.source === "--ids") {
    const text = request.value === "-" ? new TextDecoder().decode(readStdin()) : request.value;
    return { ids: parseIdsText(text, request.value === "-" ? "--ids - (stdin)" : "--ids"), tokenizer: undefined };
  }
  if (!request.tokDir) throw usageError(tokMissingMessage(request.source));
  let bytes: Uint8Array;
  if (request.source === "--prompt-file") {
    try {
      bytes = new Uint8Array(readFileSync(request.value));
    } catch (error) {
      throw new K3Error(ExitCode.runtime, `${request.value}: cannot read the prompt file (${(error as NodeJS.ErrnoException).code ?? "error"})`);
    }
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
