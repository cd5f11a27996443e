/**
 * Binding by name (model.md 3.7): every tensor the first `layerCount` layers and the model
 * level use is found by its exact released name and checked against the shape the config
 * implies and a readable dtype, before anything is read. All problems are reported together;
 * nothing missing is ever read as zeros. `bindLayer` then turns a layer's bytes (resident, or
 * a streaming slot) into the structures the forward pass uses: matrices point into the bytes,
 * small vectors are widened to f32.
 */
import { offsetPointer, u8View, type Pointer } from "../native/memory.ts";
import type { ModelConfig } from "../checkpoint/config.ts";
import { dtypeBytes, type CheckpointIndex, type TensorEntry } from "../checkpoint/safetensors.ts";
import {
  attentionKind, denseTensors, expertTensors, ffnKind, kdaTensors, layerNormTensors, mlaTensors, modelTensors, moeTensors,
  tensorList, trunkTensors, type DenseTensors, type KdaTensors, type MlaTensors, type MoeTensors, type TensorSpec,
} from "../checkpoint/tensor-names.ts";
import { K3Error, ExitCode } from "../errors.ts";
import type { LayerLayout, LayoutTensor } from "./trunk-layout.ts";
import type {
  DenseWeights, KdaWeights, LayerWeights, Matrix, MlaWeights, MoeWeights, Vector,
} from "./types.ts";
import { VectorArena } from "./vector-arena.ts";
import { foldPhi, widenToF32 } from "./widen.ts";

const sameShape = (a: number[], b: number[]) => a.length === b.length && a.every((d, i) => d === b[i]);

/** Shapes a tensor may have besides the released one (model.md 3.2, 3.3). */
function shapeAccepted(spec: TensorSpec, shape: number[], config: ModelConfig): boolean {
  if (sameShape(spec.shape, shape)) return true;
  if (spec.name.endsWith("_res_proj.weight")) return sameShape(shape, [config.hiddenSize]);
  // A_log ships padded to D; the first Hk values are the heads.
  if (spec.name.endsWith(".A_log")) return shape.length === 1 && (shape[0] as number) >= config.kdaNumHeads;
  return false;
}

/** Matrices are read as bf16 or f32 in the dot product; vectors are widened from any float. */
export function isMatrixSpec(spec: Pick<TensorSpec, "shape" | "dtype">): boolean {
  return spec.dtype !== "U8" && spec.shape.length === 2 && spec.shape[0] !== 1;
}

function dtypeAccepted(spec: TensorSpec, entry: TensorEntry): boolean {
  if (spec.dtype === "U8") return entry.dtype === "U8";
  return isMatrixSpec(spec) ? entry.dtype === "BF16" || entry.dtype === "F32" : entry.dtype !== "U8";
}

/** Checks every tensor the run will use; throws one K3Error (exit 1) listing the problems. */
export function checkBindable(index: CheckpointIndex, config: ModelConfig, layerCount: number): void {
  // Counted before any name is built: a config that asks for far more tensors than the checkpoint
  // holds is refused at once, not after naming millions of missing tensors. (A shard set that is
  // merely incomplete gets the list below, which says which layers lack tensors.)
  const moeLayers = Math.max(0, layerCount - config.firstKDenseReplace);
  const perExpert = expertTensors(config, 0, 0).length;
  const needed = layerCount * tensorList(layerNormTensors(config, 0)).length + moeLayers * config.numExperts * perExpert;
  if (needed > 2 * index.tensorCount + 100_000) {
    throw new K3Error(
      ExitCode.runtime,
      `${index.dir}: the config needs at least ${needed} tensors for ${layerCount} layers ` +
        `(${moeLayers} MoE layers x ${config.numExperts} experts x ${perExpert}, and the layer norms), but the checkpoint has ${index.tensorCount}`,
    );
  }
  const problems: string[] = [];
  const layersMissing = new Set<number>();
  const check = (spec: TensorSpec, layer: number | undefined) => {
    const entry = index.get(spec.name);
    if (!entry) {
      if (layer !== undefined) layersMissing.add(layer);
      problems.push(`missing ${spec.name}`);
    } else if (!shapeAccepted(spec, entry.shape, config)) {
      problems.push(`${spec.name} has shape [${entry.shape.join(", ")}], the config implies [${spec.shape.join(", ")}]`);
    } else if (!dtypeAccepted(spec, entry)) {
      problems.push(`${spec.name} has dtype ${entry.dtype}, which k3 cannot use there`);
    }
  };
  for (let layer = 0; layer < layerCount; layer++) {
    for (const spec of trunkTensors(config, layer)) check(spec, layer);
    if (ffnKind(config, layer) !== "moe") continue;
    // Routed experts: U8, rank 2, logical shapes [I, Λ] for w1/w3 and [Λ, I] for w2, and
    // scale_cols x 32 = packed_cols x 2 (which is what proves the group size is 32).
    for (let e = 0; e < config.numExperts; e++) for (const spec of expertTensors(config, layer, e)) check(spec, layer);
  }
  for (const spec of tensorList(modelTensors(config))) check(spec, undefined);
  if (problems.length === 0) return;
  const head = layersMissing.size > 0 ? `${layersMissing.size} of ${layerCount} layers are missing tensors in this shard set; ` : "";
  const shown = problems.slice(0, 5).join("; ");
  const more = problems.length > 5 ? `; and ${problems.length - 5} more` : "";
  throw new K3Error(ExitCode.runtime, `${index.dir}: ${head}${shown}${more}`);
}

/** Bytes of widened vectors a layer's bind stores (its arena size). */
export function vectorBytes(layout: LayerLayout): number {
  return VectorArena.bytesFor(layout.tensors.filter((t) => !isMatrixSpec(t)).map((t) => t.nbytes / dtypeBytes[t.dtype]));
}

