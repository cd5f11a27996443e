/**
 * The model config reader (model.md section 1). It reads the released nested shape and the
 * flat fixture shape into one struct, and refuses anything it cannot read with confidence:
 * every problem is collected and reported in one message, and no required field ever gets a
 * default (section 1.6: a default here silently deletes the 24 MLA layers).
 */
import { K3Error, ExitCode } from "../errors.ts";
import { readCapped } from "../fs.ts";
import { inputLimits } from "../input-limits.ts";
import { jsonRefusal, JsonSyntaxError, parseJsonData } from "../json.ts";

export interface ModelConfig {
  hiddenSize: number;
  numLayers: number;
  vocabSize: number;
  rmsNormEps: number;
  kdaNumHeads: number;
  kdaHeadDim: number;
  shortConvKernel: number;
  gateLowerBound: number;
  numAttentionHeads: number;
  qLoraRank: number;
  kvLoraRank: number;
  qkNopeHeadDim: number;
  qkRopeHeadDim: number;
  vHeadDim: number;
  mlaUseOutputGate: boolean;
  numExperts: number;
  numExpertsPerToken: number;
  numSharedExperts: number;
  routedExpertHiddenSize: number;
  moeIntermediateSize: number;
  routedScalingFactor: number;
  moeRenormalize: boolean;
  latentMoeUseNorm: boolean;
  firstKDenseReplace: number;
  intermediateSize: number;
  attnResBlockSize: number;
  situBeta: number;
  situLinearBeta: number;
  /** One-based, as in the file: layer l is MLA iff l + 1 is listed. */
  fullAttnLayers: number[];
  tieWordEmbeddings: boolean;
  /** The context length: the most positions (prompt + generated) one sequence may hold. */
  maxPositionEmbeddings: number;
}

/**
 * The context length when config.json has no `max_position_embeddings`: 2^20 positions, the
 * length model.md section 9 sizes the MLA cache at (58 GB latent on the released model). The
 * arithmetic has no position limit (NoPE: nothing positional is computed), so unlike the
 * fields of section 1.6 a default here cannot silently change the model; it only bounds a
 * request, and the memory plan bounds it further.
 */
export const defaultContextLength = 1_048_576;

/**
 * Ceilings on the integer fields. k3 sizes tables from them (tensor names per layer and per
 * expert, routing tables, state) before a tensor is read, so a corrupt number must be refused
 * here, not after minutes and gigabytes: `num_hidden_layers` 1e6 or `num_experts` 2^31 are
 * refused at once. Each is far above the released model (model.md section 0: 93 layers, width
 * 7168, 896 experts, vocabulary 163,840).
 */
export const configCeilings = {
  /** Decoder layers (released 93); also the AttnRes block size and the dense prefix. */
  layers: 1024,
  /** Any width, rank or head count (released: at most 33,792). */
  width: 1 << 20,
  /** Routed experts per layer, experts per token, shared experts (released 896, 16, 2). */
  experts: 65_536,
  /** Embedding rows and logits (released 163,840). */
  vocab: 1 << 24,
  /** ShortConv taps (released 4). */
  convTaps: 1024,
} as const;

export type ConfigShape = "nested" | "flat";

type FieldType = "int" | "float" | "bool" | "layers";
type Scope = "text" | "linear";

interface FieldSpec {
  key: keyof ModelConfig;
  type: FieldType;
  /** Key in the nested shape, inside text_config ("text") or its linear_attn_config. */
  nested: { scope: Scope; name: string };
  /** Key at the root of the flat shape. */
  flat: string;
  /** Other spelling accepted in either shape (model.md 1.3). */
  alias?: string;
  /** Only three booleans (model.md 1.2) and the context length have a default. */
  fallback?: boolean | number;
  /** For "int": the largest value accepted (a `configCeilings` entry). */
  max?: number;
}

const text = (name: string) => ({ scope: "text" as const, name });
const linear = (name: string) => ({ scope: "linear" as const, name });

