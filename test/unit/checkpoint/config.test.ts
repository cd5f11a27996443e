import { describe, expect, test } from "bun:test";
import { defaultContextLength, parseConfig, type ModelConfig } from "../../../src/checkpoint/config.ts";
import { K3Error } from "../../../src/errors.ts";
import { configJson } from "../../../tools/checkpoint/writer.ts";
import { tinyConfig } from "../../support/configs.ts";

type Json = Record<string, unknown>;

const flat = (): Json => JSON.parse(configJson(tinyConfig(), "flat"));
const nested = (): Json => JSON.parse(configJson(tinyConfig(), "nested"));
const textOf = (root: Json) => root.text_config as Json;
const linearOf = (root: Json) => textOf(root).linear_attn_config as Json;

function refusal(root: unknown): K3Error {
  try {
    parseConfig(JSON.stringify(root), "cfg.json");
  } catch (error) {
    if (error instanceof K3Error) return error;
    throw error;
  }
  throw new Error("config was accepted");
}

const prefix = "cfg.json: the model config could not be read with confidence: ";

describe("config reader", () => {
  test("nested and flat shapes give the same struct", () => {
    const a = parseConfig(configJson(tinyConfig(), "flat"), "flat.json");
    const b = parseConfig(configJson(tinyConfig(), "nested"), "nested.json");
    expect(a.shape).toBe("flat");
    expect(b.shape).toBe("nested");
    expect(a.config).toEqual(tinyConfig());
    expect(b.config).toEqual(a.config);
  });

  test("the three boolean defaults apply only to the booleans", () => {
    const root = flat();
    delete root.mla_use_output_gate;
    delete root.moe_renormalize;
    delete root.latent_moe_use_norm;
    delete root.tie_word_embeddings;
    const { config } = parseConfig(JSON.stringify(root), "cfg.json");
    expect(config.mlaUseOutputGate).toBe(true);
    expect(config.moeRenormalize).toBe(true);
    expect(config.latentMoeUseNorm).toBe(true);
    expect(config.tieWordEmbeddings).toBe(false);
  });

  test("max_position_embeddings: read in both shapes, 1,048,576 when absent, refused unless a positive integer", () => {
    const root = flat();
    expect(root.max_position_embeddings).toBe(defaultContextLength);
    root.max_position_embeddings = 4096;
    expect(parseConfig(JSON.stringify(root), "cfg.json").config.maxPositionEmbeddings).toBe(4096);
    const n = nested();
    textOf(n).max_position_embeddings = 131_072;
    expect(parseConfig(JSON.stringify(n), "cfg.json").config.maxPositionEmbeddings).toBe(131_072);
    delete root.max_position_embeddings;
    delete textOf(n).max_position_embeddings;
    expect(parseConfig(JSON.stringify(root), "cfg.json").config.maxPositionEmbeddings).toBe(1_048_576);
    expect(parseConfig(JSON.stringify(n), "cfg.json").config.maxPositionEmbeddings).toBe(1_048_576);
    expect(defaultContextLength).toBe(1_048_576);
    const refused = (value: unknown) => refusal({ ...flat(), max_position_embeddings: value }).message;
    expect(refused(0)).toBe(`${prefix}max_position_embeddings must be positive, got 0`);
    expect(refused(-8)).toBe(`${prefix}max_position_embeddings must be positive, got -8`);
    expect(refused(4096.5)).toBe(`${prefix}max_position_embeddings must be an integer, got number 4096.5`);
    expect(refused("4096")).toBe(`${prefix}max_position_embeddings must be an integer, got string`);
    expect(refused(null)).toBe(`${prefix}max_position_embeddings must be an integer, got null`);
    // nested: the key lives in text_config, named by its full path
    const wrong = nested();
    textOf(wrong).max_position_embeddings = true;
    expect(refusal(wrong).message).toBe(`${prefix}text_config.max_position_embeddings must be an integer, got boolean`);
  });

  test("every missing field is listed in one message (flat)", () => {
    const root = flat();
    delete root.hidden_size;
    delete root.kda_num_heads;
    delete root.situ_beta;
    const error = refusal(root);
    expect(error.exitCode).toBe(2);
    expect(error.message).toBe(`${prefix}missing hidden_size, kda_num_heads, situ_beta`);
  });

  test("missing nested fields are named by their full path", () => {
    const root = nested();
    delete linearOf(root).full_attn_layers;
    delete linearOf(root).kda_layers;
    delete textOf(root).vocab_size;
    expect(refusal(root).message).toBe(
      `${prefix}missing text_config.vocab_size, text_config.linear_attn_config.full_attn_layers`,
    );
  });

  test("a nested config whose linear_attn_config is absent does not fall back to anything", () => {
    const root = nested();
    delete textOf(root).linear_attn_config;
    expect(refusal(root).message).toBe(
      `${prefix}missing text_config.linear_attn_config.num_heads, text_config.linear_attn_config.head_dim, ` +
        "text_config.linear_attn_config.short_conv_kernel_size, text_config.linear_attn_config.gate_lower_bound, " +
        "text_config.linear_attn_config.full_attn_layers",
    );
  });

  test("wrong types are refused with what was found", () => {
    const root = flat();
    root.hidden_size = "128";
    root.rms_norm_eps = null;
    root.num_experts = 8.5;
    root.moe_renormalize = 1;
    expect(refusal(root).message).toBe(
      `${prefix}hidden_size must be an integer, got string; rms_norm_eps must be a number, got null; ` +
        "num_experts must be an integer, got number 8.5; moe_renormalize must be true or false, got number 1",
    );
  });

  test("missing and mistyped fields are reported together", () => {
    const root = flat();
    delete root.vocab_size;
    root.q_lora_rank = "64";
    expect(refusal(root).message).toBe(`${prefix}missing vocab_size; q_lora_rank must be an integer, got string`);
  });

  const layerCases: [string, unknown, string][] = [
    ["zero-based misreading (0)", [0, 4, 8, 12], "full_attn_layers has 0 outside 1..13 (the list is one-based)"],
    ["past the last layer (L + 1)", [4, 8, 12, 14], "full_attn_layers has 14 outside 1..13 (the list is one-based)"],
    ["duplicates", [4, 8, 8, 13], "full_attn_layers lists 8 more than once"],
    ["unsorted", [8, 4, 12, 13], "full_attn_layers must be sorted ascending"],
    ["empty", [], "full_attn_layers must be a non-empty array, got array"],
    ["not an array", 4, "full_attn_layers must be an array of one-based layer numbers, got number 4"],
    ["non-integer entries", [4, "8"], "full_attn_layers must hold only integers (one-based layer numbers)"],
    ["no KDA layer left", Array.from({ length: 13 }, (_, i) => i + 1), "full_attn_layers leaves no KDA layer (13 of 13 layers)"],
  ];
  for (const [name, value, message] of layerCases) {
    test(`full_attn_layers: ${name}`, () => {
      const root = flat();
      root.full_attn_layers = value;
      const error = refusal(root);
      expect(error.exitCode).toBe(2);
      expect(error.message).toBe(prefix + message);
    });
  }

  test("a nested full_attn_layers refusal names the nested path", () => {
    const root = nested();
    linearOf(root).full_attn_layers = [0, 4, 8, 12];
    delete linearOf(root).kda_layers;
    expect(refusal(root).message).toBe(
      `${prefix}text_config.linear_attn_config.full_attn_layers has 0 outside 1..13 (the list is one-based)`,
    );
  });

  const consistency: [string, (c: Json) => void, string][] = [
    ["top-k larger than the expert count", (c) => { c.num_experts_per_token = 9; }, "num_experts_per_token (9) is larger than num_experts (8)"],
    ["top-k of zero", (c) => { c.num_experts_per_token = 0; }, "num_experts_per_token must be at least 1, got 0"],
    ["no layers", (c) => { c.num_hidden_layers = 0; c.full_attn_layers = [1]; }, "num_hidden_layers must be positive, got 0; full_attn_layers has 1 outside 1..0 (the list is one-based); full_attn_layers leaves no KDA layer (1 of 0 layers); first_k_dense_replace must be within 0..0, got 1"],
    ["zero block size", (c) => { c.attn_res_block_size = 0; }, "attn_res_block_size must be positive, got 0"],
    ["zero conv taps", (c) => { c.short_conv_kernel_size = 0; }, "short_conv_kernel_size must be at least 1, got 0"],
    ["latent width not whole MXFP4 groups", (c) => { c.routed_expert_hidden_size = 48; }, "routed_expert_hidden_size (48) must be a multiple of 32 (MXFP4 groups)"],
    ["expert width not whole MXFP4 groups", (c) => { c.moe_intermediate_size = 48; }, "moe_intermediate_size (48) must be a multiple of 32 (MXFP4 groups)"],
    ["dense prefix beyond the model", (c) => { c.first_k_dense_replace = 14; }, "first_k_dense_replace must be within 0..13, got 14"],
    ["negative vocabulary", (c) => { c.vocab_size = -1; }, "vocab_size must be positive, got -1"],
  ];
  for (const [name, mutate, message] of consistency) {
    test(`refuses ${name}`, () => {
      const root = flat();
      mutate(root);
      expect(refusal(root).message).toBe(prefix + message);
    });
  }

  // Issue 15, defects 5 and 10: numbers that would size tables without bound, and values no model can mean.
  const meaningless: [string, (c: Json) => void, string][] = [
    ["a million layers", (c) => { c.num_hidden_layers = 1e6; }, "num_hidden_layers is 1000000, more than k3 accepts (at most 1024)"],
    ["2^31 experts", (c) => { c.num_experts = 2 ** 31; }, "num_experts is 2147483648, more than k3 accepts (at most 65536)"],
    ["an AttnRes block of 1e308 layers", (c) => { c.attn_res_block_size = 1e308; }, "attn_res_block_size is 1e+308, more than k3 accepts (at most 1024)"],
    ["a width past 2^53", (c) => { c.hidden_size = 2 ** 60; }, `hidden_size is ${2 ** 60}, more than k3 accepts (at most ${1 << 20})`],
    ["routed_scaling_factor 0", (c) => { c.routed_scaling_factor = 0; }, "routed_scaling_factor is 0; it must be positive and finite as a float32 (it multiplies the routed experts' weights)"],
    ["a negative routed_scaling_factor", (c) => { c.routed_scaling_factor = -1; }, "routed_scaling_factor is -1; it must be positive and finite as a float32 (it multiplies the routed experts' weights)"],
    ["rms_norm_eps 2^63", (c) => { c.rms_norm_eps = 2 ** 63; }, "rms_norm_eps is 9223372036854776000; it must be above 0 and below 1, and above 0 as a float32 (it is added to a mean square of order 1)"],
    ["an rms_norm_eps that is 0 as a float32", (c) => { c.rms_norm_eps = 1e-50; }, "rms_norm_eps is 1e-50; it must be above 0 and below 1, and above 0 as a float32 (it is added to a mean square of order 1)"],
    ["a negative SiTU beta", (c) => { c.situ_beta = -4; }, "situ_beta is -4; it must be positive and finite as a float32 (it is a tanh cap)"],
    ["a SiTU linear beta beyond float32", (c) => { c.situ_linear_beta = 1e39; }, "situ_linear_beta is 1e+39; it must be positive and finite as a float32 (it is a tanh cap)"],
    ["gate_lower_bound 1e308", (c) => { c.gate_lower_bound = 1e308; }, "gate_lower_bound is 1e+308; it must be negative and finite as a float32 (the KDA log-decay lies in [gate_lower_bound, 0])"],
    ["gate_lower_bound 0", (c) => { c.gate_lower_bound = 0; }, "gate_lower_bound is 0; it must be negative and finite as a float32 (the KDA log-decay lies in [gate_lower_bound, 0])"],
    ["a million full_attn_layers entries", (c) => { c.full_attn_layers = Array.from({ length: 1_000_000 }, (_, i) => (i % 20) + 1); }, "full_attn_layers has 14, 15, 16, 17, 18, 19, 20, 14, ... (350000 in all) outside 1..13 (the list is one-based); full_attn_layers lists 1, 2, 3, 4, 5, 6, 7, 8, ... (20 in all) more than once; full_attn_layers must be sorted ascending; full_attn_layers leaves no KDA layer (1000000 of 13 layers)"],
  ];
  for (const [name, mutate, message] of meaningless) {
    test(`refuses ${name}, at once`, () => {
      const root = flat();
      mutate(root);
      const started = performance.now();
      expect(refusal(root).message).toBe(prefix + message);
      expect(performance.now() - started).toBeLessThan(1000);
    });
  }

  test("merely unusual values are read, with a warning", () => {
    const root = flat();
    root.routed_scaling_factor = 100;
    root.attn_res_block_size = 20;
    root.rms_norm_eps = 0.01;
    expect(parseConfig(JSON.stringify(root), "cfg.json").warnings).toEqual([
      "rms_norm_eps is 0.01, outside the usual 1e-12..0.001",
      "routed_scaling_factor is 100, outside the usual 0.0625..16",
      "attn_res_block_size 20 is more than the 13 layers: only layer 0 starts an AttnRes block",
    ]);
    expect(parseConfig(configJson(tinyConfig(), "flat"), "cfg.json").warnings).toEqual([]);
  });

  test("a key given twice, however spelled, and a value nested too deep are refused (exit 2)", () => {
    const text = configJson(tinyConfig(), "flat").replace('"vocab_size": 256', '"vocab_size": 256, "vocab\u005fsize": 300');
    expect(() => parseConfig(text, "cfg.json")).toThrow(`${prefix}4:22: the key "vocab_size" appears twice in one object`);
    let error: unknown;
    try {
      parseConfig(`{"x": ${"[".repeat(100_000)}${"]".repeat(100_000)}}`, "cfg.json");
    } catch (caught) {
      error = caught;
    }
    expect((error as K3Error).exitCode).toBe(2);
    expect((error as K3Error).message).toBe(`${prefix}1:262: nested deeper than 256 levels`);
  });

  test("aliases: both spellings agreeing is fine, disagreeing is refused", () => {
    const root = flat();
    root.activation_situ_beta = 4.0;
    expect(parseConfig(JSON.stringify(root), "cfg.json").config.situBeta).toBe(4);
    root.activation_situ_beta = 5.0;
    expect(refusal(root).message).toBe(`${prefix}situ_beta and its alias activation_situ_beta disagree`);
  });

  test("kda_layers must be the complement of full_attn_layers", () => {
    const root = nested();
    linearOf(root).kda_layers = [1, 2, 3, 5, 6, 7, 9, 10, 11, 12];
    expect(refusal(root).message).toBe(
      `${prefix}text_config.linear_attn_config.kda_layers and full_attn_layers must split 1..13 between them without overlap`,
    );
  });

  const otherKeys: [string, (root: Json) => void, string][] = [
    ["a draft layer", (r) => { textOf(r).num_nextn_predict_layers = 1; }, "text_config.num_nextn_predict_layers is 1; k3 implements only 0"],
    ["grouped routing", (r) => { textOf(r).num_expert_group = 8; }, "text_config.num_expert_group is 8; k3 implements only 1"],
    ["a low-rank KDA gate", (r) => { linearOf(r).use_full_rank_gate = false; }, "text_config.linear_attn_config.use_full_rank_gate is false; k3 implements only true"],
    ["MXFP4 group size 16", (r) => { r.quantization_config = { group_size: 16 }; }, "quantization_config.group_size is 16; MXFP4 groups are 32"],
    ["MoE every other layer", (r) => { textOf(r).moe_layer_freq = 2; }, "text_config.moe_layer_freq is 2; k3 implements only 1"],
  ];
  for (const [name, mutate, message] of otherKeys) {
    test(`refuses ${name}`, () => {
      const root = nested();
      mutate(root);
      expect(refusal(root).message).toBe(prefix + message);
    });
  }

  test("not JSON and not an object are refused", () => {
    expect(() => parseConfig("{", "cfg.json")).toThrow(/^cfg\.json: the model config could not be read with confidence: not valid JSON/);
    expect(refusal([1, 2]).message).toBe(`${prefix}the top level must be a JSON object`);
  });

  test("the released values round-trip through the nested shape", () => {
    const released: ModelConfig = {
      ...tinyConfig(), hiddenSize: 7168, numLayers: 93, vocabSize: 163840, kdaNumHeads: 96, kdaHeadDim: 128,
      numAttentionHeads: 96, qLoraRank: 1536, kvLoraRank: 512, qkNopeHeadDim: 128, qkRopeHeadDim: 64, vHeadDim: 128,
      numExperts: 896, numExpertsPerToken: 16, routedExpertHiddenSize: 3584, moeIntermediateSize: 3072,
      intermediateSize: 33792, attnResBlockSize: 12,
      fullAttnLayers: [...Array.from({ length: 23 }, (_, i) => 4 * (i + 1)), 93],
    };
    const { config } = parseConfig(configJson(released, "nested"), "released.json");
    expect(config).toEqual(released);
    expect(config.fullAttnLayers.slice(-2)).toEqual([92, 93]);
  });
});
