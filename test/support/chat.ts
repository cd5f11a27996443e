/**
 * The chat tests' tokenizers and helpers: the synthetic chat tokenizer committed in
 * test/fixtures/chat-tokenizer (always present) and the released Kimi table when it is found
 * (`K3_KIMI_TOKENIZER`, else `K3_TOK_FILES`, else ../shared/kimi-tokenizer; never copied here).
 */
import { expect } from "bun:test";
import { parseChatRequest, renderChat, type ParseOptions, type RenderedChat } from "../../src/chat/index.ts";
import { K3Error } from "../../src/errors.ts";
import { loadTokenizer, type Tokenizer } from "../../src/tokenizer/index.ts";
import { CHAT_FIXTURE_DIR } from "../../tools/chat-fixture/tokenizer.ts";
import { KIMI_DIR } from "../fixtures/tokenizer/support.ts";

export { KIMI_DIR };
export const CHAT_TOK_DIR = CHAT_FIXTURE_DIR;
export const chatTok: Tokenizer = loadTokenizer(CHAT_TOK_DIR);
export const kimiTok: Tokenizer | undefined = KIMI_DIR === undefined ? undefined : loadTokenizer(KIMI_DIR);
/** Title suffix of tests that need the released table, so a skip says why. */
export const WITH_KIMI = KIMI_DIR === undefined ? " [SKIPPED: released Kimi table absent]" : " (released Kimi table)";

/** Renders a request given as data (sent as JSON text, so lexemes are those JSON.stringify writes) or as text. */
export function render(request: unknown, tokenizer: Tokenizer = chatTok, options?: ParseOptions): RenderedChat {
  return renderChat(parseChatRequest(typeof request === "string" ? request : JSON.stringify(request), options), tokenizer);
}

/** The one-line message of the usage error (exit 2) rendering `request` raises. */
export function refusal(request: unknown, options?: ParseOptions): string {
  try {
    render(request, chatTok, options);
  } catch (error) {
    if (!(error instanceof K3Error)) throw error;
    expect(error.exitCode).toBe(2);
    expect(error.message).not.toContain("\n");
    return error.message;
  }
  throw new Error(`rendered, but a refusal was expected: ${typeof request === "string" ? request : JSON.stringify(request)}`);
}
