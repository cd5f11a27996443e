/**
 * The held-out prompts as the ids k3 feeds for them, for make_fixtures.py (torch has no tokenizer):
 * a text prompt as `k3 demo --prompt` encodes it, a chat request as `k3 serve` renders it.
 *
 *   bun tools/train-demo/prompt-ids.ts [--dir DIR] [--tok assets/demo]
 *
 * Reads DIR/heldout-prompts.json, writes DIR/heldout-prompt-ids.json:
 * `{ "text": [{ "text", "ids" }], "chat": [{ "request", "ids" }] }`.
 */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { renderChat } from "../../src/chat/render.ts";
import { writeAtomically } from "../../src/fs.ts";
import { loadTokenizer } from "../../src/tokenizer/load.ts";
import type { ChatBody } from "./chats.ts";
import { parseBody } from "./encode.ts";

function flag(name: string, fallback: string): string {
  const i = process.argv.indexOf(name);
  return i >= 0 && process.argv[i + 1] ? (process.argv[i + 1] as string) : fallback;
}

const dir = flag("--dir", process.env.K3_TRAIN_DIR || "/var/tmp/k3-train-demo");
const tokenizer = loadTokenizer(flag("--tok", resolve(import.meta.dir, "../../assets/demo")));
const prompts = JSON.parse(readFileSync(join(dir, "heldout-prompts.json"), "utf8")) as { text_prompts: string[]; chat_requests: ChatBody[] };
const out = {
  text: prompts.text_prompts.map((text) => ({ text, ids: tokenizer.encode(text) })),
  chat: prompts.chat_requests.map((request, i) => ({ request, ids: renderChat(parseBody(request, `chat request ${i}`), tokenizer).ids })),
};
writeAtomically(join(dir, "heldout-prompt-ids.json"), `${JSON.stringify(out)}\n`, "the held-out prompt ids");
console.error(`${out.text.length} text prompts, ${out.chat.length} chat requests -> ${join(dir, "heldout-prompt-ids.json")}`);
