/**
 * Seeded sampling (chat.md 3.4): greedy at temperature 0 bit for bit and without randomness, the
 * generator's known answers, reproducible seeds, the distribution of every knob combination
 * checked by a chi-square test on 20,000 seeded draws, and the same test rejecting samplers that
 * apply the knobs in a wrong order (written here only, as counterfactuals).
 */
import { describe, expect, test } from "bun:test";
import { K3Error } from "../../../src/errors.ts";
import { decode } from "../../../src/decode/loop.ts";
import { orderByProbability } from "../../../src/decode/probability-order.ts";
import { SplitMix64, type UniformSource } from "../../../src/decode/rng.ts";
import { argmax, greedy, type Sampler } from "../../../src/decode/sampler.ts";
import { type Candidates, createSampler, drawFrom, samplingDistribution } from "../../../src/decode/sampling.ts";
import {
  choiceSampling, DEFAULT_SEED, resolveSampling, type SamplingOptions, samplingDefaults, validateSampling,
} from "../../../src/decode/sampling-options.ts";

const DRAWS = 20_000;
const SEED = 20261201;

/**
 * Chi-square critical values at p = 0.001 by degrees of freedom (standard table): a correct
 * sampler fails a given case with probability 1 in 1000, and the seeds are fixed, so the outcome
 * is the same on every run.
 */
const CRITICAL_0_001 = [NaN, 10.828, 13.816, 16.266, 18.467, 20.515, 22.458, 24.322, 26.124, 27.877, 29.588];

/** Eight ids whose probabilities at temperature 1 are these weights, placed out of id order. */
const WEIGHTS = [0.12, 0.04, 0.2, 0.09, 0.03, 0.3, 0.07, 0.15];
const LOGITS = Float32Array.from(WEIGHTS, Math.log);

const base: SamplingOptions = { ...samplingDefaults.chat, topP: 1, seed: SEED };
const knobs = (over: Partial<SamplingOptions>): SamplingOptions => ({ ...base, ...over });

/** The reference distribution, computed the plain way: an id -> probability map. */
function reference(logits: Float32Array, o: SamplingOptions, counts: ReadonlyMap<number, number> = new Map()): Map<number, number> {
  const scores = Array.from(logits, (l, id) => (l - (counts.get(id) ?? 0) * o.frequencyPenalty - ((counts.get(id) ?? 0) > 0 ? o.presencePenalty : 0)) / o.temperature);
  const top = Math.max(...scores);
  const exps = scores.map((s) => Math.exp(s - top));
  const sum = exps.reduce((a, b) => a + b, 0);
  let list = exps.map((e, id) => ({ id, p: e / sum })).sort((a, b) => b.p - a.p || a.id - b.id);
  if (o.topK > 0) list = list.slice(0, o.topK);
  if (o.topP < 1) {
    const mass = list.reduce((a, { p }) => a + p, 0);
    let running = 0;
    const cut = list.findIndex(({ p }) => (running += p) >= o.topP * mass);
    list = list.slice(0, cut < 0 ? list.length : cut + 1);
  }
  if (o.minP > 0) list = list.filter(({ p }, i) => i === 0 || p >= o.minP * list[0]!.p);
  const kept = list.reduce((a, { p }) => a + p, 0);
  return new Map(list.map(({ id, p }) => [id, p / kept]));
}

function tally(draw: () => number): Map<number, number> {
  const seen = new Map<number, number>();
  for (let i = 0; i < DRAWS; i++) {
    const id = draw();
    seen.set(id, (seen.get(id) ?? 0) + 1);
  }
  return seen;
}

/** Pearson's statistic against `expected`; a draw of an id the distribution excludes is Infinity. */
function chiSquare(observed: ReadonlyMap<number, number>, expected: ReadonlyMap<number, number>): { statistic: number; df: number } {
  let statistic = 0;
  for (const [id, count] of observed) if (!expected.has(id) && count > 0) return { statistic: Infinity, df: expected.size - 1 };
  for (const [id, p] of expected) {
    const e = p * DRAWS;
    const o = observed.get(id) ?? 0;
    statistic += (o - e) ** 2 / e;
  }
  return { statistic, df: expected.size - 1 };
}

function rejects(observed: ReadonlyMap<number, number>, expected: ReadonlyMap<number, number>): boolean {
  const { statistic, df } = chiSquare(observed, expected);
  if (df === 0) return statistic !== 0;
  const critical = CRITICAL_0_001[df];
  if (critical === undefined) throw new Error(`no critical value for ${df} degrees of freedom`);
  return statistic > critical;
}

