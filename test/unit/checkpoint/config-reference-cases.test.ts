/** The config and tensor-name cases of the independent reference (test/fixtures/ops). */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseConfig } from "../../../src/checkpoint/config.ts";
import { attentionKind, ffnKind } from "../../../src/checkpoint/tensor-names.ts";
import { K3Error } from "../../../src/errors.ts";
import { fixturesDir } from "../../support/fixtures.ts";
import { classifyName } from "../../support/tensor-classes.ts";

interface ConfigCase {
  name: string;
  expect: "accept" | "refuse";
  config: unknown;
  dims?: Record<string, number | boolean>;
  layer_kinds?: string;
  mla_layers?: number[];
  dense_layers?: number[];
  attn_res_boundaries?: number[];
}

const load = <T>(file: string): T => JSON.parse(readFileSync(join(fixturesDir, "ops", file), "utf8")) as T;

describe("config cases of the reference", () => {
  const { cases } = load<{ cases: ConfigCase[] }>("config.json");
  for (const c of cases) {
    test(`${c.name}: ${c.expect}`, () => {
      const parse = () => parseConfig(JSON.stringify(c.config), `${c.name}.json`);
      if (c.expect === "refuse") {
        expect(parse).toThrow(K3Error);
        return;
      }
      const { config } = parse();
      const layers = Array.from({ length: config.numLayers }, (_, l) => l);
      expect(layers.map((l) => (attentionKind(config, l) === "mla" ? "M" : "K")).join("")).toBe(c.layer_kinds!);
      expect(layers.filter((l) => attentionKind(config, l) === "mla")).toEqual(c.mla_layers!);
      expect(layers.filter((l) => ffnKind(config, l) === "dense")).toEqual(c.dense_layers!);
      expect(layers.filter((l) => l % config.attnResBlockSize === 0)).toEqual(c.attn_res_boundaries!);
      const d = c.dims!;
      expect([config.hiddenSize, config.numLayers, config.vocabSize, Math.fround(config.rmsNormEps)]).toEqual([d.E, d.L, d.V, d.eps] as number[]);
      expect([config.kdaNumHeads, config.kdaHeadDim, config.shortConvKernel, config.gateLowerBound]).toEqual([d.Hk, d.D, d.Kc, d.gmin] as number[]);
      expect([config.numAttentionHeads, config.qLoraRank, config.kvLoraRank, config.qkNopeHeadDim, config.qkRopeHeadDim, config.vHeadDim])
        .toEqual([d.H, d.Rq, d.Rkv, d.dn, d.dr, d.dv] as number[]);
      expect([config.numExperts, config.numExpertsPerToken, config.numSharedExperts, config.routedExpertHiddenSize, config.moeIntermediateSize])
        .toEqual([d.Ne, d.k, d.Ns, d.Lam, d.I] as number[]);
      expect([config.routedScalingFactor, config.firstKDenseReplace, config.intermediateSize, config.attnResBlockSize, config.situBeta, config.situLinearBeta])
        .toEqual([d.rho, d.F, d.Id, d.S, d.beta1, d.beta2] as number[]);
      expect([config.mlaUseOutputGate, config.moeRenormalize, config.latentMoeUseNorm]).toEqual([d.mla_gate, d.renorm, d.latent_norm] as boolean[]);
    });
  }
});

describe("tensor-name residency cases of the reference", () => {
  const { cases } = load<{ cases: { name: string; class: string }[] }>("tensor_names.json");
  test(`${cases.length} names classified as the reference does`, () => {
    for (const c of cases) expect(`${c.name}: ${classifyName(c.name)}`).toBe(`${c.name}: ${c.class}`);
  });
});
