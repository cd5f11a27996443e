/**
 * The JSON Schema keywords a constrained reply enforces: the one table (docs/serving.md's table is
 * checked against it). A schema is walked before it is compiled; a keyword outside the table, or
 * one the grammar cannot enforce where it stands, is a 400 naming it (`param` set to its path),
 * never a reply that quietly ignores it.
 */
import { refuse } from "./fields.ts";

export type KeywordSupport = "enforced" | "annotation";

export interface KeywordEntry {
  readonly support: KeywordSupport;
  /** What a reply follows, for the docs. */
  readonly note: string;
}

export const schemaKeywords = {
  type: { support: "enforced", note: "one type or a list; `integer` and `number` distinct" },
  properties: { support: "enforced", note: "each listed property follows its schema" },
  required: { support: "enforced", note: "required properties are always written" },
  additionalProperties: { support: "enforced", note: "`false` or a schema; absent: no properties beyond `properties` are written (as strict mode)" },
  enum: { support: "enforced", note: "one of the values" },
  const: { support: "enforced", note: "exactly the value" },
  items: { support: "enforced", note: "every item follows the schema" },
  prefixItems: { support: "enforced", note: "the first items follow their schemas in order" },
  minItems: { support: "enforced", note: "at least this many items" },
  maxItems: { support: "enforced", note: "at most this many items" },
  anyOf: { support: "enforced", note: "one of the schemas" },
  oneOf: { support: "enforced", note: "only with a discriminator: every branch an object requiring one property whose `const` (or `enum`) values no other branch shares, so at most one branch can match" },
  $ref: { support: "enforced", note: "`#/$defs/...` and `#/definitions/...`, recursion included" },
  $defs: { support: "enforced", note: "definitions for `$ref`" },
  definitions: { support: "enforced", note: "definitions for `$ref` (the older name)" },
  minLength: { support: "enforced", note: "at least this many characters" },
  maxLength: { support: "enforced", note: "at most this many characters" },
  pattern: { support: "enforced", note: "the whole string matches (as if anchored, which only narrows); no lookaround, backreferences or Unicode property classes; not on a raw string argument" },
  format: { support: "enforced", note: "`date`, `time`, `date-time`, `email`, `ipv4`, `ipv6`, `uuid`, `uri`, `hostname` (not on a raw string argument)" },
  minimum: { support: "enforced", note: "on `integer`; on `number` the value is written as an integer within the range (the engine's fractional ranges are not exact: narrower, always valid)" },
  maximum: { support: "enforced", note: "as `minimum`" },
  exclusiveMinimum: { support: "enforced", note: "as `minimum`" },
  exclusiveMaximum: { support: "enforced", note: "as `minimum`" },
  minProperties: { support: "enforced", note: "at least this many properties" },
  maxProperties: { support: "enforced", note: "at most this many properties" },
  title: { support: "annotation", note: "no effect on the reply" },
  description: { support: "annotation", note: "no effect on the reply" },
  default: { support: "annotation", note: "no effect on the reply" },
  examples: { support: "annotation", note: "no effect on the reply" },
  $schema: { support: "annotation", note: "no effect on the reply" },
  $id: { support: "annotation", note: "no effect on the reply" },
  $comment: { support: "annotation", note: "no effect on the reply" },
  deprecated: { support: "annotation", note: "no effect on the reply" },
  readOnly: { support: "annotation", note: "no effect on the reply" },
  writeOnly: { support: "annotation", note: "no effect on the reply" },
} as const satisfies Record<string, KeywordEntry>;

export type SchemaKeyword = keyof typeof schemaKeywords;

const formats = new Set(["date", "time", "date-time", "email", "hostname", "ipv4", "ipv6", "uuid", "uri"]);
const types = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);

/** Keywords whose value is a schema, a list of schemas, or a map of schemas. */
const oneSchema = new Set(["items", "additionalProperties"]);
const schemaList = new Set(["anyOf", "oneOf", "prefixItems"]);
const schemaMap = new Set(["properties", "$defs", "definitions"]);

export type PlainJson = null | boolean | number | string | PlainJson[] | { [key: string]: PlainJson };

/** A key as a path segment: a client's long key is cut, so a refusal stays one short line. */
const segment = (key: string) => (Array.from(key).length > 40 ? `${Array.from(key).slice(0, 40).join("")}...` : key);

const isObject = (v: PlainJson | undefined): v is { [key: string]: PlainJson } => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Refuses what a reply could not be held to: an unknown or unenforced keyword, a keyword of the
 * wrong shape, a `$ref` that does not resolve, a format outside the table. `path` is the request
 * field of `schema` (`response_format.json_schema.schema`).
 */
