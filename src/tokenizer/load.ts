/**
 * `loadTokenizer(dir)`: the two files of runtime.md 10.1 from one directory. A missing or
 * unreadable file is a K3Error (exit 1) whose one-line message names it.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { runtimeError } from "../errors.ts";
import { readCapped } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { parseAddedTokens } from "./added-tokens.ts";
import { parseRankFile } from "./rank-file.ts";
import { Tokenizer } from "./tokenizer.ts";

export const RANK_FILE = "tiktoken.model";
export const CONFIG_FILE = "tokenizer_config.json";

export function loadTokenizer(dir: string): Tokenizer {
  const rankPath = join(dir, RANK_FILE);
  const configPath = join(dir, CONFIG_FILE);
  const table = parseRankFile(readTokenizerFile(rankPath, dir, inputLimits.rankFileBytes), rankPath);
  let configText: string;
  try {
    configText = new TextDecoder("utf-8", { fatal: true }).decode(readTokenizerFile(configPath, dir, inputLimits.tokenizerConfigBytes));
  } catch (error) {
    if (error instanceof TypeError) throw runtimeError(`${configPath}: not valid UTF-8`);
    throw error;
  }
  return new Tokenizer(table, parseAddedTokens(configText, configPath, table.size));
}

function readTokenizerFile(path: string, dir: string, maxBytes: number): Uint8Array {
  if (!existsSync(path)) throw runtimeError(`${path}: missing (the tokenizer directory ${dir} must hold ${RANK_FILE} and ${CONFIG_FILE})`);
  return readCapped(path, maxBytes, "the tokenizer file");
}
