/**
 * The kernel variant in use (zig/isa/: chosen when libk3 loads, from K3_ISA or the CPU) and the
 * compute threads: what `k3 --version` and every run report say, and the run's results record.
 */
import { kernelVariant, type KernelVariant } from "../native/kernels.ts";

export type { KernelVariant };

/** Loads libk3 if needed (refusing a K3_ISA this CPU or build lacks) and says what runs. */
export function kernelsInUse(): KernelVariant {
  return kernelVariant();
}
