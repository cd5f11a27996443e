/**
 * `POST /v1/responses` (chat.md 4.9): OpenAI's Responses API over the one chat request. The
 * output items, in the order K3 wrote them: a `reasoning` item whose `summary` is the reasoning
 * text (one `summary_text`; K3's reasoning is not summarised, it is given whole), a `message`
 * with one `output_text`, then a `function_call` per call (`call_id`, `name`, `arguments`). A
 * reply cut by `max_output_tokens` is `status: "incomplete"` with
 * `incomplete_details.reason: "max_output_tokens"`. `usage.input_tokens_details.cached_tokens` is
 * the prompt ids reused; `output_tokens_details.reasoning_tokens` the reasoning's ids.
 *
 * Streamed: `response.created`, `response.in_progress`, then per item `response.output_item.added`,
 * its parts and deltas (`response.reasoning_summary_text.delta`, `response.output_text.delta`,
 * `response.function_call_arguments.delta`) and their `.done` events, `response.output_item.done`,
 * and last `response.completed` (or `response.incomplete`) with the whole response; every event
 * carries its `sequence_number`.
 */
import type { AssistantMessage } from "../chat/reply-message.ts";
import type { Completion, CompletionChoice, PreparedCompletion } from "./chat-completion.ts";
import { parseResponsesRequest } from "./responses-request.ts";
import { replyId, type Door, type ReplyHead, type SendEvent } from "./door.ts";

type Item =
  | { type: "reasoning"; id: string; summary: { type: "summary_text"; text: string }[] }
  | { type: "message"; id: string; status: string; role: "assistant"; content: { type: "output_text"; text: string; annotations: never[]; logprobs: never[] }[] }
  | { type: "function_call"; id: string; call_id: string; name: string; arguments: string; status: string };

/** The ids of one reply's items, made once so the stream and its final response agree. */
interface ItemIds {
  reasoning: string;
  message: string;
  calls: string[];
}

function items(message: AssistantMessage, ids: ItemIds, complete: boolean): Item[] {
  const out: Item[] = [];
  const status = complete ? "completed" : "incomplete";
  if (message.reasoning_content) out.push({ type: "reasoning", id: ids.reasoning, summary: [{ type: "summary_text", text: message.reasoning_content }] });
  if (message.content) out.push({ type: "message", id: ids.message, status, role: "assistant", content: [{ type: "output_text", text: message.content, annotations: [], logprobs: [] }] });
  (message.tool_calls ?? []).forEach((call, i) => {
    ids.calls[i] ??= replyId("fc_");
    out.push({ type: "function_call", id: ids.calls[i] as string, call_id: call.id, name: call.function.name, arguments: call.function.arguments, status: "completed" });
  });
  return out;
}

/** The response object; `completion` undefined while it is in progress. */
function responseObject(head: ReplyHead, prepared: PreparedCompletion, completion: Completion | undefined, ids: ItemIds) {
  const choice = completion?.choices[0] as CompletionChoice | undefined;
  const complete = choice === undefined || choice.finishReason !== "length";
  const r = prepared.request;
  const format = r.responseFormat.type === "json_schema"
    ? { type: "json_schema", name: r.responseFormat.name, schema: r.responseFormat.schema, strict: r.responseFormat.strict ?? false }
    : { type: r.responseFormat.type };
  const usage = completion && {
    input_tokens: completion.usage.prompt_tokens,
    input_tokens_details: { cached_tokens: Math.min(completion.stats.reused_prompt_ids, completion.usage.prompt_tokens) },
    output_tokens: completion.usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: choice?.reasoningIds ?? 0 },
    total_tokens: completion.usage.total_tokens,
  };
  return {
    id: head.id, object: "response", created_at: head.created, model: head.model,
    status: choice === undefined ? "in_progress" : complete ? "completed" : "incomplete",
    incomplete_details: complete ? null : { reason: "max_output_tokens" },
    error: null, instructions: null, metadata: {},
    output: choice ? items(choice.message, ids, complete) : [],
    parallel_tool_calls: true,
    tool_choice: typeof r.toolChoice === "string" ? r.toolChoice : { type: "function", name: r.toolChoice.function },
    tools: [], temperature: prepared.sampling.temperature, top_p: prepared.sampling.topP, max_output_tokens: r.maxTokens ?? null,
    reasoning: { effort: r.thinking ? r.effort : "none", summary: null },
    text: { format }, store: false, truncation: "disabled",
    usage: usage ?? null,
    ...(completion && { k3: completion.stats }),
  };
}

