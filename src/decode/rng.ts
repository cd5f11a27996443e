/**
 * The random stream sampling draws from (chat.md 3.4 rule 3): SplitMix64, written out here so
 * that a seed means the same stream on every machine, runtime and thread count. BigInt keeps the
 * 64-bit arithmetic exact; one draw per sampled token makes its cost irrelevant.
 */

/** What a sampler needs from a random source: uniform doubles in [0, 1). */
export interface UniformSource {
  nextUniform(): number;
}

const MASK = (1n << 64n) - 1n;
const GOLDEN_GAMMA = 0x9e3779b97f4a7c15n;
const MIX_1 = 0xbf58476d1ce4e5b9n;
const MIX_2 = 0x94d049bb133111ebn;
/** 2^-53: the spacing of doubles just below 1, so every value of 53 bits is exact. */
const UNIT = 1 / 2 ** 53;

export class SplitMix64 implements UniformSource {
  private state: bigint;

  /** Any integer seed; negative and large values are taken modulo 2^64 (two's complement). */
  constructor(seed: number | bigint) {
    if (typeof seed === "number" && !Number.isInteger(seed)) throw new RangeError(`seed ${seed} is not an integer`);
    this.state = BigInt.asUintN(64, BigInt(seed));
  }

  /** The next 64-bit output. */
  nextU64(): bigint {
    this.state = (this.state + GOLDEN_GAMMA) & MASK;
    let z = this.state;
    z = ((z ^ (z >> 30n)) * MIX_1) & MASK;
    z = ((z ^ (z >> 27n)) * MIX_2) & MASK;
    return z ^ (z >> 31n);
  }

  /** A double in [0, 1) from the top 53 bits of one output (the low bits are the weakest). */
  nextUniform(): number {
    return Number(this.nextU64() >> 11n) * UNIT;
  }
}
