/**
 * `k3 budget` (runtime.md 11.4): from the shard headers alone, every tensor classified by what
 * the engine must do with it. Only routed experts (`.block_sparse_moe.experts.<n>.`) stream;
 * shared experts, the latent MoE projections, the router, attention, the attention residuals,
 * norms, the dense MLP, the embedding and the LM head are resident; vision tensors are unused.
 * It reads whatever shards are there, so it works on a partial download.
 */
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { loadConfig } from "../checkpoint/config.ts";
import { readShardHeader, type Dtype, type TensorEntry } from "../checkpoint/safetensors.ts";
import { K3Error, runtimeError } from "../errors.ts";
import { errnoCode } from "../fs.ts";
import type { ModelCensus } from "../plan/forecast.ts";
import type { TrunkLayerBytes } from "../plan/token-bytes.ts";

export type TensorClass =
  | "routed experts" | "shared experts" | "latent MoE projections" | "router" | "attention" | "attention residuals"
  | "norms" | "dense MLP" | "embedding" | "lm_head" | "vision (unused)" | "other (unused)";

export type Residency = "streamable" | "resident" | "unused";

/** The classes in report order, each with what the engine does with it. */
export const tensorClasses: readonly { name: TensorClass; residency: Residency }[] = [
  { name: "routed experts", residency: "streamable" },
  { name: "shared experts", residency: "resident" },
  { name: "latent MoE projections", residency: "resident" },
  { name: "router", residency: "resident" },
  { name: "attention", residency: "resident" },
  { name: "attention residuals", residency: "resident" },
  { name: "norms", residency: "resident" },
  { name: "dense MLP", residency: "resident" },
  { name: "embedding", residency: "resident" },
  { name: "lm_head", residency: "resident" },
  { name: "vision (unused)", residency: "unused" },
  { name: "other (unused)", residency: "unused" },
];

const routedExpert = /\.block_sparse_moe\.experts\.(\d+)\./;
const layerOf = /\.layers\.(\d+)\./;

/** The class of a tensor, by its name. */
export function classifyTensor(name: string): TensorClass {
  if (name.startsWith("vision_tower.") || name.startsWith("mm_projector.") || name.startsWith("multi_modal_projector.")) return "vision (unused)";
  if (!name.startsWith("language_model.")) return "other (unused)";
  if (routedExpert.test(name)) return "routed experts";
  if (name.includes(".block_sparse_moe.shared_experts.")) return "shared experts";
  if (/\.block_sparse_moe\.routed_expert_(down_proj|up_proj|norm)\./.test(name)) return "latent MoE projections";
  if (name.includes(".block_sparse_moe.gate.")) return "router";
  if (/_attn_res_(norm|proj)\.|_attention_res_(norm|proj)\.|\.mlp_res_(norm|proj)\./.test(name)) return "attention residuals";
  if (name.includes(".self_attn.")) return "attention";
  if (name.includes(".mlp.")) return "dense MLP";
  if (name.includes("embed_tokens")) return "embedding";
  if (name.includes("lm_head")) return "lm_head";
  if (/(layernorm|\.norm)\.weight$/.test(name)) return "norms";
  return "other (unused)";
}

export interface ClassTotal {
  tensors: number;
  bytes: number;
}

export interface LayerShape {
  layer: number;
  attention: "KDA" | "MLA" | "?";
  ffn: "dense" | "MoE" | "?";
  experts: number;
}

export interface TensorBudget {
  dir: string;
  shardsRead: number;
  shardsSkipped: { name: string; reason: string }[];
  tensors: number;
  bytes: number;
  byClass: Map<TensorClass, ClassTotal>;
  byDtype: Map<Dtype, ClassTotal>;
  byResidency: Map<Residency, ClassTotal>;
  /** Distinct (layer, expert) pairs among the routed-expert tensors. */
  routedExperts: number;
  /** Parameters of the routed experts: two per packed byte. */
  routedParameters: number;
  layers: LayerShape[];
  /** Per layer (0-based, gaps as zeros): its trunk bytes (every tensor but the routed experts') and of them the bf16 matrices'. */
  trunkLayers: TrunkLayerBytes[];
  /** Routed experts a token picks, from config.json when it is there and readable. */
  expertsPerToken: number | undefined;
}

export type { TrunkLayerBytes };

const add = <K>(map: Map<K, ClassTotal>, key: K, bytes: number) => {
  const total = map.get(key) ?? { tensors: 0, bytes: 0 };
  total.tensors++;
  total.bytes += bytes;
  map.set(key, total);
};