/** model.md table 1.2: the one list of config fields. */
export const configFields: readonly FieldSpec[] = [
  { key: "hiddenSize", type: "int", nested: text("hidden_size"), flat: "hidden_size", max: configCeilings.width },
  { key: "numLayers", type: "int", nested: text("num_hidden_layers"), flat: "num_hidden_layers", max: configCeilings.layers },
  { key: "vocabSize", type: "int", nested: text("vocab_size"), flat: "vocab_size", max: configCeilings.vocab },
  { key: "rmsNormEps", type: "float", nested: text("rms_norm_eps"), flat: "rms_norm_eps" },
  { key: "kdaNumHeads", type: "int", nested: linear("num_heads"), flat: "kda_num_heads", max: configCeilings.width },
  { key: "kdaHeadDim", type: "int", nested: linear("head_dim"), flat: "kda_head_dim", max: configCeilings.width },
  { key: "shortConvKernel", type: "int", nested: linear("short_conv_kernel_size"), flat: "short_conv_kernel_size", max: configCeilings.convTaps },
  { key: "gateLowerBound", type: "float", nested: linear("gate_lower_bound"), flat: "gate_lower_bound" },
  { key: "numAttentionHeads", type: "int", nested: text("num_attention_heads"), flat: "num_attention_heads", max: configCeilings.width },
  { key: "qLoraRank", type: "int", nested: text("q_lora_rank"), flat: "q_lora_rank", max: configCeilings.width },
  { key: "kvLoraRank", type: "int", nested: text("kv_lora_rank"), flat: "kv_lora_rank", max: configCeilings.width },
  { key: "qkNopeHeadDim", type: "int", nested: text("qk_nope_head_dim"), flat: "qk_nope_head_dim", max: configCeilings.width },
  { key: "qkRopeHeadDim", type: "int", nested: text("qk_rope_head_dim"), flat: "qk_rope_head_dim", max: configCeilings.width },
  { key: "vHeadDim", type: "int", nested: text("v_head_dim"), flat: "v_head_dim", max: configCeilings.width },
  { key: "mlaUseOutputGate", type: "bool", nested: text("mla_use_output_gate"), flat: "mla_use_output_gate", fallback: true },
  { key: "numExperts", type: "int", nested: text("num_experts"), flat: "num_experts", max: configCeilings.experts },
  { key: "numExpertsPerToken", type: "int", nested: text("num_experts_per_token"), flat: "num_experts_per_token", max: configCeilings.experts },
  { key: "numSharedExperts", type: "int", nested: text("num_shared_experts"), flat: "num_shared_experts", max: configCeilings.experts },
  { key: "routedExpertHiddenSize", type: "int", nested: text("routed_expert_hidden_size"), flat: "routed_expert_hidden_size", max: configCeilings.width },
  { key: "moeIntermediateSize", type: "int", nested: text("moe_intermediate_size"), flat: "moe_intermediate_size", max: configCeilings.width },
  { key: "routedScalingFactor", type: "float", nested: text("routed_scaling_factor"), flat: "routed_scaling_factor" },
  { key: "moeRenormalize", type: "bool", nested: text("moe_renormalize"), flat: "moe_renormalize", fallback: true },
  { key: "latentMoeUseNorm", type: "bool", nested: text("latent_moe_use_norm"), flat: "latent_moe_use_norm", fallback: true },
  { key: "firstKDenseReplace", type: "int", nested: text("first_k_dense_replace"), flat: "first_k_dense_replace", max: configCeilings.layers },
  { key: "intermediateSize", type: "int", nested: text("intermediate_size"), flat: "intermediate_size", max: configCeilings.width },
  { key: "attnResBlockSize", type: "int", nested: text("attn_res_block_size"), flat: "attn_res_block_size", max: configCeilings.layers },
  { key: "situBeta", type: "float", nested: text("activation_situ_beta"), flat: "situ_beta", alias: "activation_situ_beta" },
  { key: "situLinearBeta", type: "float", nested: text("activation_situ_linear_beta"), flat: "situ_linear_beta", alias: "activation_situ_linear_beta" },
  { key: "fullAttnLayers", type: "layers", nested: linear("full_attn_layers"), flat: "full_attn_layers" },
  // Not in model.md's table: the request ceiling (runtime.md 1.6). Read strictly when present.
  { key: "maxPositionEmbeddings", type: "int", nested: text("max_position_embeddings"), flat: "max_position_embeddings", fallback: defaultContextLength, max: Number.MAX_SAFE_INTEGER },
];

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

