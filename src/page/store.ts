/**
 * Conversations and settings in the browser's localStorage, one JSON value under one key. What
 * cannot be read back is set aside under another key rather than overwritten, and the page says
 * so. The API key never goes here (sessionStorage only, see app.ts).
 */
import { defaultSettings, type ChatSettings, type Effort } from "./api.ts";
import { parseConversation, type Message } from "./messages.ts";

/** What the page shows under an assistant message besides the message itself. */
export interface Note {
  stats?: string;
  stopped?: boolean;
  error?: string;
  /** Saved while the reply streamed: if it is still set when read back, the page was left mid-reply. */
  partial?: boolean;
}

export interface Conversation {
  id: string;
  updated: number;
  messages: Message[];
  /** By message index. */
  notes: Record<number, Note>;
}

export interface Saved {
  version: 1;
  current: string;
  conversations: Conversation[];
  settings: ChatSettings;
}

export const storageKey = "k3.chat.v1";
export const setAsidePrefix = "k3.chat.unreadable.";

/** Not crypto.randomUUID: a page opened over plain http from another machine is not a secure context. */
const newId = () => `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;

export const newConversation = (): Conversation => ({ id: newId(), updated: Date.now(), messages: [], notes: {} });

function settingsOf(value: unknown): ChatSettings {
  const s = (typeof value === "object" && value !== null ? value : {}) as Partial<Record<keyof ChatSettings, unknown>>;
  const number = (v: unknown, fallback: number | undefined) => (typeof v === "number" && Number.isFinite(v) ? v : fallback);
  const efforts: readonly Effort[] = ["low", "high", "max"];
  return {
    thinking: typeof s.thinking === "boolean" ? s.thinking : defaultSettings.thinking,
    effort: efforts.includes(s.effort as Effort) ? (s.effort as Effort) : defaultSettings.effort,
    temperature: number(s.temperature, defaultSettings.temperature) as number,
    topP: number(s.topP, defaultSettings.topP) as number,
    maxTokens: number(s.maxTokens, undefined),
    seed: number(s.seed, undefined),
  };
}

function fresh(settings: ChatSettings = defaultSettings): Saved {
  const first = newConversation();
  return { version: 1, current: first.id, conversations: [first], settings };
}

/** The saved state, or a fresh one; `problem` says why the saved one could not be used. */
export function load(storage: Storage): { saved: Saved; problem?: string } {
  const text = storage.getItem(storageKey);
  if (text === null) return { saved: fresh() };
  try {
    const value = JSON.parse(text) as Partial<Saved>;
    if (value.version !== 1 || !Array.isArray(value.conversations)) throw new Error("an unknown format");
    const conversations = value.conversations.map((c): Conversation => ({
      id: typeof c.id === "string" ? c.id : newId(),
      updated: typeof c.updated === "number" ? c.updated : 0,
      // The same checks as an import: stored text is not trusted more than a file.
      messages: parseConversation(JSON.stringify(c.messages ?? [])),
      notes: typeof c.notes === "object" && c.notes !== null ? c.notes : {},
    }));
    if (conversations.length === 0) return { saved: fresh(settingsOf(value.settings)) };
    const current = conversations.some((c) => c.id === value.current) ? (value.current as string) : (conversations[0] as Conversation).id;
    return { saved: { version: 1, current, conversations, settings: settingsOf(value.settings) } };
  } catch (error) {
    const aside = `${setAsidePrefix}${Date.now()}`;
    storage.setItem(aside, text);
    return { saved: fresh(), problem: `the saved conversations could not be read (${error instanceof Error ? error.message : String(error)}); they were kept under localStorage '${aside}'` };
  }
}

/** Writes the state; a full storage is reported, not thrown. */
export function save(storage: Storage, saved: Saved): string | undefined {
  try {
    storage.setItem(storageKey, JSON.stringify(saved));
    return undefined;
  } catch (error) {
    return `the conversation could not be saved in this browser (${error instanceof Error ? error.name : String(error)}); export it to keep it`;
  }
}
