/** The API error of a thrown error: `param` is the field the error carries, never parsed from its text. */
import { describe, expect, test } from "bun:test";
import { parseChatRequest } from "../../../src/chat/request.ts";
import { resolveSampling, samplingDefaults } from "../../../src/decode/sampling-options.ts";
import { fieldError, runtimeError, usageError } from "../../../src/errors.ts";
import { fromThrown } from "../../../src/serve/errors.ts";

const thrown = (f: () => unknown) => {
  try {
    f();
  } catch (error) {
    return fromThrown(error);
  }
  throw new Error("did not throw");
};

describe("fromThrown", () => {
  test("a field error's field is the param; the message still names it first", () => {
    expect(fromThrown(fieldError("messages[2].role", "expected a string"))).toEqual({
      status: 400, type: "invalid_request_error", message: "messages[2].role: expected a string", param: "messages[2].role", code: "invalid_request",
    });
  });

  test("a usage error without a field has no param, even when its text looks like one", () => {
    expect(fromThrown(usageError("request: expected a JSON object")).param).toBeNull();
    expect(fromThrown(usageError("max_tokens: but raised without a field")).param).toBeNull();
    expect(fromThrown(runtimeError("disk: gone"))).toMatchObject({ status: 500, param: null, code: "internal_error" });
  });

  test("from the readers: a request field, a sampling knob by its API name, the body itself", () => {
    expect(thrown(() => parseChatRequest({ messages: [{ role: "developer", content: "x" }] })).param).toBe("messages[0].role");
    expect(thrown(() => resolveSampling({ temperature: 9 }, samplingDefaults.chat, "field")).param).toBe("temperature");
    expect(thrown(() => resolveSampling({ topP: 2 }, samplingDefaults.chat, "field")).param).toBe("top_p");
    expect(thrown(() => parseChatRequest("[1]")).param).toBeNull();
  });
});