function isObject(value: Json | undefined): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function jsonType(value: Json): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

/** Problems found while reading, reported together. */
class Problems {
  readonly missing: string[] = [];
  readonly other: string[] = [];

  get count(): number {
    return this.missing.length + this.other.length;
  }

  message(): string {
    const parts: string[] = [];
    if (this.missing.length > 0) parts.push(`missing ${this.missing.join(", ")}`);
    parts.push(...this.other);
    return parts.join("; ");
  }
}

/** Where each scope of fields lives in a parsed file. */
interface Layout {
  shape: ConfigShape;
  objects: Record<Scope, JsonObject>;
  prefix: Record<Scope, string>;
}

function layoutOf(root: JsonObject, problems: Problems): Layout {
  if (!("text_config" in root)) {
    return { shape: "flat", objects: { text: root, linear: root }, prefix: { text: "", linear: "" } };
  }
  const textConfig = root.text_config;
  if (!isObject(textConfig)) {
    problems.other.push(`text_config must be an object, got ${jsonType(textConfig ?? null)}`);
    return { shape: "nested", objects: { text: {}, linear: {} }, prefix: { text: "text_config.", linear: "" } };
  }
  const lac = textConfig.linear_attn_config;
  if (lac !== undefined && !isObject(lac)) {
    problems.other.push(`text_config.linear_attn_config must be an object, got ${jsonType(lac)}`);
  }
  return {
    shape: "nested",
    objects: { text: textConfig, linear: isObject(lac) ? lac : {} },
    prefix: { text: "text_config.", linear: "text_config.linear_attn_config." },
  };
}

function checkType(value: Json, type: FieldType, where: string, problems: Problems, max = Number.MAX_SAFE_INTEGER): boolean {
  const fail = (expected: string) => {
    problems.other.push(`${where} must be ${expected}, got ${jsonType(value)}${typeof value === "number" ? ` ${value}` : ""}`);
    return false;
  };
  switch (type) {
    case "int":
      if (!Number.isInteger(value)) return fail("an integer");
      if ((value as number) > max) {
        problems.other.push(`${where} is ${value}, more than k3 accepts (at most ${max})`);
        return false;
      }
      return true;
    case "float":
      return typeof value === "number" && Number.isFinite(value) ? true : fail("a number");
    case "bool":
      return typeof value === "boolean" ? true : fail("true or false");
    case "layers":
      if (!Array.isArray(value)) return fail("an array of one-based layer numbers");
      if (value.length === 0) return fail("a non-empty array");
      if (!value.every((v) => Number.isInteger(v))) {
        problems.other.push(`${where} must hold only integers (one-based layer numbers)`);
        return false;
      }
      return true;
  }
}

type FieldRead = { status: "ok"; value: Json } | { status: "missing" } | { status: "invalid" };

function readField(spec: FieldSpec, layout: Layout, problems: Problems): FieldRead {
  const scope = layout.shape === "nested" ? spec.nested.scope : "text";
  const object = layout.objects[scope];
  const primary = layout.shape === "nested" ? spec.nested.name : spec.flat;
  const names = spec.alias ? [primary, layout.shape === "nested" ? spec.flat : spec.alias] : [primary];
  const prefix = layout.prefix[scope];
  const found = names.filter((name) => name in object);
  if (found.length === 0) return { status: "missing" };
  const values = found.map((name) => object[name] as Json);
  if (found.length === 2 && JSON.stringify(values[0]) !== JSON.stringify(values[1])) {
    problems.other.push(`${prefix}${found[0]} and its alias ${prefix}${found[1]} disagree`);
    return { status: "invalid" };
  }
  const value = values[0] as Json;
  return checkType(value, spec.type, `${prefix}${found[0]}`, problems, spec.max) ? { status: "ok", value } : { status: "invalid" };
}