/** A layer's trunk bytes in native memory, laid out as `layout` says. */
export interface LayerBytes {
  layout: LayerLayout;
  base: Pointer;
}

class LayerBinder {
  readonly #tensors: Map<string, LayoutTensor>;
  readonly #bytes: LayerBytes;
  readonly #arena: VectorArena;
  readonly warnings: string[];

  constructor(bytes: LayerBytes, arena: VectorArena, warnings: string[]) {
    this.#bytes = bytes;
    this.#tensors = new Map(bytes.layout.tensors.map((t) => [t.name, t]));
    this.#arena = arena;
    this.warnings = warnings;
  }

  #tensor(name: string): LayoutTensor {
    const tensor = this.#tensors.get(name);
    if (!tensor) throw new Error(`layer ${this.#bytes.layout.layer} has no tensor ${name} (checkBindable runs first)`);
    return tensor;
  }

  matrix(spec: TensorSpec): Matrix {
    const t = this.#tensor(spec.name);
    const [rows, cols] = t.shape as [number, number];
    return { name: spec.name, ptr: offsetPointer(this.#bytes.base, t.off), rows, cols, dtype: t.dtype as Matrix["dtype"] };
  }

  values(name: string): Float32Array {
    const t = this.#tensor(name);
    const raw = u8View(this.#bytes.base, t.off, t.nbytes);
    return widenToF32(raw, t.dtype, t.shape.reduce((a, b) => a * b, 1));
  }

  vector(spec: TensorSpec): Vector {
    return this.#arena.store(spec.name, this.values(spec.name));
  }

  fold(norm: TensorSpec, proj: TensorSpec): Vector {
    return this.#arena.store(`${norm.name} * ${proj.name}`, foldPhi(this.values(norm.name), this.values(proj.name)));
  }

  aLog(spec: TensorSpec, heads: number): Vector {
    const all = this.values(spec.name);
    if (all.subarray(heads).some((v) => v !== 0)) {
      this.warnings.push(`${spec.name}: padding after the first ${heads} values (one per head) is not zero`);
    }
    return this.#arena.store(spec.name, all.slice(0, heads));
  }
}

/** True when A and B have the same keys. */
type SameKeys<A, B> = [Exclude<keyof A, keyof B>, Exclude<keyof B, keyof A>] extends [never, never] ? true : false;
type Holds<T extends true> = T;
// A table field with no weights field to bind it into, or a weights field with no table entry, fails to compile.
type TablesMatchWeights = [
  Holds<SameKeys<KdaTensors, Omit<KdaWeights, "kind">>>,
  Holds<SameKeys<MlaTensors, Omit<MlaWeights, "kind">>>,
  Holds<SameKeys<DenseTensors, Omit<DenseWeights, "kind">>>,
  Holds<SameKeys<MoeTensors, Omit<MoeWeights, "kind">>>,
];

function bindKda(b: LayerBinder, t: KdaTensors, heads: number): KdaWeights {
  return {
    kind: "kda",
    q: b.matrix(t.q), k: b.matrix(t.k), v: b.matrix(t.v),
    qConv: b.vector(t.qConv), kConv: b.vector(t.kConv), vConv: b.vector(t.vConv),
    fa: b.matrix(t.fa), fb: b.matrix(t.fb), beta: b.matrix(t.beta),
    aLog: b.aLog(t.aLog, heads), dtBias: b.vector(t.dtBias),
    gate: b.matrix(t.gate), oNorm: b.vector(t.oNorm), o: b.matrix(t.o),
  };
}

function bindMla(b: LayerBinder, t: MlaTensors): MlaWeights {
  return {
    kind: "mla",
    qa: b.matrix(t.qa), qaNorm: b.vector(t.qaNorm), qb: b.matrix(t.qb),
    kva: b.matrix(t.kva), kvaNorm: b.vector(t.kvaNorm), kvb: b.matrix(t.kvb),
    gate: t.gate ? b.matrix(t.gate) : undefined,
    o: b.matrix(t.o),
  };
}

function bindDense(b: LayerBinder, t: DenseTensors): DenseWeights {
  return { kind: "dense", gate: b.matrix(t.gate), up: b.matrix(t.up), down: b.matrix(t.down) };
}

function bindMoe(b: LayerBinder, t: MoeTensors): MoeWeights {
  return {
    kind: "moe",
    router: b.matrix(t.router), routerBias: b.vector(t.routerBias),
    latentDown: b.matrix(t.latentDown), latentUp: b.matrix(t.latentUp), latentNorm: b.vector(t.latentNorm),
    shared: t.shared ? bindDense(b, t.shared) : undefined,
  };
}

/** Binds one layer's bytes; vectors go to `arena`, which is reset first. */
export function bindLayer(config: ModelConfig, bytes: LayerBytes, arena: VectorArena, warnings: string[]): LayerWeights {
  arena.reset();
  const b = new LayerBinder(bytes, arena, warnings);
  const layer = bytes.layout.layer;
  const norms = layerNormTensors(config, layer);
  return {
    index: layer,
    inputNorm: b.vector(norms.inputNorm),
    postNorm: b.vector(norms.postNorm),
    phiAttn: b.fold(norms.attnResNorm, norms.attnResProj),
    phiMlp: b.fold(norms.mlpResNorm, norms.mlpResProj),
    attention: attentionKind(config, layer) === "kda"
      ? bindKda(b, kdaTensors(config, layer), config.kdaNumHeads)
      : bindMla(b, mlaTensors(config, layer)),
    ffn: ffnKind(config, layer) === "dense" ? bindDense(b, denseTensors(config, layer)) : bindMoe(b, moeTensors(config, layer)),
  };
}
