/**
 * A chat request to the shape its reply is held to (chat.md 4.8), or none: `response_format`
 * (`json_object`, `json_schema`) constrains the response section's text; declared tools (the
 * request's and the system messages', chat.md 4.2) with `tool_choice` decide the tools section.
 * A request with neither is not constrained at all, so its ids are today's. Every schema is
 * checked against the keyword table and compiled here, before generation: what cannot be
 * enforced is a 400 naming the field.
 */
import { grammarEngine, grammarErrorText, type CompiledText, type GrammarEngine } from "../grammar/engine.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import { refuse } from "./fields.ts";
import { isJsonArray, isJsonObject, JsonNumber, type JsonValue } from "./json-value.ts";
import type { ChatRequest } from "./request-types.ts";
import type { ArgumentShape, ArgumentType, ReplyShape, TextRule, ToolMode, ToolShape } from "./reply-constraint.ts";
import { checkSchema, forEngine, resolveRef, withoutUnenforced, type PlainJson } from "./schema-keywords.ts";

const argumentTypes: readonly ArgumentType[] = ["string", "number", "boolean", "null", "object", "array"];
const free: TextRule = { kind: "free" };

/** A request value as plain JSON (schemas only: numbers as doubles). */
export function plain(value: JsonValue): PlainJson {
  if (value instanceof JsonNumber) return value.value;
  if (isJsonArray(value)) return value.map(plain);
  if (isJsonObject(value)) return Object.fromEntries([...value].map(([k, v]) => [k, plain(v)]));
  return value as PlainJson;
}

const isObject = (v: PlainJson | undefined): v is { [key: string]: PlainJson } => typeof v === "object" && v !== null && !Array.isArray(v);

async function compile(engine: GrammarEngine, schema: PlainJson, path: string): Promise<CompiledText> {
  try {
    return await engine.jsonSchema(JSON.stringify(forEngine(schema)));
  } catch (error) {
    throw refuse(path, `the schema cannot be compiled into a grammar: ${grammarErrorText(error)}`);
  }
}

/** The shape of the reply `request` asks for, or undefined when nothing constrains it. */
export async function replyShape(request: ChatRequest, tokenizer: Tokenizer): Promise<ReplyShape | undefined> {
  const declared = declaredTools(request);
  const format = request.responseFormat;
  if (declared.length === 0 && format.type === "text") return undefined;
  const engine = await grammarEngine(tokenizer);
  let content: TextRule = free;
  if (format.type === "json_object") content = { kind: "grammar", grammar: await compile(engine, { type: "object" }, "response_format") };
  if (format.type === "json_schema") {
    const path = "response_format.json_schema.schema";
    const schema = plain(format.schema);
    checkSchema(schema, path);
    content = { kind: "grammar", grammar: await compile(engine, schema, path) };
  }
  const unenforced: string[] = [];
  const tools = await toolMode(request, declared, engine, unenforced);
  return { thinking: request.thinking, content, tools, unenforced };
}

interface Declared {
  readonly name: string;
  readonly parameters: JsonValue | undefined;
  /** The request field of the parameters, for errors. */
  readonly path: string;
}

function declaredTools(request: ChatRequest): Declared[] {
  const out: Declared[] = [];
  const add = (tools: readonly JsonValue[], path: string) => tools.forEach((tool, i) => {
    const fn = isJsonObject(tool) ? tool.get("function") : undefined;
    const name = isJsonObject(fn) ? fn.get("name") : undefined;
    if (isJsonObject(fn) && typeof name === "string") out.push({ name, parameters: fn.get("parameters"), path: `${path}[${i}].function.parameters` });
  });
  add(request.tools, "tools");
  for (const message of request.messages) if (message.kind === "tools") add(message.tools, `messages[${message.at}].tools`);
  return out;
}

async function toolMode(request: ChatRequest, declared: readonly Declared[], engine: GrammarEngine, unenforced: string[]): Promise<ToolMode> {
  const choice = request.toolChoice;
  if (declared.length === 0 || choice === "none") return { kind: "none" };
  if (typeof choice === "object") {
    const tool = declared.find((d) => d.name === choice.function);
    if (!tool) throw refuse("tool_choice.function.name", `${JSON.stringify(choice.function)} is not a declared tool (declared: ${declared.map((d) => d.name).join(", ")})`);
    return { kind: "named", tool: await toolShape(tool, engine, unenforced) };
  }
  return { kind: choice, tools: await Promise.all(declared.map((d) => toolShape(d, engine, unenforced))) };
}

async function toolShape(tool: Declared, engine: GrammarEngine, unenforced: string[]): Promise<ToolShape> {
  const params = withoutUnenforced(tool.parameters === undefined ? {} : plain(tool.parameters), tool.path, unenforced);
  checkSchema(params, tool.path);
  if (!isObject(params)) return { name: tool.name, arguments: [], required: new Set() };
  if (params.type !== undefined && params.type !== "object") throw refuse(`${tool.path}.type`, 'a function\'s parameters are an object schema ("type": "object")');
  const properties = isObject(params.properties) ? params.properties : {};
  const required = Array.isArray(params.required) ? params.required.filter((k): k is string => typeof k === "string") : [];
  const keys = [...new Set([...Object.keys(properties), ...required])];
  const defs = { ...(isObject(params.$defs) && { $defs: params.$defs }), ...(isObject(params.definitions) && { definitions: params.definitions }) };
  const args: ArgumentShape[] = [];
  for (const key of keys) {
    const path = `${tool.path}.properties.${key}`;
    const schema = Object.hasOwn(properties, key) ? (properties[key] as PlainJson) : true;
    const types: { type: ArgumentType; value: TextRule }[] = [];
    for (const [type, sub] of byType(schema, params)) {
      if (type === "string") types.push({ type, value: await rawString(sub, params, path, engine, unenforced) });
      else types.push({ type, value: { kind: "grammar", grammar: await compile(engine, { ...(isObject(sub) ? sub : {}), ...defs }, path) } });
    }
    if (types.length === 0 && required.includes(key)) throw refuse(path, "a required parameter no value can satisfy");
    if (types.length > 0) args.push({ key, types });
  }
  return { name: tool.name, arguments: args, required: new Set(required) };
}

