/**
 * `k3 demo`: prompt in, text out, in seconds, with nothing else to download. It runs the demo
 * Kimi K3 that ships inside the executable (src/cli/demo-assets.ts: a small K3 trained here on
 * generated text) through the same engine and report as `k3 <model_dir>`.
 */
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { samplingDefaults } from "../decode/sampling-options.ts";
import { budgetRequest } from "../plan/budget.ts";
import { defaultPrefillChunk } from "../plan/limits.ts";
import { ExitCode } from "../errors.ts";
import { watchSignals } from "../native/signals.ts";
import { emit, log } from "../report/log.ts";
import { visibleText } from "../report/visible-text.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { helpOption } from "./common-options.ts";
import { demoModelName, unpackDemo } from "./demo-assets.ts";
import { executeRun, finishRun } from "./execute.ts";
import { resolvePrompt } from "./prompt.ts";
import { parseCommandArgs, type CommandInfo } from "./usage.ts";

interface DemoOptions {
  prompt: string;
  gen: number;
  modelDir: boolean;
}

const defaultPrompt = "Kimi K3 runs on one machine.";
const defaultGen = 48;

const options: readonly OptionDef<DemoOptions>[] = [
  { name: "prompt", value: "TEXT", description: `Prompt text (default "${defaultPrompt}")`, apply: (o, raw) => { o.prompt = raw; } },
  { name: "gen", value: "N", description: `Tokens to generate (default ${defaultGen})`, apply: (o, raw, flag) => { o.gen = parseInteger(raw, flag, 1, 4096); } },
  {
    name: "model-dir", description: "Print the directory the demo model is unpacked to (a model directory and tokenizer for every other command) and exit",
    apply: (o) => { o.modelDir = true; },
  },
  helpOption,
];

const command: CommandInfo<DemoOptions> = {
  name: "k3 demo", description: "Run the demo Kimi K3 built into k3 (trained here, nothing to download): prompt in, text out", positionals: [], options,
};

export async function main(args: readonly string[]): Promise<number> {
  const o: DemoOptions = { prompt: defaultPrompt, gen: defaultGen, modelDir: false };
  if (!(await parseCommandArgs(args, command, o))) return ExitCode.ok;
  watchSignals();
  const dir = unpackDemo();
  if (o.modelDir) {
    emit(`${dir}\n`);
    return ExitCode.ok;
  }
  const { config, shape } = loadConfig(join(dir, "config.json"));
  log.info(`demo: ${demoModelName(config.numLayers)}, from ${dir}`);
  const prompt = resolvePrompt({ source: "--prompt", value: o.prompt, tokDir: dir });
  const { result } = await executeRun({
    modelDir: dir, config, configShape: shape, layerCount: config.numLayers, layersRequested: config.numLayers,
    prompt: prompt.ids, maxNewTokens: o.gen, mode: "incremental", prefillChunk: defaultPrefillChunk, sampling: samplingDefaults.run, budgets: budgetRequest([]), trunkDir: undefined, tokenizer: prompt.tokenizer,
  });
  const code = finishRun(result);
  if (code === ExitCode.ok) emit(`${o.prompt}${visibleText(result.generatedText ?? "")}\n`);
  return code;
}
