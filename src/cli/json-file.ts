/** A JSON file a flag names, parsed; a refusal (unreadable: exit 1, not JSON: exit 2) names the flag and the file. */
import { usageError } from "../errors.ts";
import { readOrFail } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { JsonSyntaxError, parseJsonData } from "../json.ts";

export function readJsonFile(path: string, flag: string): unknown {
  const text = readOrFail(path, `${flag} ${path}`, inputLimits.requestBytes).toString("utf8");
  try {
    return parseJsonData(text);
  } catch (error) {
    if (error instanceof JsonSyntaxError) throw usageError(`${flag} ${path}: not JSON (line ${error.line}, column ${error.column}: ${error.reason})`);
    throw error;
  }
}