export function checkSchema(schema: PlainJson, path: string, root: PlainJson = schema): void {
  if (typeof schema === "boolean") return;
  if (!isObject(schema)) throw refuse(path, "a schema must be an object or a boolean");
  for (const [keyword, value] of Object.entries(schema)) {
    const at = `${path}.${segment(keyword)}`;
    if (!Object.hasOwn(schemaKeywords, keyword)) {
      throw refuse(at, `the JSON Schema keyword ${JSON.stringify(segment(keyword))} is not enforced by k3's constrained decoding (docs/serving.md lists those that are)`);
    }
    if (schemaMap.has(keyword)) {
      if (!isObject(value)) throw refuse(at, "expected an object of schemas");
      for (const [name, sub] of Object.entries(value)) checkSchema(sub, `${at}.${segment(name)}`, root);
    } else if (schemaList.has(keyword)) {
      if (!Array.isArray(value) || value.length === 0) throw refuse(at, "expected a non-empty list of schemas");
      value.forEach((sub, i) => checkSchema(sub, `${at}[${i}]`, root));
    } else if (oneSchema.has(keyword)) {
      checkSchema(value, at, root);
    } else if (keyword === "type") {
      const list = Array.isArray(value) ? value : [value];
      if (list.length === 0 || !list.every((t) => typeof t === "string" && types.has(t))) throw refuse(at, `expected one of ${[...types].join(", ")}, or a list of them`);
    } else if (keyword === "required") {
      if (!Array.isArray(value) || !value.every((k) => typeof k === "string")) throw refuse(at, "expected a list of property names");
    } else if (keyword === "enum") {
      if (!Array.isArray(value) || value.length === 0) throw refuse(at, "expected a non-empty list of values");
    } else if (keyword === "format") {
      if (typeof value !== "string" || !formats.has(value)) throw refuse(at, `${JSON.stringify(typeof value === "string" ? segment(value) : value).slice(0, 60)} is not a format k3 enforces (${[...formats].join(", ")})`);
    } else if (keyword === "pattern") {
      if (typeof value !== "string") throw refuse(at, "expected a regular expression as a string");
    } else if (keyword === "$ref") {
      if (typeof value !== "string" || resolveRef(value, root) === undefined) throw refuse(at, `${JSON.stringify(typeof value === "string" ? segment(value) : value).slice(0, 60)} does not resolve (k3 follows #/$defs/NAME and #/definitions/NAME)`);
    } else if (/^(min|max)(Length|Items|Properties)$/.test(keyword)) {
      if (typeof value !== "number" || !Number.isInteger(value) || value < 0) throw refuse(at, "expected a non-negative integer");
    } else if (/^(exclusiveM|m)(in|ax)imum$/.test(keyword)) {
      if (typeof value !== "number") throw refuse(at, "expected a number");
      if (schema.type !== "integer" && schema.type !== "number") throw refuse(at, `${keyword} is enforced with "type": "integer" or "number" only`);
    }
  }
  for (const [min, max] of [["minLength", "maxLength"], ["minItems", "maxItems"], ["minProperties", "maxProperties"], ["minimum", "maximum"]] as const) {
    const lo = schema[min];
    const hi = schema[max];
    if (typeof lo === "number" && typeof hi === "number" && lo > hi) throw refuse(`${path}.${min}`, `${lo} is above ${max} ${hi}: no value can match`);
  }
  if (schema.type === "number" && integerRange(schema) === undefined) {
    throw refuse(`${path}.minimum`, "no integer lies in this range (a number with a range is written as an integer within it)");
  }
  if (schema.oneOf !== undefined && !discriminated(schema.oneOf as PlainJson[], root)) {
    throw refuse(`${path}.oneOf`, "oneOf is enforced only when its branches are told apart by a required property with distinct const values (use anyOf when more than one branch may match)");
  }
}

/** A property every branch requires, with const/enum values no two branches share: at most one branch can match. */
function discriminated(branches: readonly PlainJson[], root: PlainJson): boolean {
  const objects = branches.map((b) => (isObject(b) && typeof b.$ref === "string" ? resolveRef(b.$ref, root) : b));
  if (!objects.every(isObject)) return false;
  const branchesOf = objects as { [key: string]: PlainJson }[];
  const first = branchesOf[0];
  const candidates = Array.isArray(first?.required) ? first.required.filter((k): k is string => typeof k === "string") : [];
  return candidates.some((key) => {
    const seen = new Set<string>();
    for (const branch of branchesOf) {
      const required = Array.isArray(branch.required) && branch.required.includes(key);
      const property = isObject(branch.properties) ? branch.properties[key] : undefined;
      const values = isObject(property) ? (property.const !== undefined ? [property.const] : Array.isArray(property.enum) ? property.enum : undefined) : undefined;
      if (!required || !values) return false;
      for (const v of values) {
        const k = JSON.stringify(v);
        if (seen.has(k)) return false;
        seen.add(k);
      }
    }
    return true;
  });
}

