/**
 * Tool declarations, `tool_choice` and `response_format` (chat.md 4.2 and 2.6.6-2.6.7). The
 * refusals are the ones the Kimi Vendor Verifier expects as 400s; what passes is rendered exactly
 * as sent (extra fields such as `strict` included), deep-sorted at render time.
 */
import { Fields, itemFields, quote, refuse, typeName } from "./fields.ts";
import { isJsonObject, type JsonArray } from "./json-value.ts";
import type { ResponseFormat, ToolChoice } from "./request-types.ts";

export const MAX_TOOL_NAME_CHARS = 256;

/** Every declared tool name, with the path that declared it: names are unique across declarations. */
export type DeclaredNames = Map<string, string>;

/** Validates one `tools` array (request level or a system message's) and records its names. */
export function checkTools(tools: JsonArray, path: string, declared: DeclaredNames): JsonArray {
  for (let i = 0; i < tools.length; i++) {
    const tool = itemFields(tools, i, path, "a tool");
    const type = tool.value("type");
    if (type === undefined) throw refuse(tool.at("type"), 'missing (every tool is {"type": "function", "function": {...}})');
    if (type !== "function") throw refuse(tool.at("type"), `${typeof type === "string" ? quote(type) : typeName(type)} is not "function"`);
    const fn = tool.object("function");
    if (fn === undefined) throw refuse(tool.at("function"), "missing (the function's name, description and parameters)");
    const namePath = fn.at("name");
    const name = fn.requiredString("name", "every function needs a name");
    checkToolName(name, namePath);
    const earlier = declared.get(name);
    if (earlier !== undefined) throw refuse(namePath, `${quote(name)} is declared twice (also at ${earlier})`);
    declared.set(name, namePath);
    fn.string("description");
    fn.object("parameters");
    fn.boolean("strict");
  }
  return tools;
}

/**
 * Names the model can call: a letter or `_` first, then letters, digits and `_ . : -`, at most
 * 256 characters. KVV refuses a leading digit, `@`, empty and 257+ characters; the punctuation
 * kept is what namespaced tool names use.
 */
function checkToolName(name: string, path: string): void {
  if (name.length === 0) throw refuse(path, "is empty");
  const length = Array.from(name).length;
  if (length > MAX_TOOL_NAME_CHARS) throw refuse(path, `is ${length} characters long (at most ${MAX_TOOL_NAME_CHARS})`);
  if (/^[0-9]/.test(name)) throw refuse(path, `${quote(name)} starts with a digit (a tool name starts with a letter or _)`);
  const bad = Array.from(name).find((c) => !/^[A-Za-z0-9_.:-]$/.test(c));
  if (bad !== undefined) throw refuse(path, `${quote(name)} contains ${quote(bad)} (allowed: letters, digits and _ . : -)`);
  if (!/^[A-Za-z_]/.test(name)) throw refuse(path, `${quote(name)} must start with a letter or _`);
}

/** `tool_choice`; `required` needs a tool to call, declared in the request or in a system message. */
export function parseToolChoice(body: Fields, toolCount: number): ToolChoice {
  const path = body.at("tool_choice");
  const value = body.value("tool_choice");
  if (value === undefined) return "auto";
  if (typeof value === "string") {
    if (value !== "auto" && value !== "none" && value !== "required") {
      throw refuse(path, `${quote(value)} is not one of "auto", "none", "required" (or {"type": "function", "function": {"name": ...}})`);
    }
    if (value === "required" && toolCount === 0) throw refuse(path, '"required" but the request declares no tools');
    return value;
  }
  if (!isJsonObject(value)) throw refuse(path, `expected a string or an object, got ${typeName(value)}`);
  const choice = new Fields(value, path);
  if (choice.value("type") !== "function") throw refuse(choice.at("type"), 'the object form is {"type": "function", "function": {"name": ...}}');
  const fn = choice.object("function");
  if (fn === undefined) throw refuse(choice.at("function"), "missing (the function to call)");
  return { function: fn.requiredString("name", "the function to call") };
}

export function parseResponseFormat(body: Fields): ResponseFormat {
  const format = body.object("response_format");
  if (format === undefined) return { type: "text" };
  const type = format.requiredString("type", '"text", "json_object" or "json_schema"');
  if (type === "text" || type === "json_object") return { type };
  if (type !== "json_schema") throw refuse(format.at("type"), `${quote(type)} is not one of "text", "json_object", "json_schema"`);
  const spec = format.object("json_schema");
  if (spec === undefined) throw refuse(format.at("json_schema"), 'missing (type "json_schema" needs {"name": ..., "schema": {...}})');
  const name = spec.requiredString("name", "the schema's name");
  if (name.length === 0) throw refuse(spec.at("name"), "is empty");
  const schema = spec.value("schema");
  if (schema === undefined) throw refuse(spec.at("schema"), "missing (the JSON schema the reply must match)");
  if (!isJsonObject(schema)) throw refuse(spec.at("schema"), `expected an object, got ${typeName(schema)}`);
  return { type, name, schema, strict: spec.boolean("strict") };
}