function sampleMany(sampler: Sampler, logits: Float32Array = LOGITS): Map<number, number> {
  return tally(() => sampler.choose(logits));
}

class CountingSource implements UniformSource {
  draws = 0;
  private readonly inner = new SplitMix64(7);
  nextUniform(): number {
    this.draws++;
    return this.inner.nextUniform();
  }
}

describe("SplitMix64", () => {
  test("known answers (Vigna's reference generator)", () => {
    const zero = new SplitMix64(0);
    expect([zero.nextU64(), zero.nextU64(), zero.nextU64()]).toEqual([0xe220a8397b1dcdafn, 0x6e789e6aa1b965f4n, 0x06c45d188009454fn]);
    // Negative seeds are taken modulo 2^64: -1 is 2^64 - 1.
    expect(new SplitMix64(-1).nextU64()).toBe(0xe4d971771b652c20n);
    expect(new SplitMix64(2n ** 64n - 1n).nextU64()).toBe(0xe4d971771b652c20n);
    expect(() => new SplitMix64(0.5)).toThrow(RangeError);
  });

  test("uniforms are the top 53 bits, in [0, 1)", () => {
    const a = new SplitMix64(0);
    const b = new SplitMix64(0);
    for (let i = 0; i < 1000; i++) {
      const u = a.nextUniform();
      expect(u).toBe(Number(b.nextU64() >> 11n) / 2 ** 53);
      expect(u >= 0 && u < 1).toBe(true);
    }
  });
});

describe("temperature 0 is greedy", () => {
  const rows = [
    Float32Array.of(1, 3, 3, 2),
    Float32Array.of(NaN, -1, -1),
    Float32Array.of(-Infinity, -Infinity),
    Float32Array.of(0, 5, 5, Infinity, Infinity),
    Float32Array.from({ length: 1000 }, (_, i) => Math.fround(Math.sin(i * 12.9898) * 43758.5453) % 7),
  ];

  test("the sampler is `greedy` itself, whatever the other knobs say", () => {
    const wild = knobs({ temperature: 0, topK: 1, topP: 0.1, minP: 0.9, presencePenalty: 2, frequencyPenalty: -2, seed: 99 });
    expect(createSampler(wild)).toBe(greedy);
    expect(createSampler(samplingDefaults.run)).toBe(greedy);
    for (const row of rows) expect(createSampler(wild).choose(row)).toBe(argmax(row));
  });

  test("no randomness is consumed, and the distribution is a point mass on argmax", () => {
    const source = new CountingSource();
    const sampler = createSampler(knobs({ temperature: 0 }), source);
    for (const row of rows) {
      expect(sampler.choose(row)).toBe(argmax(row));
      const d = samplingDistribution(row, knobs({ temperature: 0 }));
      expect([Array.from(d.ids), Array.from(d.probs)]).toEqual([[argmax(row)], [1]]);
    }
    expect(source.draws).toBe(0);
  });
});

