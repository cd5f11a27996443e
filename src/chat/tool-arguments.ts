/**
 * `function.arguments` from the argument elements of one call (chat.md 2.9): JSON text built by
 * hand so each value keeps the model's own spelling (`1e3` stays `1e3`, `1.10` stays `1.10`;
 * parsing and re-serialising would change both).
 */

/** Spaces JSON allows around a value; String.trim would also strip U+00A0 and U+FEFF. */
const JSON_SPACE = /^[ \t\n\r]+|[ \t\n\r]+$/g;

/** A value as JSON text: strings as strings; other types as written if valid JSON, else as a string. */
export function argumentValueJson(type: string | undefined, raw: string): string {
  if (type === "string") return JSON.stringify(raw);
  try {
    JSON.parse(raw);
  } catch {
    return JSON.stringify(raw);
  }
  return raw.replace(JSON_SPACE, "");
}

/**
 * The arguments object. `values` maps keys to JSON text in first-seen order; a repeated key
 * keeps its first place and its last value, as Python's json.loads and JSON.parse read it.
 */
export function argumentsObject(values: ReadonlyMap<string, string>): string {
  return `{${[...values].map(([key, value]) => `${JSON.stringify(key)}:${value}`).join(",")}}`;
}