/**
 * A tool's parameters schema with what cannot be enforced taken out, each removal's path added to
 * `unenforced`: an unknown keyword (`allOf`, `not`, ...), a format outside the table, a `oneOf`
 * without a discriminator (kept as `anyOf`: each branch still holds), a `number` range no integer
 * lies in. Agents' tool schemas carry such keywords (Claude Code's have `allOf` of patterns), and
 * a call must still go out: the call's name, its keys and every enforceable keyword still hold,
 * and the reply lists what was not (`k3.constraint.unenforced`). A `response_format` schema is
 * held to checkSchema instead: there a keyword k3 cannot enforce is a 400.
 */
export function withoutUnenforced(schema: PlainJson, path: string, unenforced: string[]): PlainJson {
  if (Array.isArray(schema)) return schema.map((s, i) => withoutUnenforced(s, `${path}[${i}]`, unenforced));
  if (!isObject(schema)) return schema;
  const out: { [key: string]: PlainJson } = {};
  for (const [keyword, value] of Object.entries(schema)) {
    const at = `${path}.${segment(keyword)}`;
    if (!Object.hasOwn(schemaKeywords, keyword) || (keyword === "format" && !(typeof value === "string" && formats.has(value)))) {
      unenforced.push(at);
      continue;
    }
    if (schemaMap.has(keyword) && isObject(value)) out[keyword] = Object.fromEntries(Object.entries(value).map(([n, sub]) => [n, withoutUnenforced(sub, `${at}.${segment(n)}`, unenforced)]));
    else if ((schemaList.has(keyword) || oneSchema.has(keyword)) && typeof value === "object" && value !== null) out[keyword] = withoutUnenforced(value, at, unenforced);
    else out[keyword] = value;
  }
  if (Array.isArray(out.oneOf) && !discriminated(out.oneOf, out)) {
    unenforced.push(`${path}.oneOf`);
    out.anyOf = out.oneOf;
    delete out.oneOf;
  }
  if (out.type === "number" && integerRange(out) === undefined) {
    unenforced.push(`${path}.minimum`);
    for (const k of ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]) delete out[k];
  }
  return out;
}

/** The integers a range allows, as [lowest, highest] (either side open: null); undefined when none does. */
export function integerRange(schema: { [key: string]: PlainJson }): [number | null, number | null] | undefined {
  const num = (k: string) => (typeof schema[k] === "number" ? (schema[k] as number) : undefined);
  const lows = [num("minimum") === undefined ? undefined : Math.ceil(num("minimum") as number), num("exclusiveMinimum") === undefined ? undefined : Math.floor(num("exclusiveMinimum") as number) + 1];
  const highs = [num("maximum") === undefined ? undefined : Math.floor(num("maximum") as number), num("exclusiveMaximum") === undefined ? undefined : Math.ceil(num("exclusiveMaximum") as number) - 1];
  const low = lows.filter((x): x is number => x !== undefined).reduce<number | null>((a, b) => (a === null ? b : Math.max(a, b)), null);
  const high = highs.filter((x): x is number => x !== undefined).reduce<number | null>((a, b) => (a === null ? b : Math.min(a, b)), null);
  return low !== null && high !== null && low > high ? undefined : [low, high];
}

/**
 * The schema as the grammar engine is given it: a `number` with a range becomes an `integer`
 * within it (the engine's fractional ranges are not exact; an integer in range always validates).
 */
export function forEngine(schema: PlainJson): PlainJson {
  if (Array.isArray(schema)) return schema.map(forEngine);
  if (!isObject(schema)) return schema;
  const out: { [key: string]: PlainJson } = Object.fromEntries(Object.entries(schema).map(([k, v]) => [k, k === "enum" || k === "const" || k === "default" || k === "examples" ? v : forEngine(v)]));
  const ranged = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"].some((k) => out[k] !== undefined);
  if (out.type === "number" && ranged) {
    const range = integerRange(out);
    for (const k of ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]) delete out[k];
    out.type = "integer";
    if (range?.[0] !== null && range?.[0] !== undefined) out.minimum = range[0];
    if (range?.[1] !== null && range?.[1] !== undefined) out.maximum = range[1];
  }
  return out;
}

/** The schema `ref` names in `root`, for `#`, `#/$defs/NAME` and `#/definitions/NAME`. */
export function resolveRef(ref: string, root: PlainJson): PlainJson | undefined {
  if (ref === "#") return root;
  const match = /^#\/(\$defs|definitions)\/([^/]+)$/.exec(ref);
  if (!match || !isObject(root)) return undefined;
  const defs = root[match[1] as string];
  const name = (match[2] as string).replaceAll("~1", "/").replaceAll("~0", "~");
  return isObject(defs) && Object.hasOwn(defs, name) ? defs[name] : undefined;
}