describe("seeds and draws", () => {
  test("choice i of n is sampled with the request's seed plus i, wrapping past 2^53 - 1 to 0", () => {
    const seeds = (seed: number) => [0, 1, 2, 3].map((i) => choiceSampling(knobs({ seed }), i).seed);
    expect(seeds(7)).toEqual([7, 8, 9, 10]);
    expect(seeds(2 ** 53 - 2)).toEqual([2 ** 53 - 2, 2 ** 53 - 1, 0, 1]);
    expect(choiceSampling(knobs({ seed: 7, temperature: 0.5 }), 1)).toEqual(knobs({ seed: 8, temperature: 0.5 }));
  });

  test("exactly one draw per sampled token, even when only one id can win", () => {
    const source = new CountingSource();
    const sampler = createSampler(knobs({ topK: 1 }), source);
    sampler.choose(LOGITS);
    sampler.choose(Float32Array.of(-Infinity, -Infinity, -Infinity));
    sampler.choose(Float32Array.of(0, Infinity, 1));
    createSampler(knobs({ temperature: 0.3 }), source).choose(LOGITS);
    expect(source.draws).toBe(4);
  });

  test("the same seed reproduces the same ids; another seed does not", () => {
    const run = (seed: number): number[] => {
      const sampler = createSampler(knobs({ seed }));
      return Array.from({ length: 300 }, () => sampler.choose(LOGITS));
    };
    expect(run(42)).toEqual(run(42));
    expect(run(42)).not.toEqual(run(43));
    const byDefault = createSampler({ ...samplingDefaults.chat, topP: 1 });
    expect(Array.from({ length: 300 }, () => byDefault.choose(LOGITS))).toEqual(run(DEFAULT_SEED));
  });

  test("the f64 softmax subtracts the maximum: huge and infinite logits stay finite", () => {
    const d = samplingDistribution(Float32Array.of(3e38, 3e38 - 2e31, -3e38), knobs({ temperature: 0.01 }));
    expect(Array.from(d.ids)).toEqual([0]);
    const inf = samplingDistribution(Float32Array.of(1, Infinity, NaN, Infinity), knobs({}));
    expect([Array.from(inf.ids), Array.from(inf.probs)]).toEqual([[1, 3], [0.5, 0.5]]);
    const none = samplingDistribution(Float32Array.of(NaN, -Infinity), knobs({}));
    expect(Array.from(none.ids)).toEqual([argmax(Float32Array.of(NaN, -Infinity))]);
  });

  test("candidates are sorted by probability, ties by the lower id", () => {
    const d = samplingDistribution(Float32Array.of(1, 2, 2, 0, 2, 1), knobs({}));
    expect(Array.from(d.ids)).toEqual([1, 2, 4, 0, 5, 3]);
    expect(drawFrom(d, 0)).toBe(1);
    expect(drawFrom(d, 1 - 2 ** -53)).toBe(3);
  });

  test("the radix order equals a comparator sort, ties and subnormals included", () => {
    const random = new SplitMix64(5);
    const probs = Float64Array.from({ length: 50_000 }, (_, i) => {
      const u = random.nextUniform();
      if (i % 7 === 0) return 5e-324 * (1 + (i % 3));
      return i % 3 === 0 ? Math.round(u * 20) / 20 + 0.01 : u * 2 ** -(i % 1100);
    });
    const ids = Uint32Array.from({ length: probs.length }, (_, i) => i);
    const expected = Array.from(ids).sort((a, b) => probs[b]! - probs[a]! || a - b);
    expect(Array.from(orderByProbability(probs, ids))).toEqual(expected);
  });
});

/** Knob combinations; each is checked against the reference and by a chi-square test. */
const combinations: [string, Partial<SamplingOptions>][] = [
  ["temperature 1", {}],
  ["temperature 0.5", { temperature: 0.5 }],
  ["temperature 1.7", { temperature: 1.7 }],
  ["top-k 3", { topK: 3 }],
  ["top-p 0.6", { topP: 0.6 }],
  ["top-p 0.95 (the chat default)", { topP: 0.95 }],
  ["min-p 0.3", { minP: 0.3 }],
  ["top-k 5 + top-p 0.7", { topK: 5, topP: 0.7 }],
  ["top-p 0.9 + min-p 0.25", { topP: 0.9, minP: 0.25 }],
  ["temperature 0.7 + top-k 6 + top-p 0.8 + min-p 0.2", { temperature: 0.7, topK: 6, topP: 0.8, minP: 0.2 }],
  ["temperature 1.5 + top-k 4 + min-p 0.5", { temperature: 1.5, topK: 4, minP: 0.5 }],
  ["top-k 1", { topK: 1 }],
];

describe(`distributions: ${DRAWS} seeded draws pass chi-square at p = 0.001`, () => {
  for (const [name, over] of combinations) {
    test(name, () => {
      const options = knobs(over);
      const expected = reference(LOGITS, options);
      const d = samplingDistribution(LOGITS, options);
      expect(Array.from(d.ids)).toEqual([...expected.keys()]);
      d.ids.forEach((id, i) => expect(d.probs[i]!).toBeCloseTo(expected.get(id)!, 12));
      const observed = sampleMany(createSampler(options));
      const { statistic, df } = chiSquare(observed, expected);
      if (df > 0) expect(statistic).toBeLessThan(CRITICAL_0_001[df]!);
      expect(rejects(observed, expected)).toBe(false);
    });
  }

  test("the test has teeth: a uniform sampler over the same support is rejected", () => {
    const expected = reference(LOGITS, knobs({}));
    const random = new SplitMix64(SEED);
    const observed = tally(() => Math.floor(random.nextUniform() * WEIGHTS.length));
    expect(rejects(observed, expected)).toBe(true);
  });
});

/**
 * Wrong orders, implemented only here. Each returns the candidates such a sampler would draw
 * from; the chi-square test must reject its draws against the correct distribution.
 */
