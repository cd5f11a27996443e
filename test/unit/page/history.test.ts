/** The page's way on when a conversation outgrows the context (src/page/history.ts): drop the oldest turn, whole. */
import { describe, expect, test } from "bun:test";
import { dropOldestTurn } from "../../../src/page/history.ts";
import type { Message } from "../../../src/page/messages.ts";

const sys: Message = { role: "system", content: "Be brief." };
const u = (content: string): Message => ({ role: "user", content });
const a = (content: string): Message => ({ role: "assistant", content, reasoning_content: `thought about ${content}` });
const call: Message = { role: "assistant", content: null, reasoning_content: "r", tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }] };
const result: Message = { role: "tool", tool_call_id: "c1", content: "42" } as Message;

describe("dropping the oldest turn", () => {
  test("the first user message and everything up to the next one go; system messages and later reasoning stay; notes move", () => {
    const messages = [sys, u("one"), call, result, a("one"), u("two"), a("two"), u("three")];
    const notes = { 4: "n4", 6: "n6", 7: "n7" };
    const t = dropOldestTurn(messages, notes);
    expect(t.dropped).toBe(4);
    expect(t.messages).toEqual([sys, u("two"), a("two"), u("three")]);
    expect(t.notes).toEqual({ 2: "n6", 3: "n7" });
    expect(dropOldestTurn(t.messages, t.notes).messages).toEqual([sys, u("three")]);
  });

  test("with a message waiting to be sent, the last turn here may go too", () => {
    const t = dropOldestTurn([sys, u("one"), a("one")], { 2: "n2" }, true);
    expect([t.dropped, t.messages, t.notes]).toEqual([2, [sys], {}]);
    expect(dropOldestTurn([sys], {}, true).dropped).toBe(0);
  });

  test("with one turn left (or none) there is nothing to drop", () => {
    for (const messages of [[], [sys], [u("only")], [sys, u("only"), a("reply")]]) {
      const t = dropOldestTurn(messages, { 1: "n" });
      expect([t.dropped, t.messages, t.notes]).toEqual([0, messages, { 1: "n" }]);
    }
  });
});
