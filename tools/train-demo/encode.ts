/**
 * Documents to ids with k3's own code, so the training ids are exactly what k3 feeds at run time.
 *
 * Raw text: `tokenizer.encode(text, { ordinary: true })`, then `[EOS]`.
 *
 * A chat: the conversation without its last assistant message, through k3's request reader
 * (`parseChatRequest`, validated as the server validates it) and renderer (`renderChat`): the
 * prompt ids, generation prompt included, exactly as served. Then the ideal reply in its trained
 * shape (chat.md 2.8): the last assistant message rendered by the renderer's own section writer
 * (`assistantMessage` + `encodeSegments`) without its leading generation prompt. Checked two
 * ways: the reply must start right after the generation prompt, and prompt ++ reply must equal
 * the history form of the whole conversation (`renderChat(full).ids[0, historyEnd)`).
 */
import { encodeSegments } from "../../src/chat/encode.ts";
import { parseChatRequest } from "../../src/chat/request.ts";
import type { AssistantMessage, ChatRequest } from "../../src/chat/request-types.ts";
import { renderChat, renderSegments } from "../../src/chat/render.ts";
import { assistantMessage } from "../../src/chat/sections.ts";
import { controlIds } from "../../src/chat/specials.ts";
import { openTag, type Segment } from "../../src/chat/xtml.ts";
import type { Tokenizer } from "../../src/tokenizer/tokenizer.ts";
import type { ChatBody } from "./chats.ts";

export function parseBody(body: ChatBody, what: string): ChatRequest {
  return parseChatRequest(JSON.parse(JSON.stringify(body)) as unknown, { source: what });
}

/** The text segments the model sees for a whole conversation (history form), for BPE training. */
export function chatTextSegments(body: ChatBody): { texts: string[]; controls: number } {
  const { segments, historyEnd } = renderSegments(parseBody(body, "chat"));
  const texts: string[] = [];
  let controls = 0;
  for (const segment of segments.slice(0, historyEnd)) {
    if (segment.kind === "text") texts.push(segment.text);
    else controls++;
  }
  return { texts, controls };
}

function sameIds(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export interface EncodedChat {
  readonly ids: number[];
  /** Ids before the reply (the served prompt, generation prompt included). */
  readonly promptLength: number;
}

export function encodeChat(body: ChatBody, tokenizer: Tokenizer, what: string): EncodedChat {
  const last = body.messages.at(-1);
  if (last === undefined || last.role !== "assistant") throw new Error(`${what}: a chat document must end with an assistant message`);
  const promptRequest = parseBody({ ...body, messages: body.messages.slice(0, -1) }, what);
  const fullRequest = parseBody(body, what);
  const promptIds = renderChat(promptRequest, tokenizer).ids;
  const full = renderChat(fullRequest, tokenizer);
  const history = full.ids.slice(0, full.historyEnd);

  // The reply from the renderer's own assistant section, minus the generation prompt.
  const message = fullRequest.messages.at(-1) as AssistantMessage;
  const section: Segment[] = [];
  assistantMessage(section, message, fullRequest.thinking);
  const sectionIds = encodeSegments(section, tokenizer).ids;
  const generationPrompt = encodeSegments([...openTag("message", [["role", "assistant"]]), ...openTag(fullRequest.thinking ? "think" : "response")], tokenizer).ids;
  if (!sameIds(sectionIds.slice(0, generationPrompt.length), generationPrompt)) {
    throw new Error(`${what}: the assistant section does not start with the generation prompt`);
  }
  if (!sameIds(promptIds.slice(promptIds.length - generationPrompt.length), generationPrompt)) {
    throw new Error(`${what}: the served prompt does not end with the generation prompt`);
  }
  const reply = sectionIds.slice(generationPrompt.length);
  const ids = [...promptIds, ...reply];
  if (!sameIds(ids, history)) throw new Error(`${what}: prompt ++ reply differs from the rendered history of the whole conversation`);
  const controls = controlIds(tokenizer);
  if (reply.at(-1) !== controls.endOfMessage) throw new Error(`${what}: the reply does not end with <|end_of_msg|>`);
  return { ids, promptLength: promptIds.length };
}

export function encodeText(text: string, tokenizer: Tokenizer): number[] {
  const eos = controlIds(tokenizer).eos;
  return [...tokenizer.encode(text, { ordinary: true }), eos];
}
