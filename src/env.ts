/**
 * The environment variables k3 reads: the one table. README's list of variables is checked
 * against it (test/unit/env.test.ts), and code reads them only through `envValue`.
 */
export const environment = {
  K3_THREADS: { audience: "users", effect: "compute threads (output does not change with it)" },
  OMP_NUM_THREADS: { audience: "users", effect: "compute threads when K3_THREADS is not set" },
  K3_ISA: { audience: "users", effect: "scalar|v3|v4: forces that kernel variant (else the widest the CPU runs); output does not change with it" },
  K3_NOHUGE: { audience: "users", effect: "turns off the huge-page advice for weight buffers" },
  XDG_CACHE_HOME: { audience: "users", effect: "where k3 demo (and chat/serve --demo) unpack the demo model (else $HOME/.cache)" },
  HOME: { audience: "users", effect: "the home directory, for the demo's cache" },
  K3_API_KEY: { audience: "users", effect: "the key k3 serve requires, when --api-key is not given" },
  HF_TOKEN: { audience: "users", effect: "the Hugging Face access token k3 download sends to the Hub (and nowhere else); never printed" },
  K3_HUB_URL: { audience: "users", effect: "the Hub endpoint k3 download uses (a mirror; a local fake in tests), default https://huggingface.co" },
  K3_MODEL_DIR: { audience: "users", effect: "the model directory k3 budget reads when none is given" },
  K3_INJECT_EXPERT_FAULT: { audience: "tests", effect: "layer:expert[,...]: those expert reads fail (the dropped-expert path)" },
  K3_INJECT_TRUNK_READ_FAULT: { audience: "tests", effect: "layer:read[,...]: that read of that packed-trunk layer fails with EIO (a failing disk mid-token)" },
  K3_INJECT_MISSING_ISA: { audience: "tests", effect: "v4[,...]: k3 treats those kernel variants as missing from the CPU (the refusal path)" },
  K3_SAFE_NATIVE: { audience: "tests", effect: "1: from source, load libk3-safe (Zig safety checks on); bun test sets it for its own process, the executable ignores it" },
  K3_PACK_KILL_AFTER_LAYERS: { audience: "tests", effect: "N[:SIGINT|SIGTERM]: pack-trunk sends itself SIGKILL (or that signal) after N layers" },
  K3_KIMI_TOKENIZER: { audience: "tests", effect: "the released Kimi rank table for the tokenizer tests" },
  K3_TOK_FILES: { audience: "tests", effect: "the directory holding tiktoken.model, as the original's tools name it" },
  K3_TOKENIZER_FULL_SWEEP: { audience: "tests", effect: "1: the tokenizer sweep over every code point" },
  K3_SCREENSHOT_DIR: { audience: "tests", effect: "the chat page's browser test also writes its screenshots there (README's is docs/chat-page.png)" },
  K3_BENCH_DIR: { audience: "bench", effect: "where the K3-width benchmark checkpoint lives" },
  K3_BENCH_SKIP_STREAMING: { audience: "bench", effect: "1: skips the K3-width streaming benchmark" },
  K3_BENCH_SKIP_LONG: { audience: "bench", effect: "1: skips the long-context decode benchmark (its first run prefills 8,192 ids, about 25 minutes)" },
} as const;

export type EnvName = keyof typeof environment;

export type Environment = Readonly<Record<string, string | undefined>>;

/** The variable's value (in `env`, else the process's), or undefined when it is unset or empty. */
export function envValue(name: EnvName, env: Environment = process.env): string | undefined {
  const value = env[name];
  return value === undefined || value === "" ? undefined : value;
}

/** Whether the variable is set to the empty string (for a variable where that is a mistake, not "unset"). */
export function envSetButEmpty(name: EnvName, env: Environment = process.env): boolean {
  return env[name] === "";
}
