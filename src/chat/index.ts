/**
 * Chat requests to Kimi K3 prompts (chat.md 2 and 4.2): `parseChatRequest` validates an OpenAI
 * chat-completions body, `renderChat` renders it to XTML segments and prompt ids.
 */
export { JsonSyntaxError, parseJson, type JsonParseOptions } from "./json-parse.ts";
export { dumpsCompact, dumpsDefault, pythonFloat } from "./json-text.ts";
export { JsonNumber, type JsonValue } from "./json-value.ts";
export { CHANNEL_OPENER_IDS, renderChat, renderSegments, type RenderedChat, type RenderedSegments } from "./render.ts";
export { MAX_REQUEST_BYTES, parseChatRequest, type ParseOptions } from "./request.ts";
export type { ChatMessage, ChatRequest, Effort, ResponseFormat, Sampling, ToolChoice } from "./request-types.ts";
export { controlIds, controlNames, stopIds, type ControlIds } from "./specials.ts";
export type { Segment } from "./xtml.ts";
