/**
 * The chat fixture: the tiny model recipe with a vocabulary of the chat tokenizer's size (its
 * 401 ranks, then the 256 control ids with the K3 names at their released offsets), random
 * weights, written once per test process. The text is not language; every path of a chat runs.
 */
import { copyFileSync, existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { writeCheckpoint } from "../../tools/checkpoint/writer.ts";
import { tinyConfig } from "./configs.ts";
import { tempDir } from "./tmp.ts";

export const chatTokenizerDir = resolve(import.meta.dir, "../fixtures/chat-tokenizer");

let made: string | undefined;

/** A model directory holding the checkpoint and the chat tokenizer's files. */
export function chatModelDir(): string {
  if (made && existsSync(join(made, "config.json"))) return made;
  const ranks = readFileSync(join(chatTokenizerDir, "tiktoken.model"), "utf8").split("\n").filter((l) => l.trim()).length;
  const dir = tempDir("chat-model");
  writeCheckpoint(dir, { ...tinyConfig(), vocabSize: ranks + 256 }, { shape: "flat", shards: 1, seed: 7 });
  for (const name of ["tiktoken.model", "tokenizer_config.json"]) copyFileSync(join(chatTokenizerDir, name), join(dir, name));
  made = dir;
  return dir;
}