function softmaxSorted(logits: Float32Array, temperature: number): { id: number; p: number }[] {
  const scores = Array.from(logits, (l) => l / temperature);
  const top = Math.max(...scores);
  const sum = scores.reduce((a, s) => a + Math.exp(s - top), 0);
  return scores.map((s, id) => ({ id, p: Math.exp(s - top) / sum })).sort((a, b) => b.p - a.p || a.id - b.id);
}

function candidates(list: readonly { id: number; p: number }[]): Candidates {
  const mass = list.reduce((a, { p }) => a + p, 0);
  return { ids: Uint32Array.from(list, ({ id }) => id), probs: Float64Array.from(list, ({ p }) => p / mass) };
}

function nucleusOf(list: { id: number; p: number }[], topP: number, mass: number): { id: number; p: number }[] {
  let running = 0;
  const cut = list.findIndex(({ p }) => (running += p) >= topP * mass);
  return list.slice(0, cut < 0 ? list.length : cut + 1);
}

const counterfactuals: [string, Partial<SamplingOptions>, (o: SamplingOptions) => Candidates][] = [
  ["top-p before top-k (nucleus measured on the whole mass, then cut to k)", { topK: 3, topP: 0.6 }, (o) => {
    const list = softmaxSorted(LOGITS, o.temperature);
    return candidates(nucleusOf(list, o.topP, 1).slice(0, o.topK));
  }],
  ["min-p on unnormalised mass (survivors' raw probabilities against the renormalised maximum)", { topK: 4, minP: 0.45 }, (o) => {
    const list = softmaxSorted(LOGITS, o.temperature).slice(0, o.topK);
    const mass = list.reduce((a, { p }) => a + p, 0);
    const floor = o.minP * (list[0]!.p / mass);
    return candidates(list.filter(({ p }) => p >= floor));
  }],
  ["min-p before temperature", { temperature: 2, minP: 0.5 }, (o) => {
    const atOne = softmaxSorted(LOGITS, 1);
    const allowed = new Set(atOne.filter(({ p }) => p >= o.minP * atOne[0]!.p).map(({ id }) => id));
    return candidates(softmaxSorted(LOGITS, o.temperature).filter(({ id }) => allowed.has(id)));
  }],
];

describe("the same chi-square test rejects wrong knob orders", () => {
  for (const [name, over, wrong] of counterfactuals) {
    test(name, () => {
      const options = knobs(over);
      const expected = reference(LOGITS, options);
      const right = sampleMany(createSampler(options));
      expect(rejects(right, expected)).toBe(false);
      const random = new SplitMix64(SEED);
      const bad = wrong(options);
      const observed = tally(() => drawFrom(bad, random.nextUniform()));
      expect(rejects(observed, expected)).toBe(true);
    });
  }
});

describe("presence and frequency penalties", () => {
  const flat = new Float32Array(6);
  const history = [2, 2, 2, 4];
  const countsOf = (ids: readonly number[]): Map<number, number> => {
    const counts = new Map<number, number>();
    for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    return counts;
  };

  test("a sampler told the history draws from the penalised distribution (chi-square)", () => {
    for (const over of [{ presencePenalty: 0.8 }, { frequencyPenalty: 0.5 }, { presencePenalty: 0.4, frequencyPenalty: 0.3, topK: 5 }, { presencePenalty: -1 }]) {
      const options = knobs(over);
      const sampler = createSampler(options);
      for (const id of history) sampler.accept?.(id);
      const expected = reference(flat, options, countsOf(history));
      const d = samplingDistribution(flat, options, countsOf(history));
      d.ids.forEach((id, i) => expect(d.probs[i]!).toBeCloseTo(expected.get(id)!, 12));
      expect(rejects(sampleMany(sampler, flat), expected)).toBe(false);
      // And the unpenalised (uniform) distribution is rejected: the penalty really acts.
      expect(rejects(sampleMany(sampler, flat), reference(flat, options))).toBe(true);
    }
  });

  test("the formula: count * frequency + presence, only for ids generated", () => {
    const options = knobs({ presencePenalty: 0.5, frequencyPenalty: 0.25 });
    const d = samplingDistribution(flat, options, countsOf(history));
    const z = [0, 0, -(3 * 0.25 + 0.5), 0, -(0.25 + 0.5), 0].map(Math.exp);
    const sum = z.reduce((a, b) => a + b, 0);
    d.ids.forEach((id, i) => expect(d.probs[i]!).toBeCloseTo(z[id]! / sum, 14));
  });

  test("off by default: accepting ids changes nothing", () => {
    const told = createSampler(knobs({}));
    const untold = createSampler(knobs({}));
    for (let i = 0; i < 200; i++) {
      const id = told.choose(LOGITS);
      told.accept?.(id);
      expect(untold.choose(LOGITS)).toBe(id);
    }
  });

  test("the decode loop tells the sampler every id it emits", async () => {
    const accepted: number[] = [];
    const sampler: Sampler = { choose: () => 3, accept: (token) => accepted.push(token) };
    const model = { vocabSize: 5, newState: () => ({}), release: () => {}, run: () => new Float32Array(5) };
    const run = await decode(model, [1], { maxNewTokens: 4, mode: "incremental", sampler, stopIds: new Set([9]) });
    expect(accepted).toEqual(run.generated);
    expect(accepted).toEqual([3, 3, 3, 3]);
  });
});

