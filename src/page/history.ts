/**
 * Making room in a conversation that no longer fits the server's context: the oldest turn (a
 * user message and every message after it up to the next user message: the reply, its tool
 * calls and their results) goes, whole, so what remains is still a well-formed conversation;
 * system messages stay. The messages kept are sent as they are, earlier reasoning included
 * (Kimi K3 expects its reasoning back, chat.md 2.9). Notes keyed by message index move with
 * their messages.
 */
import type { Message } from "./messages.ts";

export interface Trimmed<N> {
  messages: Message[];
  notes: Record<number, N>;
  /** Messages dropped; 0 when there is no earlier turn to drop (only the newest one is left). */
  dropped: number;
}

/**
 * `pending`: a user message is waiting to be sent after these (the one the context refused), so
 * the last turn here is not the newest and may go too.
 */
export function dropOldestTurn<N>(messages: readonly Message[], notes: Readonly<Record<number, N>>, pending = false): Trimmed<N> {
  const first = messages.findIndex((m) => m.role === "user");
  const later = first < 0 ? -1 : messages.findIndex((m, i) => i > first && m.role === "user");
  const next = later < 0 && first >= 0 && pending ? messages.length : later;
  if (next < 0) return { messages: [...messages], notes: { ...notes }, dropped: 0 };
  const dropped = next - first;
  const moved: Record<number, N> = {};
  for (const [key, note] of Object.entries(notes)) {
    const at = Number(key);
    if (at < first) moved[at] = note;
    else if (at >= next) moved[at - dropped] = note;
  }
  return { messages: [...messages.slice(0, first), ...messages.slice(next)], notes: moved, dropped };
}