/** XTML type of a JSON value or a schema type name. */
function xtmlType(t: string): ArgumentType | undefined {
  if (t === "integer") return "number";
  return (argumentTypes as readonly string[]).includes(t) ? (t as ArgumentType) : undefined;
}

function valueType(v: PlainJson): ArgumentType {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  return typeof v === "object" ? "object" : (typeof v as ArgumentType);
}

/** Follows `$ref`s at the top of a schema. */
function deref(schema: PlainJson, root: PlainJson): PlainJson {
  for (let i = 0; i < 32 && isObject(schema) && typeof schema.$ref === "string"; i++) {
    const { $ref, ...rest } = schema;
    const target = resolveRef($ref, root);
    if (target === undefined) break;
    schema = Object.keys(rest).length > 0 && isObject(target) ? { ...target, ...rest } : target;
  }
  return schema;
}

/**
 * The XTML types a parameter's value may take, each with the part of its schema for that type:
 * the argument's `type` attribute is written before its value, so the value follows only the
 * branches of that type.
 */
function byType(schema: PlainJson, root: PlainJson): Map<ArgumentType, PlainJson> {
  const out = new Map<ArgumentType, PlainJson>();
  const s = deref(schema, root);
  if (s === true || (isObject(s) && Object.keys(s).every((k) => ["title", "description", "default", "examples", "$comment"].includes(k)))) {
    for (const t of argumentTypes) out.set(t, { type: t });
    return out;
  }
  if (!isObject(s)) return out;
  const branches = s.anyOf ?? s.oneOf;
  if (Array.isArray(branches)) {
    const grouped = new Map<ArgumentType, PlainJson[]>();
    for (const branch of branches) for (const [t, sub] of byType(branch, root)) grouped.set(t, [...(grouped.get(t) ?? []), sub]);
    for (const [t, subs] of grouped) out.set(t, subs.length === 1 ? (subs[0] as PlainJson) : { anyOf: subs });
    return out;
  }
  if (s.const !== undefined) {
    out.set(valueType(s.const), s);
    return out;
  }
  if (Array.isArray(s.enum)) {
    for (const t of new Set(s.enum.map(valueType))) out.set(t, { ...s, enum: s.enum.filter((v) => valueType(v) === t) });
    return out;
  }
  const named = s.type === undefined ? argumentTypes : Array.isArray(s.type) ? s.type : [s.type];
  for (const name of named) {
    const t = typeof name === "string" ? xtmlType(name) : undefined;
    if (!t) continue;
    // integer and number share the XTML type; the schema keeps the stricter name the request gave.
    const schemaType = t === "number" && named.includes("number") ? "number" : name;
    out.set(t, { ...s, type: schemaType });
  }
  return out;
}

/** EBNF string literal. */
function literal(text: string): string {
  return `"${[...text].map((c) => {
    const code = c.codePointAt(0) as number;
    if (c === '"' || c === "\\") return `\\${c}`;
    if (code < 0x20 || code === 0x7f) return `\\x${code.toString(16).padStart(2, "0")}`;
    return c;
  }).join("")}"`;
}

/**
 * A string argument is written raw (chat.md 2.6.3): no quotes, no escapes. Its schema's
 * `enum`/`const` become literal alternatives and `minLength`/`maxLength` a repetition of any
 * character; `pattern` and `format` have no raw form here and are refused.
 */
async function rawString(schema: PlainJson, root: PlainJson, path: string, engine: GrammarEngine, unenforced: string[]): Promise<TextRule> {
  const s = deref(schema, root);
  if (!isObject(s)) return free;
  if (Array.isArray(s.anyOf)) {
    const rules = await Promise.all(s.anyOf.map((b) => rawString(b, root, path, engine, unenforced)));
    if (rules.some((r) => r.kind === "free")) return free;
    unenforced.push(`${path}.anyOf`);
    return free;
  }
  // A raw string has no quotes to hold a regular expression's grammar to: stated, not enforced.
  for (const keyword of ["pattern", "format"]) if (s[keyword] !== undefined) unenforced.push(`${path}.${keyword}`);
  let body: string | undefined;
  if (typeof s.const === "string") body = literal(s.const);
  else if (Array.isArray(s.enum)) body = s.enum.filter((v): v is string => typeof v === "string").map(literal).join(" | ");
  else if (typeof s.minLength === "number" || typeof s.maxLength === "number") {
    const min = typeof s.minLength === "number" ? s.minLength : 0;
    const max = typeof s.maxLength === "number" ? String(s.maxLength) : "";
    body = `[^]{${min},${max}}`;
  }
  if (body === undefined) return free;
  try {
    return { kind: "grammar", grammar: await engine.ebnf(`root ::= ${body}`) };
  } catch (error) {
    throw refuse(path, `the raw string rule cannot be compiled: ${grammarErrorText(error)}`);
  }
}
