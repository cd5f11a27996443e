/**
 * A conversation as OpenAI messages, the form the API takes and `k3 chat` writes with /save:
 * what this page sends, stores, exports and imports. An imported file is checked here, field by
 * field, before anything of it is shown or sent; the server checks the rest when it is sent.
 */

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type Role = "system" | "user" | "assistant" | "tool";

export interface Message {
  role: Role;
  /** Null for an assistant message that only thought or only called tools. */
  content: string | null;
  /** An assistant's reasoning, sent back in later turns (K3 expects it). */
  reasoning_content?: string | null;
  tool_calls?: ToolCall[];
  /** A tool result's call id. */
  tool_call_id?: string;
  name?: string;
}

const roles: readonly Role[] = ["system", "user", "assistant", "tool"];

/** The largest file an import reads; far above any conversation that fits a context. */
export const maxImportBytes = 16 * 1024 * 1024;

export class ImportError extends Error {}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** String content, or the text parts of content given as parts (images are not k3's). */
function contentOf(value: unknown, where: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    return value.map((part, i) => {
      if (!isObject(part) || part.type !== "text" || typeof part.text !== "string") {
        throw new ImportError(`${where}.content[${i}]: expected a {"type":"text","text":"..."} part`);
      }
      return part.text;
    }).join("");
  }
  throw new ImportError(`${where}.content: expected a string, null or text parts`);
}

function toolCallsOf(value: unknown, where: string): ToolCall[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw new ImportError(`${where}.tool_calls: expected an array`);
  return value.map((call, i) => {
    const at = `${where}.tool_calls[${i}]`;
    if (!isObject(call) || !isObject(call.function)) throw new ImportError(`${at}: expected {"id","type":"function","function":{"name","arguments"}}`);
    const { name, arguments: args } = call.function;
    if (typeof name !== "string" || name === "") throw new ImportError(`${at}.function.name: expected a non-empty string`);
    if (typeof args !== "string") throw new ImportError(`${at}.function.arguments: expected a string (JSON text)`);
    return { id: typeof call.id === "string" ? call.id : `call_${i}`, type: "function", function: { name, arguments: args } };
  });
}

function messageOf(value: unknown, i: number): Message {
  const where = `messages[${i}]`;
  if (!isObject(value)) throw new ImportError(`${where}: expected an object`);
  const role = value.role;
  if (typeof role !== "string" || !(roles as readonly string[]).includes(role)) {
    throw new ImportError(`${where}.role: expected one of ${roles.join(", ")}`);
  }
  const message: Message = { role: role as Role, content: contentOf(value.content, where) };
  if (role === "assistant") {
    const reasoning = "reasoning_content" in value ? value.reasoning_content : value.reasoning;
    if (reasoning !== undefined && reasoning !== null && typeof reasoning !== "string") throw new ImportError(`${where}.reasoning_content: expected a string or null`);
    // Kept as given, null included, so that an export reads back exactly as it was written.
    if (typeof reasoning === "string" || reasoning === null) message.reasoning_content = reasoning;
    const calls = toolCallsOf(value.tool_calls, where);
    if (calls) message.tool_calls = calls;
  } else if (message.content === null) {
    throw new ImportError(`${where}.content: a ${role} message needs content`);
  }
  if (role === "tool") {
    if (typeof value.tool_call_id === "string") message.tool_call_id = value.tool_call_id;
  }
  if (typeof value.name === "string") message.name = value.name;
  return message;
}

/**
 * An exported conversation: a JSON array of messages (what `k3 chat` /save writes), or a chat
 * request object with a `messages` array.
 */
export function parseConversation(text: string): Message[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ImportError("not valid JSON");
  }
  const list = Array.isArray(parsed) ? parsed : isObject(parsed) && Array.isArray(parsed.messages) ? parsed.messages : undefined;
  if (!list) throw new ImportError('expected a JSON array of messages (or an object with a "messages" array)');
  return list.map(messageOf);
}

/** The file an export writes: the messages, indented, as `k3 chat` /load reads them. */
export function exportConversation(messages: readonly Message[]): string {
  return `${JSON.stringify(messages, null, 2)}\n`;
}

/** A short title for the conversation list: the first user message's first line. */
export function titleOf(messages: readonly Message[]): string {
  const first = messages.find((m) => m.role === "user")?.content ?? "";
  const line = first.trim().split("\n")[0] ?? "";
  return line === "" ? "New chat" : line.length > 48 ? `${line.slice(0, 47)}…` : line;
}