describe("options: defaults and validation", () => {
  test("the run command is greedy; chat is temperature 1.0, top_p 0.95, the rest off", () => {
    expect(samplingDefaults.run).toEqual({ temperature: 0, topP: 1, topK: 0, minP: 0, seed: DEFAULT_SEED, presencePenalty: 0, frequencyPenalty: 0 });
    expect(samplingDefaults.chat).toEqual({ temperature: 1, topP: 0.95, topK: 0, minP: 0, seed: DEFAULT_SEED, presencePenalty: 0, frequencyPenalty: 0 });
    expect(resolveSampling({}, samplingDefaults.chat)).toEqual(samplingDefaults.chat);
    expect(resolveSampling({ topK: 40, temperature: null }, samplingDefaults.chat)).toEqual({ ...samplingDefaults.chat, topK: 40 });
    expect(validateSampling(samplingDefaults.run)).toEqual(samplingDefaults.run);
  });

  const refusals: [Partial<Record<keyof SamplingOptions, unknown>>, string][] = [
    [{ temperature: -0.1 }, "--temperature must be a number from 0 to 2 (0 is greedy), got -0.1"],
    [{ temperature: 2.5 }, "--temperature must be a number from 0 to 2 (0 is greedy), got 2.5"],
    [{ temperature: NaN }, "--temperature must be a number from 0 to 2 (0 is greedy), got NaN"],
    [{ temperature: "1" }, "--temperature must be a number from 0 to 2 (0 is greedy), got \"1\""],
    [{ topP: 0 }, "--top-p must be a number above 0 and at most 1 (1 is off), got 0"],
    [{ topP: 1.01 }, "--top-p must be a number above 0 and at most 1 (1 is off), got 1.01"],
    [{ topK: -2 }, "--top-k must be a whole number of at least -1 (0 and -1 are off), got -2"],
    [{ topK: 2.5 }, "--top-k must be a whole number of at least -1 (0 and -1 are off), got 2.5"],
    [{ minP: 1.5 }, "--min-p must be a number from 0 to 1 (0 is off), got 1.5"],
    [{ seed: 1.5 }, "--seed must be a whole number of at most 2^53 - 1 in size, got 1.5"],
    [{ seed: 2 ** 53 }, "--seed must be a whole number of at most 2^53 - 1 in size, got 9007199254740992"],
    [{ seed: 2 ** 64 }, "--seed must be a whole number of at most 2^53 - 1 in size, got 18446744073709552000"],
    [{ presencePenalty: 2.1 }, "--presence-penalty must be a number from -2 to 2 (0 is off), got 2.1"],
    [{ frequencyPenalty: -3 }, "--frequency-penalty must be a number from -2 to 2 (0 is off), got -3"],
    [{ frequencyPenalty: Infinity }, "--frequency-penalty must be a number from -2 to 2 (0 is off), got Infinity"],
  ];
  for (const [given, message] of refusals) {
    test(`refused: ${message}`, () => {
      let caught: unknown;
      try {
        resolveSampling(given, samplingDefaults.chat);
      } catch (error) {
        caught = error;
      }
      expect(caught).toBeInstanceOf(K3Error);
      expect((caught as K3Error).exitCode).toBe(2);
      expect((caught as K3Error).message).toBe(message);
      expect((caught as K3Error).message).not.toContain("\n");
    });
  }

  test("request fields are named as the request spells them", () => {
    expect(() => resolveSampling({ topP: 2 }, samplingDefaults.chat, "field")).toThrow("top_p must be");
    expect(() => resolveSampling({ presencePenalty: 5 }, samplingDefaults.chat, "field")).toThrow("presence_penalty must be");
  });
});