export function tensorBudget(dir: string): TensorBudget {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n.endsWith(".safetensors")).sort();
  } catch (error) {
    throw runtimeError(`${dir}: cannot list the model directory (${errnoCode(error)})`);
  }
  if (names.length === 0) throw runtimeError(`${dir}: no *.safetensors shards found`);
  const entries: TensorEntry[] = [];
  const skipped: { name: string; reason: string }[] = [];
  names.forEach((name, i) => {
    try {
      entries.push(...readShardHeader(join(dir, name), i).tensors);
    } catch (error) {
      if (!(error instanceof K3Error)) throw error;
      skipped.push({ name, reason: error.message.replace(`${join(dir, name)}: `, "") });
    }
  });
  const byClass = new Map<TensorClass, ClassTotal>();
  const byDtype = new Map<Dtype, ClassTotal>();
  const byResidency = new Map<Residency, ClassTotal>();
  const experts = new Set<string>();
  const layers = new Map<number, LayerShape>();
  let routedParameters = 0;
  const trunkLayers: TrunkLayerBytes[] = [];
  for (const t of entries) {
    const cls = classifyTensor(t.name);
    add(byClass, cls, t.nbytes);
    add(byDtype, t.dtype, t.nbytes);
    add(byResidency, tensorClasses.find((c) => c.name === cls)?.residency ?? "unused", t.nbytes);
    const layerMatch = t.name.startsWith("language_model.") ? t.name.match(layerOf) : null;
    if (layerMatch) {
      const layer = Number(layerMatch[1]);
      const shape = layers.get(layer) ?? { layer, attention: "?", ffn: "?", experts: 0 };
      if (/\.self_attn\.(q_a_proj|kv_a_proj_with_mqa)\./.test(t.name)) shape.attention = "MLA";
      if (/\.self_attn\.(f_a_proj|q_conv1d)\./.test(t.name)) shape.attention = "KDA";
      if (t.name.includes(".block_sparse_moe.")) shape.ffn = "MoE";
      if (t.name.includes(".mlp.")) shape.ffn = "dense";
      const expert = t.name.match(routedExpert);
      if (expert) {
        experts.add(`${layer}/${expert[1]}`);
        shape.experts = Math.max(shape.experts, Number(expert[1]) + 1);
        if (t.name.endsWith(".weight_packed")) routedParameters += 2 * t.nbytes;
      }
      layers.set(layer, shape);
      if (!expert) {
        while (trunkLayers.length <= layer) trunkLayers.push({ bytes: 0, bf16MatrixBytes: 0 });
        const trunk = trunkLayers[layer] as TrunkLayerBytes;
        trunk.bytes += t.nbytes;
        if (t.dtype === "BF16" && t.shape.length >= 2) trunk.bf16MatrixBytes += t.nbytes;
      }
    }
  }
  return {
    dir, shardsRead: names.length - skipped.length, shardsSkipped: skipped, tensors: entries.length,
    bytes: entries.reduce((s, t) => s + t.nbytes, 0), byClass, byDtype, byResidency,
    routedExperts: experts.size, routedParameters, layers: [...layers.values()].sort((a, b) => a.layer - b.layer), trunkLayers,
    expertsPerToken: expertsPerToken(dir),
  };
}

function expertsPerToken(dir: string): number | undefined {
  try {
    return loadConfig(join(dir, "config.json")).config.numExpertsPerToken;
  } catch (error) {
    if (error instanceof K3Error) return undefined; // a partial download may lack it: the table is left out
    throw error;
  }
}

/** Consecutive integers as ranges: 0 2 3 4 7 -> "0, 2-4, 7". */
export function ranges(values: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < values.length; ) {
    let j = i;
    while (j + 1 < values.length && (values[j + 1] as number) === (values[j] as number) + 1) j++;
    out.push(i === j ? `${values[i]}` : `${values[i]}-${values[j]}`);
    i = j + 1;
  }
  return out.join(", ");
}

/** The forecast's sizes from a checkpoint's headers; undefined when they cannot tell (no experts, no config). */
export function budgetCensus(b: TensorBudget): ModelCensus | undefined {
  const topK = b.expertsPerToken;
  const moeLayers = b.layers.filter((l) => l.ffn === "MoE").length;
  if (b.trunkLayers.length === 0 || b.routedExperts === 0 || topK === undefined || moeLayers === 0) return undefined;
  return {
    source: `the checkpoint in ${b.dir}`, trunkLayers: b.trunkLayers, lmHeadBytes: b.byClass.get("lm_head")?.bytes ?? 0,
    expertBytes: (b.byClass.get("routed experts")?.bytes ?? 0) / b.routedExperts, routedExperts: b.routedExperts, expertsPerToken: topK, moeLayers,
  };
}