function where(spec: FieldSpec, layout: Layout): string {
  return layout.shape === "nested" ? `${layout.prefix[spec.nested.scope]}${spec.nested.name}` : spec.flat;
}

/** model.md 1.4: keys that, if they differed, would describe a model k3 does not implement. */
function checkOtherKeys(root: JsonObject, layout: Layout, config: ModelConfig, problems: Problems): string[] {
  const warnings: string[] = [];
  const textConfig = layout.objects.text;
  const lac = layout.objects.linear;
  const lacPrefix = layout.prefix.linear;
  const expectValue = (object: JsonObject, prefix: string, name: string, want: Json) => {
    if (name in object && object[name] !== want) {
      problems.other.push(`${prefix}${name} is ${shown(object[name])}; k3 implements only ${JSON.stringify(want)}`);
    }
  };
  expectValue(textConfig, layout.prefix.text, "num_nextn_predict_layers", 0);
  expectValue(textConfig, layout.prefix.text, "num_expert_group", 1);
  expectValue(textConfig, layout.prefix.text, "topk_group", 1);
  expectValue(textConfig, layout.prefix.text, "mla_use_nope", true);
  expectValue(textConfig, layout.prefix.text, "moe_layer_freq", 1);
  expectValue(lac, lacPrefix, "use_full_rank_gate", true);
  for (const [name, want] of [["hidden_act", "situ"], ["moe_router_activation_func", "sigmoid"]] as const) {
    if (name in textConfig && textConfig[name] !== want) {
      warnings.push(`${layout.prefix.text}${name} is ${shown(textConfig[name])}, expected ${JSON.stringify(want)}`);
    }
  }
  for (const [object, prefix] of [[textConfig, layout.prefix.text], [root, ""]] as const) {
    const quant = object.quantization_config;
    if (quant === undefined) continue;
    if (!isObject(quant)) {
      problems.other.push(`${prefix}quantization_config must be an object`);
    } else if ("group_size" in quant && quant.group_size !== 32) {
      problems.other.push(`${prefix}quantization_config.group_size is ${shown(quant.group_size)}; MXFP4 groups are 32`);
    }
  }
  if ("tie_word_embeddings" in textConfig && typeof textConfig.tie_word_embeddings !== "boolean") {
    problems.other.push(`${layout.prefix.text}tie_word_embeddings must be true or false`);
  }
  const kdaLayers = lac.kda_layers;
  const kdaName = layout.shape === "nested" ? `${lacPrefix}kda_layers` : "kda_layers";
  if (kdaLayers !== undefined && checkType(kdaLayers, "layers", kdaName, problems)) {
    const kda = new Set(kdaLayers as number[]);
    const mla = new Set(config.fullAttnLayers);
    const overlap = [...kda].filter((l) => mla.has(l));
    const all = new Set([...kda, ...mla]);
    const complete = all.size === config.numLayers && [...all].every((l) => l >= 1 && l <= config.numLayers);
    if (overlap.length > 0 || !complete || kda.size !== (kdaLayers as number[]).length) {
      problems.other.push(`${kdaName} and full_attn_layers must split 1..${config.numLayers} between them without overlap`);
    }
  }
  return warnings;
}

/** A value from the file as a message shows it: its JSON, cut after 40 characters. */
function shown(value: Json | undefined): string {
  const text = JSON.stringify(value) ?? "undefined";
  return text.length > 40 ? `${text.slice(0, 40)}...` : text;
}

/** Numbers for a message: the first few, and how many there are when that is not all. */
function listed(values: readonly number[]): string {
  return values.length > 8 ? `${values.slice(0, 8).join(", ")}, ... (${values.length} in all)` : values.join(", ");
}

/** A float k3 can hold as the f32 it computes with: finite there too. */
const finiteAsF32 = (value: number) => Number.isFinite(Math.fround(value));

/**
 * What each float field means bounds it (model.md sections 0 and 6). Outside `valid` a value
 * cannot be right (the model it describes computes nothing sensible) and is refused; outside
 * `usual` it is read, with a warning.
 */
