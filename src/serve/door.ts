/**
 * A door: one HTTP API's shapes around the one chat request (DESIGN.md "many doors, one
 * request"). A door reads its body into a ChatRequest (the chat reader checks every range and
 * rule), and writes the one Completion back as its reply body or its stream events. Admission,
 * the queue, the context rule, batching, reuse and the constraint are the server's, below every
 * door (http.ts chatDoor).
 */
import type { ChatRequest } from "../chat/request-types.ts";
import type { PrefillProgress } from "../session/conversation.ts";
import type { Tokenizer } from "../tokenizer/index.ts";
import type { Completion, CompletionEvents, PreparedCompletion } from "./chat-completion.ts";
import type { ApiError } from "./errors.ts";

/** What every reply names: its id, when it was made, the model. */
export interface ReplyHead {
  id: string;
  created: number;
  model: string;
}

/** One event on the wire: `data` as JSON, with an SSE `event:` name when the API uses them. */
export type SendEvent = (data: unknown, event?: string) => void;

export interface DoorStream {
  /** The prompt going in (after the queue). */
  prefill?(progress: PrefillProgress): void;
  delta: CompletionEvents["onDelta"];
  choiceEnd?: CompletionEvents["onChoiceEnd"];
  /** The completion has ended: the closing events. */
  end(completion: Completion): void;
}

export interface Door {
  /** The reply id's prefix (`chatcmpl-`, `msg_`, `resp_`). */
  readonly idPrefix: string;
  /** The stream ends with `data: [DONE]` (OpenAI chat and completions). */
  readonly doneLine: boolean;
  /** A reply length beyond the context's room is cut to the room, not refused. */
  readonly clampMaxTokens: boolean;
  parse(bytes: Uint8Array): ChatRequest;
  body(head: ReplyHead, prepared: PreparedCompletion, completion: Completion, tokenizer: Tokenizer): unknown;
  stream(head: ReplyHead, prepared: PreparedCompletion, send: SendEvent, tokenizer: Tokenizer): DoorStream;
  /** An error after the stream began, as this API's last event. */
  streamError(error: ApiError, send: SendEvent): void;
}

/** A fresh reply id: the prefix and 32 hex digits. */
export const replyId = (prefix: string) => `${prefix}${crypto.randomUUID().replaceAll("-", "")}`;
