/**
 * Thinking on/off and the effort, from every request form peers use (chat.md 2.5): Moonshot's
 * `thinking` object, OpenAI's `reasoning_effort`, and the open-source `chat_template_kwargs`.
 *
 * Effort precedence: `thinking.effort`, then `chat_template_kwargs.thinking_effort`, then
 * `reasoning_effort` (KVV: `thinking.effort` beats `reasoning_effort`), else `max`. On/off: a
 * field that says it explicitly (`thinking.type`, `chat_template_kwargs.thinking` or
 * `.enable_thinking`, `reasoning_effort: "none"`); two that disagree are refused rather than
 * one silently winning. Null means absent everywhere. An effort is checked even when thinking is
 * off (where it is ignored), so `medium` is always a 400.
 */
import { Fields, quote, refuse } from "./fields.ts";
import { EFFORTS, type Effort } from "./request-types.ts";

export interface ThinkingChoice {
  readonly thinking: boolean;
  readonly effort: Effort;
}

function effortAt(fields: Fields, key: string, extra: readonly string[] = []): string | undefined {
  const value = fields.string(key);
  if (value === undefined) return undefined;
  if (!(EFFORTS as readonly string[]).includes(value) && !extra.includes(value)) {
    const allowed = [...EFFORTS, ...extra].map((e) => `"${e}"`).join(", ");
    throw refuse(fields.at(key), `${quote(value)} is not supported (allowed: ${allowed})`);
  }
  return value;
}

export function parseThinking(body: Fields): ThinkingChoice {
  const said: { path: string; on: boolean }[] = [];
  let effort: string | undefined;

  const thinking = body.object("thinking");
  if (thinking !== undefined) {
    const type = thinking.string("type");
    if (type !== undefined && type !== "enabled" && type !== "disabled") {
      throw refuse(thinking.at("type"), `${quote(type)} is not "enabled" or "disabled"`);
    }
    if (type !== undefined) said.push({ path: thinking.at("type"), on: type === "enabled" });
    effort = effortAt(thinking, "effort");
    const keep = thinking.string("keep");
    if (keep !== undefined && keep !== "all") throw refuse(thinking.at("keep"), `${quote(keep)} is not supported (only "all": history reasoning is always kept)`);
  }

  const kwargs = body.object("chat_template_kwargs");
  if (kwargs !== undefined) {
    for (const key of ["thinking", "enable_thinking"]) {
      const on = kwargs.boolean(key);
      if (on !== undefined) said.push({ path: kwargs.at(key), on });
    }
    effort ??= effortAt(kwargs, "thinking_effort");
    kwargs.boolean("preserve_thinking"); // a no-op: the K3 renderer always keeps history reasoning
  }

  const reasoning = effortAt(body, "reasoning_effort", ["none"]);
  if (reasoning === "none") said.push({ path: body.at("reasoning_effort"), on: false });
  else effort ??= reasoning;

  const first = said[0];
  const other = said.find((s) => s.on !== first?.on);
  if (first !== undefined && other !== undefined) {
    throw refuse(other.path, `turns thinking ${other.on ? "on" : "off"}, but ${first.path} turns it ${first.on ? "on" : "off"}`);
  }
  return { thinking: first?.on ?? true, effort: (effort as Effort | undefined) ?? "max" };
}