const floatMeaning: readonly { key: keyof ModelConfig; valid: (v: number) => boolean; rule: string; usual: [number, number] }[] = [
  {
    key: "rmsNormEps", valid: (v) => v > 0 && v < 1 && Math.fround(v) > 0, usual: [1e-12, 1e-3],
    rule: "must be above 0 and below 1, and above 0 as a float32 (it is added to a mean square of order 1)",
  },
  {
    key: "gateLowerBound", valid: (v) => v < 0 && finiteAsF32(v), usual: [-50, -0.1],
    rule: "must be negative and finite as a float32 (the KDA log-decay lies in [gate_lower_bound, 0])",
  },
  {
    key: "routedScalingFactor", valid: (v) => v > 0 && finiteAsF32(v), usual: [1 / 16, 16],
    rule: "must be positive and finite as a float32 (it multiplies the routed experts' weights)",
  },
  { key: "situBeta", valid: (v) => v > 0 && finiteAsF32(v), usual: [0.1, 1000], rule: "must be positive and finite as a float32 (it is a tanh cap)" },
  { key: "situLinearBeta", valid: (v) => v > 0 && finiteAsF32(v), usual: [0.1, 1000], rule: "must be positive and finite as a float32 (it is a tanh cap)" },
];

/** The float fields' meanings: refusals into `problems`, the unusual as warnings. */
function checkMeaning(config: ModelConfig, layout: Layout, problems: Problems, warnings: string[]): void {
  for (const { key, valid, rule, usual } of floatMeaning) {
    const value = config[key] as number;
    const name = where(configFields.find((f) => f.key === key) as FieldSpec, layout);
    if (!valid(value)) problems.other.push(`${name} is ${value}; it ${rule}`);
    else if (value < usual[0] || value > usual[1]) warnings.push(`${name} is ${value}, outside the usual ${usual[0]}..${usual[1]}`);
  }
  if (config.attnResBlockSize > config.numLayers) {
    const name = where(configFields.find((f) => f.key === "attnResBlockSize") as FieldSpec, layout);
    warnings.push(`${name} ${config.attnResBlockSize} is more than the ${config.numLayers} layers: only layer 0 starts an AttnRes block`);
  }
}

