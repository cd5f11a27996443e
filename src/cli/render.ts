/**
 * `k3 render --tok DIR [--request FILE]`: a chat-completions request (the file, or stdin) to the
 * prompt k3 would feed the model, `{"ids":[...],"text":"...","prompt_tokens":N}` on stdout. For
 * debugging the template: `text` is the joined segment text. An invalid request exits 2 with the
 * reason on one line of stderr and nothing on stdout.
 */
import { parseChatRequest, renderChat } from "../chat/index.ts";
import { ExitCode, usageError } from "../errors.ts";
import { readOrFail } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { emit, log } from "../report/log.ts";
import { loadTokenizer } from "../tokenizer/index.ts";
import type { OptionDef } from "./args.ts";
import { helpOption, requirePath, tokMissingMessage, tokOption } from "./common-options.ts";
import { readStdin } from "./prompt.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface RenderOptions {
  tokDir: string | undefined;
  request: string | undefined;
  developerAsSystem: boolean;
}

const options: readonly OptionDef<RenderOptions>[] = [
  tokOption("Tokenizer directory (tiktoken.model + tokenizer_config.json with the K3 control tokens)"),
  { name: "request", value: "FILE", description: "Read the request JSON from FILE (default: standard input)", apply: (o, raw, flag) => { o.request = requirePath(raw, flag); } },
  { name: "developer-as-system", description: 'Render "developer" messages as system messages instead of refusing them', apply: (o) => { o.developerAsSystem = true; } },
  helpOption,
];

const command: CommandInfo<RenderOptions> = {
  name: "k3 render", description: "Render a chat-completions request to Kimi K3 prompt ids (template debugging)", positionals: [], options,
};

export async function main(args: readonly string[]): Promise<number> {
  const o: RenderOptions = { tokDir: undefined, request: undefined, developerAsSystem: false };
  if (!(await parseCommandArgs(args, command, o))) return ExitCode.ok;
  if (!o.tokDir) throw usageError(tokMissingMessage("render"));
  const bytes = o.request ? new Uint8Array(readOrFail(o.request, "the request", inputLimits.requestBytes)) : readStdin(inputLimits.requestBytes, "the request");
  const request = parseChatRequest(bytes, { source: o.request ?? "request (stdin)", developerAsSystem: o.developerAsSystem });
  const rendered = renderChat(request, loadTokenizer(o.tokDir));
  for (const note of request.notes) log.warn(note);
  emit(`${JSON.stringify({ ids: rendered.ids, text: rendered.text, prompt_tokens: rendered.promptTokens })}\n`);
  return ExitCode.ok;
}
