/**
 * `k3 demo`: prompt in, text out, in seconds, with nothing else to download. It runs the tiny
 * Kimi K3 model that ships inside the executable (random weights: the text is not language,
 * it shows the whole path working) through the same engine and report as `k3 <model_dir>`.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { tmpdir } from "node:os";
import { loadConfig } from "../checkpoint/config.ts";
import { samplingDefaults } from "../decode/sampling-options.ts";
import { defaultPrefillChunk } from "../plan/limits.ts";
import { envValue } from "../env.ts";
import { ExitCode, K3Error, runtimeError } from "../errors.ts";
import { watchSignals } from "../engine/signals.ts";
import { errnoCode, writeAtomically } from "../fs.ts";
import { emit, log } from "../report/log.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { helpOption } from "./common-options.ts";
import { demoFiles } from "./demo-assets.ts";
import { executeRun, finishRun } from "./execute.ts";
import { resolvePrompt } from "./prompt.ts";
import { parseCommandArgs, version, type CommandInfo } from "./usage.ts";

interface DemoOptions {
  prompt: string;
  gen: number;
}

const defaultPrompt = "Kimi K3 runs on one machine.";

const options: readonly OptionDef<DemoOptions>[] = [
  { name: "prompt", value: "TEXT", description: `Prompt text (default "${defaultPrompt}")`, apply: (o, raw) => { o.prompt = raw; } },
  { name: "gen", value: "N", description: "Tokens to generate (default 24)", apply: (o, raw, flag) => { o.gen = parseInteger(raw, flag, 1, 4096); } },
  helpOption,
];

const command: CommandInfo<DemoOptions> = {
  name: "k3 demo", description: "Run the tiny Kimi K3 model built into k3: prompt in, text out", positionals: [], options,
};

/** The demo files, copied out of the executable once per version. */
function demoDir(): string {
  const home = envValue("HOME");
  const cacheRoot = envValue("XDG_CACHE_HOME") ?? (home ? join(home, ".cache") : tmpdir());
  const dir = join(cacheRoot, "k3", `demo-${version}`);
  try {
    mkdirSync(dir, { recursive: true });
    for (const [name, embedded] of Object.entries(demoFiles)) {
      const target = join(dir, name);
      const bytes = readFileSync(embedded);
      if (existsSync(target) && statSync(target).size === bytes.length) continue;
      writeAtomically(target, bytes, "a demo file");
    }
  } catch (error) {
    const reason = error instanceof K3Error ? error.message : errnoCode(error);
    throw runtimeError(`${dir}: cannot prepare the demo files (${reason})`);
  }
  return dir;
}

export async function main(args: readonly string[]): Promise<number> {
  const o: DemoOptions = { prompt: defaultPrompt, gen: 24 };
  if (!(await parseCommandArgs(args, command, o))) return ExitCode.ok;
  watchSignals();
  const dir = demoDir();
  log.info(`demo: the tiny 13-layer Kimi K3 model (random weights) and a byte-level tokenizer, from ${dir}`);
  const { config, shape } = loadConfig(join(dir, "config.json"));
  const prompt = resolvePrompt({ source: "--prompt", value: o.prompt, tokDir: dir });
  const { result } = executeRun({
    modelDir: dir, config, configShape: shape, layerCount: config.numLayers, layersRequested: config.numLayers,
    prompt: prompt.ids, maxNewTokens: o.gen, mode: "incremental", prefillChunk: defaultPrefillChunk, sampling: samplingDefaults.run, budgets: [], trunkDir: undefined, tokenizer: prompt.tokenizer,
  });
  const code = finishRun(result);
  if (code === ExitCode.ok) emit(`${o.prompt}${result.generatedText ?? ""}\n`);
  return code;
}
