/** The subcommands of k3, in the order usage lists them. `k3 <model_dir>` is the default. */
export interface Subcommand {
  name: string;
  description: string;
  /** Loaded on demand so `k3 --help` does not pay for every command. */
  load: () => Promise<{ main: (args: readonly string[]) => Promise<number> }>;
}

export const subcommands: readonly Subcommand[] = [
  { name: "pack-trunk", description: "Pack the trunk into one aligned run per layer, for --trunk", load: () => import("./pack-trunk.ts") },
  { name: "sim-cache", description: "Replay an expert trace at many cache sizes under LRU, Belady and PIN+LRU", load: () => import("./sim-cache.ts") },
];

export function findSubcommand(name: string | undefined): Subcommand | undefined {
  return subcommands.find((s) => s.name === name);
}