/** model.md 1.5: refusals that need the whole struct. */
function checkConsistency(config: ModelConfig, layersName: string, problems: Problems): void {
  const c = config;
  const refuse = (message: string) => problems.other.push(message);
  if (c.numLayers <= 0) refuse(`num_hidden_layers must be positive, got ${c.numLayers}`);
  if (c.hiddenSize <= 0) refuse(`hidden_size must be positive, got ${c.hiddenSize}`);
  if (c.vocabSize <= 0) refuse(`vocab_size must be positive, got ${c.vocabSize}`);
  const layers = c.fullAttnLayers;
  const outside = layers.filter((l) => l < 1 || l > c.numLayers);
  if (outside.length > 0) refuse(`${layersName} has ${listed(outside)} outside 1..${c.numLayers} (the list is one-based)`);
  const seen = new Set<number>();
  const duplicates = new Set(layers.filter((l) => seen.size === seen.add(l).size));
  if (duplicates.size > 0) refuse(`${layersName} lists ${listed([...duplicates])} more than once`);
  if (layers.some((l, i) => i > 0 && l < (layers[i - 1] as number))) refuse(`${layersName} must be sorted ascending`);
  if (layers.length >= c.numLayers) refuse(`${layersName} leaves no KDA layer (${layers.length} of ${c.numLayers} layers)`);
  if (c.numExpertsPerToken < 1) refuse(`num_experts_per_token must be at least 1, got ${c.numExpertsPerToken}`);
  if (c.numExpertsPerToken > c.numExperts) {
    refuse(`num_experts_per_token (${c.numExpertsPerToken}) is larger than num_experts (${c.numExperts})`);
  }
  if (c.firstKDenseReplace < 0 || c.firstKDenseReplace > c.numLayers) {
    refuse(`first_k_dense_replace must be within 0..${c.numLayers}, got ${c.firstKDenseReplace}`);
  }
  if (c.attnResBlockSize <= 0) refuse(`attn_res_block_size must be positive, got ${c.attnResBlockSize}`);
  if (c.shortConvKernel < 1) refuse(`short_conv_kernel_size must be at least 1, got ${c.shortConvKernel}`);
  if (c.routedExpertHiddenSize % 32 !== 0) {
    refuse(`routed_expert_hidden_size (${c.routedExpertHiddenSize}) must be a multiple of 32 (MXFP4 groups)`);
  }
  if (c.moeIntermediateSize % 32 !== 0) {
    refuse(`moe_intermediate_size (${c.moeIntermediateSize}) must be a multiple of 32 (MXFP4 groups)`);
  }
  const positive: (keyof ModelConfig)[] = [
    "kdaNumHeads", "kdaHeadDim", "numAttentionHeads", "qLoraRank", "kvLoraRank", "qkNopeHeadDim",
    "vHeadDim", "numExperts", "routedExpertHiddenSize", "moeIntermediateSize", "intermediateSize", "maxPositionEmbeddings",
  ];
  for (const key of positive) {
    const spec = configFields.find((f) => f.key === key);
    if ((c[key] as number) <= 0) refuse(`${spec?.flat ?? key} must be positive, got ${c[key]}`);
  }
  if (c.qkRopeHeadDim < 0) refuse(`qk_rope_head_dim must not be negative, got ${c.qkRopeHeadDim}`);
  if (c.numSharedExperts < 0) refuse(`num_shared_experts must not be negative, got ${c.numSharedExperts}`);
  if (c.rmsNormEps <= 0) refuse(`rms_norm_eps must be positive, got ${c.rmsNormEps}`);
}

export interface LoadedConfig {
  config: ModelConfig;
  shape: ConfigShape;
  warnings: string[];
}

/** Parses config text already read from `path`; throws K3Error (exit 2) on any problem. */
export function parseConfig(textContent: string, path: string): LoadedConfig {
  const fail = (detail: string): never => {
    throw new K3Error(ExitCode.usage, `${path}: the model config could not be read with confidence: ${detail}`);
  };
  let root: Json;
  try {
    root = parseJsonData(textContent) as Json;
  } catch (error) {
    if (error instanceof JsonSyntaxError) return fail(jsonRefusal(error));
    throw error;
  }
  if (!isObject(root)) return fail("the top level must be a JSON object");
  const problems = new Problems();
  const layout = layoutOf(root, problems);
  const values: Partial<Record<keyof ModelConfig, Json>> = {};
  for (const spec of configFields) {
    const read = readField(spec, layout, problems);
    if (read.status === "ok") values[spec.key] = read.value;
    else if (read.status === "missing" && spec.fallback !== undefined) values[spec.key] = spec.fallback;
    else if (read.status === "missing") problems.missing.push(where(spec, layout));
  }
  const tie = layout.objects.text.tie_word_embeddings;
  values.tieWordEmbeddings = typeof tie === "boolean" ? tie : false;
  if (problems.count > 0) return fail(problems.message());
  const config = values as unknown as ModelConfig;
  const warnings = checkOtherKeys(root, layout, config, problems);
  const layersSpec = configFields.find((f) => f.key === "fullAttnLayers") as FieldSpec;
  checkConsistency(config, where(layersSpec, layout), problems);
  checkMeaning(config, layout, problems, warnings);
  if (problems.count > 0) return fail(problems.message());
  return { config, shape: layout.shape, warnings };
}

/** Reads and validates the config file at `path` (at most `inputLimits.configBytes`). */
export function loadConfig(path: string): LoadedConfig {
  const bytes = readCapped(path, inputLimits.configBytes, "the model config", ExitCode.usage);
  let textContent: string;
  try {
    textContent = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new K3Error(ExitCode.usage, `${path}: the model config could not be read with confidence: not valid UTF-8`);
  }
  return parseConfig(textContent, path);
}
