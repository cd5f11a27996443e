/**
 * `renderChat`: a validated request to the prompt ids the model was trained on (chat.md 2.3),
 * in this order: the request's tool declarations, the thinking-effort note, every conversation
 * message, then the request-specific tail (tool-choice note, response-format note, generation
 * prompt).
 *
 * The tail is where consecutive requests of one conversation differ (chat.md 5.4): the next
 * request re-renders the same history but not this tail. `historyEnd` marks the boundary: the
 * index in `ids` just after the last conversation message's `<|end_of_msg|>`, where the tail
 * begins. `ids[0..historyEnd)` is the prefix a multi-turn snapshot is taken at (chat.md 5.5
 * item 2a); with no notes the whole prompt is usually a prefix too (the next turn's history
 * assistant message starts with the same generation prompt), which exact-prefix matching finds
 * by itself.
 */
import type { Tokenizer } from "../tokenizer/index.ts";
import { encodeSegments } from "./encode.ts";
import { dynamicToolsBody, effortBody, responseFormatBody, toolChoiceBody, toolDeclareBody } from "./notes.ts";
import type { ChatRequest } from "./request-types.ts";
import { assistantMessage, systemNote, textMessage, toolResult } from "./sections.ts";
import { resolveToolResults } from "./tool-results.ts";
import { openTag, segmentText, type Segment } from "./xtml.ts";
import { fieldError } from "../errors.ts";

/** `<|open|>think<|sep|>` or `<|open|>response<|sep|>`: not counted in `prompt_tokens` (chat.md 4.6). */
export const CHANNEL_OPENER_IDS = 3;

export interface RenderedSegments {
  readonly segments: Segment[];
  /** Index in `segments` where the request-specific tail begins (see the file comment). */
  readonly historyEnd: number;
  /**
   * Index in `segments` after the leading system part (tool declarations, the effort note, the
   * system messages before the first other message): the prefix every session of an agent
   * shares, where the prompt cache keeps a state.
   */
  readonly systemEnd: number;
  /** Indices in `segments` after the messages a client marked for caching (ChatRequest.cacheBreaks). */
  readonly cacheBreaks: readonly number[];
}

export interface RenderedChat {
  /** The prompt the model is fed, all of it. */
  readonly ids: number[];
  readonly segments: Segment[];
  /** The segments' text joined: for logs and golden files, not an encoder input. */
  readonly text: string;
  /** `usage.prompt_tokens`, Moonshot's convention: `ids.length` minus the 3-id channel opener. */
  readonly promptTokens: number;
  /** Index in `ids` where the tail after the last conversation message begins. */
  readonly historyEnd: number;
  /** Index in `ids` after the leading system part (RenderedSegments.systemEnd). */
  readonly systemEnd: number;
  /** Indices in `ids` after the messages a client marked for caching. */
  readonly cacheBreaks: readonly number[];
}

export function renderSegments(request: ChatRequest): RenderedSegments {
  const out: Segment[] = [];
  if (request.tools.length > 0) systemNote(out, "tool-declare", toolDeclareBody(request.tools));
  if (request.thinking) systemNote(out, "thinking-effort", effortBody(request.effort));
  let systemEnd = out.length;
  let leading = true;
  const marked = new Set(request.cacheBreaks ?? []);
  const cacheBreaks: number[] = [];
  for (const message of resolveToolResults(request.messages)) {
    if (leading && message.kind !== "system" && message.kind !== "tools") {
      leading = false;
      systemEnd = out.length;
    }
    switch (message.kind) {
      case "system":
      case "user":
        textMessage(out, message.kind, message.name, message.content);
        break;
      case "tools":
        systemNote(out, "tool-declare", dynamicToolsBody(message.tools));
        break;
      case "assistant":
        assistantMessage(out, message, request.thinking);
        break;
      case "toolResult":
        toolResult(out, message);
    }
    if (marked.has(message.kind === "toolResult" ? message.message.at : message.at)) cacheBreaks.push(out.length);
  }
  const historyEnd = out.length;
  if (leading) systemEnd = historyEnd;
  const choice = request.toolChoice;
  if (choice === "required" || choice === "none") systemNote(out, "tool-choice", toolChoiceBody(choice));
  const format = responseFormatBody(request.responseFormat);
  if (format !== undefined) systemNote(out, "response-format", format);
  out.push(...openTag("message", [["role", "assistant"]]), ...openTag(request.thinking ? "think" : "response"));
  return { segments: out, historyEnd, systemEnd, cacheBreaks };
}

/**
 * Renders and encodes the request. With `maxIds` (a server's context), a text too long to fit
 * it even at the most bytes an id can hold is refused before it is encoded, so a request's
 * encoding work is bounded by the context, not by the body's size.
 */
export function renderChat(request: ChatRequest, tokenizer: Tokenizer, maxIds?: number): RenderedChat {
  const { segments, historyEnd, systemEnd, cacheBreaks } = renderSegments(request);
  if (maxIds !== undefined) checkTextFits(segments.reduce((sum, s) => sum + (s.kind === "text" ? Buffer.byteLength(s.text) : 0), 0), maxIds, tokenizer, "messages");
  const { ids, starts } = encodeSegments(segments, tokenizer);
  return {
    ids,
    segments,
    text: segmentText(segments),
    promptTokens: ids.length - CHANNEL_OPENER_IDS,
    historyEnd: starts[historyEnd] as number,
    systemEnd: starts[systemEnd] as number,
    cacheBreaks: cacheBreaks.map((i) => starts[i] as number),
  };
}

/** Refuses a text of `bytes` that cannot encode to `maxIds` ids or fewer, naming `field`. */
export function checkTextFits(bytes: number, maxIds: number, tokenizer: Tokenizer, field: string): void {
  const fewest = Math.ceil(bytes / tokenizer.maxTokenBytes);
  if (fewest > maxIds) {
    throw fieldError(field, `${bytes} bytes of text are at least ${fewest} ids, more than the ${maxIds} positions the context holds`, "context_length_exceeded");
  }
}
