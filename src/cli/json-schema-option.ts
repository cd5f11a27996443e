/**
 * `--json-schema FILE` on the run command: the schema read (exit 2 naming the file when it is not
 * JSON), checked and compiled for the tokenizer, and the stop id the continuation ends with.
 */
import { controlIds } from "../chat/specials.ts";
import { jsonTextConstraint, type TextConstraint } from "../chat/text-constraint.ts";
import { usageError } from "../errors.ts";
import { readJsonFile } from "./json-file.ts";
import type { Tokenizer } from "../tokenizer/index.ts";

export interface SchemaConstraint {
  make: () => TextConstraint;
  stopIds: ReadonlySet<number>;
}

export async function schemaConstraint(path: string, tokenizer: Tokenizer | undefined): Promise<SchemaConstraint> {
  if (!tokenizer) throw usageError("--json-schema needs --tok DIR: the grammar is over the tokenizer's pieces");
  const schema = readJsonFile(path, "--json-schema");
  const stop = controlIds(tokenizer).endOfMessage;
  return { make: await jsonTextConstraint(schema as never, stop, tokenizer, "--json-schema"), stopIds: new Set([stop]) };
}
