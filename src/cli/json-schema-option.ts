/**
 * `--json-schema FILE` on the run command: the schema read (exit 2 naming the file when it is not
 * JSON), checked and compiled for the tokenizer, and the stop id the continuation ends with.
 */
import { controlIds } from "../chat/specials.ts";
import { jsonTextConstraint, type TextConstraint } from "../chat/text-constraint.ts";
import { usageError } from "../errors.ts";
import { readOrFail } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { JsonSyntaxError, parseJsonData } from "../json.ts";
import type { Tokenizer } from "../tokenizer/index.ts";

export interface SchemaConstraint {
  make: () => TextConstraint;
  stopIds: ReadonlySet<number>;
}

export async function schemaConstraint(path: string, tokenizer: Tokenizer | undefined): Promise<SchemaConstraint> {
  if (!tokenizer) throw usageError("--json-schema needs --tok DIR: the grammar is over the tokenizer's pieces");
  let schema: unknown;
  try {
    schema = parseJsonData(readOrFail(path, "--json-schema", inputLimits.requestBytes).toString("utf8"));
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw usageError(`--json-schema ${path}: not JSON (line ${error.line}, column ${error.column}: ${error.reason})`);
    throw error;
  }
  const stop = controlIds(tokenizer).endOfMessage;
  return { make: await jsonTextConstraint(schema as never, stop, tokenizer, "--json-schema"), stopIds: new Set([stop]) };
}
