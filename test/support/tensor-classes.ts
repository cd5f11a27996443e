/** Residency classes of checkpoint tensor names (model.md 3.7), as the reference cases state them. */
import { modelPrefix } from "../../src/checkpoint/tensor-names.ts";

/** Routed experts are `...block_sparse_moe.experts.<number>.`; `shared_experts.` is trunk. */
const routedExpertPattern = /\.block_sparse_moe\.experts\.\d+\./;

export type NameClass = "routed_expert" | "trunk" | "model" | "non_text";

/** Residency class of a checkpoint tensor by name alone. */
export function classifyName(name: string): NameClass {
  if (name.startsWith("vision_tower.") || name.startsWith("mm_projector.")) return "non_text";
  if (routedExpertPattern.test(name)) return "routed_expert";
  if (name.startsWith(`${modelPrefix}layers.`)) return "trunk";
  return "model";
}
