/**
 * `k3 demo`: prompt in, text out, in seconds, with nothing else to download. It runs the tiny
 * Kimi K3 model that ships inside the executable (random weights: the text is not language,
 * it shows the whole path working) through the same code as `k3 <model_dir> --prompt`.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { demoFiles } from "../demo/assets.ts";
import { ExitCode, K3Error } from "../errors.ts";
import { emit, log } from "../report/log.ts";
import { writeAtomically } from "../report/results.ts";
import { parseInteger, type OptionDef } from "./args.ts";
import { runMain } from "./run.ts";
import { parseCommandArgs, version, type CommandInfo } from "./usage.ts";

interface DemoOptions {
  prompt: string;
  gen: number;
}

const defaultPrompt = "Kimi K3 runs on one machine.";

const options: readonly OptionDef<DemoOptions>[] = [
  { name: "prompt", value: "TEXT", description: `Prompt text (default "${defaultPrompt}")`, apply: (o, raw) => { o.prompt = raw; } },
  { name: "gen", value: "N", description: "Tokens to generate (default 24)", apply: (o, raw, flag) => { o.gen = parseInteger(raw, flag, 1, 4096); } },
  { name: "help", alias: "h", description: "Print this usage and exit", apply: () => {} },
];

const command: CommandInfo<DemoOptions> = {
  name: "k3 demo", description: "Run the tiny Kimi K3 model built into k3: prompt in, text out", positionals: [], options,
};

/** The demo files, copied out of the executable once per version. */
function demoDir(): string {
  const cacheRoot = process.env.XDG_CACHE_HOME ?? (process.env.HOME ? join(homedir(), ".cache") : tmpdir());
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
    throw new K3Error(ExitCode.runtime, `${dir}: cannot prepare the demo files (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
  }
  return dir;
}

export async function main(args: readonly string[]): Promise<number> {
  const o: DemoOptions = { prompt: defaultPrompt, gen: 24 };
  if (!(await parseCommandArgs(args, command, o))) return ExitCode.ok;
  const dir = demoDir();
  log.info(`demo: the tiny 13-layer Kimi K3 model (random weights) and a byte-level tokenizer, from ${dir}`);
  const out = join(dir, "demo_run.json");
  const code = await runMain([dir, "--tok", dir, "--prompt", o.prompt, "--gen", String(o.gen), "--out", out]);
  if (code !== ExitCode.ok) return code;
  const results = JSON.parse(readFileSync(out, "utf8")) as { generated_text: string | null };
  emit(`${o.prompt}${results.generated_text ?? ""}\n`);
  return ExitCode.ok;
}
