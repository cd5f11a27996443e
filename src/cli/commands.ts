/** The subcommands of k3, in the order usage lists them. `k3 <model_dir>` is the default. */
export interface Subcommand {
  name: string;
  description: string;
  /** Loaded on demand so `k3 --help` does not pay for every command. */
  load: () => Promise<{ main: (args: readonly string[]) => Promise<number> }>;
}

export const subcommands: readonly Subcommand[] = [
  { name: "pack-trunk", description: "Pack the trunk into one aligned run per layer, for --trunk", load: () => import("./pack-trunk.ts") },
  { name: "quantize-trunk", description: "Quantise a packed trunk to an int8 draft trunk, for --draft-trunk", load: () => import("./quantize-trunk.ts") },
  { name: "demo", description: "Run the demo Kimi K3 built into k3 (trained here, nothing to download): prompt in, text out", load: () => import("./demo.ts") },
  { name: "tokenize", description: "Encode text (stdin or --file) to token ids", load: () => import("./tokenize.ts") },
  { name: "chat", description: "Talk to Kimi K3: reasoning and answer streamed, the state kept across turns", load: () => import("./chat.ts") },
  { name: "serve", description: "An OpenAI-compatible server with multi-turn state reuse", load: () => import("./serve.ts") },
  { name: "render", description: "Render a chat-completions request to prompt ids (template debugging)", load: () => import("./render.ts") },
  { name: "detokenize", description: "Decode token ids (stdin) to exactly their bytes", load: () => import("./detokenize.ts") },
  { name: "doctor", description: "Check whether this machine can run Kimi K3, and print the next command", load: () => import("./doctor.ts") },
  { name: "download", description: "Download the checkpoint from the Hub: pinned commit, resumable, every file hashed", load: () => import("./download.ts") },
  { name: "verify", description: "Check a model directory against the release: shard sizes, headers, tensors, hashes", load: () => import("./verify.ts") },
  { name: "devbw", description: "Measure a disk the way k3 reads experts: random O_DIRECT reads at queue depth 1, 4, 16", load: () => import("./devbw.ts") },
  { name: "budget", description: "Classify every tensor from the shard headers: resident, streamable, unused", load: () => import("./budget.ts") },
  { name: "sim-cache", description: "Replay an expert trace at many cache sizes under LRU, Belady and PIN+LRU", load: () => import("./sim-cache.ts") },
];

export function findSubcommand(name: string | undefined): Subcommand | undefined {
  return subcommands.find((s) => s.name === name);
}
