/** The one context rule of a generation request (src/decode/reply-room.ts), at its edges. */
import { describe, expect, test } from "bun:test";
import { fitReply } from "../../../src/decode/reply-room.ts";
import { K3Error } from "../../../src/errors.ts";

const api = { promptField: "messages", maxTokensField: "max_tokens" };
const refusal = (f: () => unknown): { field: string | undefined; message: string } => {
  try {
    f();
  } catch (error) {
    if (error instanceof K3Error) return { field: error.field, message: error.message };
    throw error;
  }
  throw new Error("not refused");
};

describe("fitReply", () => {
  test("prompt + max tokens may fill the context, not pass it", () => {
    expect(fitReply({ ...api, promptIds: 10, maxTokens: 6, defaultMaxTokens: 100, capacity: 16 })).toBe(6);
    expect(refusal(() => fitReply({ ...api, promptIds: 10, maxTokens: 7, defaultMaxTokens: 100, capacity: 16 }))).toEqual({
      field: "max_tokens", message: "max_tokens: 7 more ids do not fit: the prompt takes 10 of the 16 positions the context holds",
    });
  });

  test("an unstated length is the default cut to the room; a prompt that fills the context is refused by its own field", () => {
    expect(fitReply({ ...api, promptIds: 10, maxTokens: undefined, defaultMaxTokens: 100, capacity: 16 })).toBe(6);
    expect(fitReply({ ...api, promptIds: 10, maxTokens: undefined, defaultMaxTokens: 3, capacity: 16 })).toBe(3);
    expect(refusal(() => fitReply({ ...api, promptIds: 16, maxTokens: undefined, defaultMaxTokens: 3, capacity: 16 }))).toEqual({
      field: "messages", message: "messages: the prompt has 16 ids; the context holds 16",
    });
  });

  test("k3 chat's names and hint", () => {
    const r = refusal(() => fitReply({ promptIds: 9, maxTokens: 10, defaultMaxTokens: 10, capacity: 16, promptField: "--ctx", maxTokensField: "--max-tokens", hint: "raise --ctx" }));
    expect(r).toEqual({ field: "--max-tokens", message: "--max-tokens: 10 more ids do not fit: the prompt takes 9 of the 16 positions the context holds (raise --ctx)" });
  });
});