export const responsesDoor: Door = {
  idPrefix: "resp_",
  clampMaxTokens: true,
  doneLine: false,
  parse: parseResponsesRequest,
  body: (head, prepared, c) => responseObject(head, prepared, c, { reasoning: replyId("rs_"), message: replyId("msg_"), calls: [] }),
  stream: (head, prepared, send: SendEvent) => {
    const ids: ItemIds = { reasoning: replyId("rs_"), message: replyId("msg_"), calls: [] };
    let sequence = 0;
    const emit = (type: string, data: Record<string, unknown>) => send({ type, sequence_number: sequence++, ...data }, type);
    emit("response.created", { response: responseObject(head, prepared, undefined, ids) });
    emit("response.in_progress", { response: responseObject(head, prepared, undefined, ids) });
    let index = -1;
    let open: { kind: "reasoning" | "message"; text: string } | undefined;
    const close = () => {
      if (!open) return;
      if (open.kind === "reasoning") {
        const part = { type: "summary_text", text: open.text };
        emit("response.reasoning_summary_text.done", { item_id: ids.reasoning, output_index: index, summary_index: 0, text: open.text });
        emit("response.reasoning_summary_part.done", { item_id: ids.reasoning, output_index: index, summary_index: 0, part });
        emit("response.output_item.done", { output_index: index, item: { type: "reasoning", id: ids.reasoning, summary: [part] } });
      } else {
        const part = { type: "output_text", text: open.text, annotations: [], logprobs: [] };
        emit("response.output_text.done", { item_id: ids.message, output_index: index, content_index: 0, text: open.text, logprobs: [] });
        emit("response.content_part.done", { item_id: ids.message, output_index: index, content_index: 0, part });
        emit("response.output_item.done", { output_index: index, item: { type: "message", id: ids.message, status: "completed", role: "assistant", content: [part] } });
      }
      open = undefined;
    };
    const text = (kind: "reasoning" | "message", delta: string) => {
      if (open?.kind !== kind) {
        close();
        index++;
        open = { kind, text: "" };
        if (kind === "reasoning") {
          emit("response.output_item.added", { output_index: index, item: { type: "reasoning", id: ids.reasoning, summary: [] } });
          emit("response.reasoning_summary_part.added", { item_id: ids.reasoning, output_index: index, summary_index: 0, part: { type: "summary_text", text: "" } });
        } else {
          emit("response.output_item.added", { output_index: index, item: { type: "message", id: ids.message, status: "in_progress", role: "assistant", content: [] } });
          emit("response.content_part.added", { item_id: ids.message, output_index: index, content_index: 0, part: { type: "output_text", text: "", annotations: [], logprobs: [] } });
        }
      }
      open.text += delta;
      if (kind === "reasoning") emit("response.reasoning_summary_text.delta", { item_id: ids.reasoning, output_index: index, summary_index: 0, delta });
      else emit("response.output_text.delta", { item_id: ids.message, output_index: index, content_index: 0, delta, logprobs: [] });
    };
    let calls = 0;
    return {
      delta: (delta) => {
        if ("reasoning_content" in delta) text("reasoning", delta.reasoning_content);
        else if ("content" in delta) text("message", delta.content);
        else {
          close();
          for (const call of delta.tool_calls) {
            index++;
            const id = (ids.calls[calls++] = replyId("fc_"));
            const item = { type: "function_call", id, call_id: call.id, name: call.function.name, arguments: "", status: "in_progress" };
            emit("response.output_item.added", { output_index: index, item });
            emit("response.function_call_arguments.delta", { item_id: id, output_index: index, delta: call.function.arguments });
            emit("response.function_call_arguments.done", { item_id: id, output_index: index, name: call.function.name, arguments: call.function.arguments });
            emit("response.output_item.done", { output_index: index, item: { ...item, arguments: call.function.arguments, status: "completed" } });
          }
        }
      },
      end: (c) => {
        close();
        const response = responseObject(head, prepared, c, ids);
        emit(response.status === "incomplete" ? "response.incomplete" : "response.completed", { response });
      },
    };
  },
  streamError: (e, send) => send({ type: "error", code: e.code, message: e.message, param: e.param, sequence_number: 0 }, "error"),
};
