/**
 * The one rule of a generation request against the context: the prompt's ids and the reply's
 * fit the sequence's positions (prompt + max tokens <= capacity), and an unstated reply length
 * is the default, cut to the room left. The server's two endpoints and `k3 chat` all ask here;
 * each names the fields as its users write them.
 */
import { fieldError } from "../errors.ts";

export interface ReplyRoomRequest {
  promptIds: number;
  /** The reply length asked for; undefined takes `defaultMaxTokens`, cut to the room. */
  maxTokens: number | undefined;
  defaultMaxTokens: number;
  /** Positions the sequence holds. */
  capacity: number;
  /** How the refusal names the prompt and the reply length (`messages`, `max_tokens`; `--max-tokens`). */
  promptField: string;
  maxTokensField: string;
  /** What the user can do about it, appended to the message. */
  hint?: string;
  /**
   * A stated length beyond the room is cut to it instead of refused: the agent APIs' clients
   * send their model's largest reply (Claude Code: 32,000) whatever the context (chat.md 4.9).
   */
  clamp?: boolean;
}

/** The reply's length in ids, or a refusal naming the field that does not fit. */
export function fitReply(r: ReplyRoomRequest): number {
  const room = r.capacity - r.promptIds;
  const hint = r.hint ? ` (${r.hint})` : "";
  if (room < 1) throw fieldError(r.promptField, `the prompt has ${r.promptIds} ids; the context holds ${r.capacity}${hint}`, "context_length_exceeded");
  const maxTokens = r.maxTokens === undefined ? Math.min(r.defaultMaxTokens, room) : r.clamp ? Math.min(r.maxTokens, room) : r.maxTokens;
  if (maxTokens > room) {
    throw fieldError(r.maxTokensField, `${maxTokens} more ids do not fit: the prompt takes ${r.promptIds} of the ${r.capacity} positions the context holds${hint}`, "context_length_exceeded");
  }
  return maxTokens;
}
