/**
 * The ceiling the f64 contract sets on this CPU for the AVX-512 matvecs: bench/probes/ceiling.zig
 * (the inner loops alone: one multiply-add per 8 products plus the fewest instructions known to
 * widen the stored weights to f64, data in L2, one thread), built with the pinned Zig and run
 * here, next to the f64 FMA peak of the same thread. Issue 12's bf16 target is compared with it
 * (a target above the ceiling cannot be met by any kernel that keeps model.md §8.3's orders on
 * this CPU), and issue 26 states the MXFP4 T = 1 targets as shares of it. Beside it, the
 * multi-token tiles' arithmetic alone, every operand in L1, each the most its kernel's T >= 32
 * rows can reach: bench/probes/lane-tile.zig, the MXFP4 lane tile, built for x86-64-v3 (16
 * registers) and for x86-64-v4; bench/probes/row-lane-tile.zig, the v4 MXFP4 row-lane tile (the
 * token counts that are not multiples of 8); bench/probes/bf16-tile.zig, the v4 bf16 tile with
 * its weights widened as the kernel does, and on weights already f64 beside it: the gap is what
 * widening costs where it shares the multiply-adds' ports. Runs only where the v4 variant does
 * (x86-64 with AVX-512).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { zigCommand } from "../tools/build.ts";
import { percent, type Figure, type Figures } from "./results.ts";

export interface Ceiling {
  /** f64 lanes of fused multiply-add per second / 1e9, one thread. */
  fmaGLanes: number;
  /** G weights/s of each inner loop, one thread, in L2. */
  bf16Unpack: number;
  bf16Integer: number;
  mxfp4: number;
  /** The AVX2 variant's MXFP4 loop (vpshufb lookup, 4-wide), the v3 ceiling on this CPU. */
  mxfp4V3: number;
  /** Share of the FMA peak of the v3 MXFP4 lane tile's arithmetic alone (bench/probes/lane-tile.zig). */
  laneTileV3: number;
  /** The same for the v4 MXFP4 lane tile (bench/probes/lane-tile.zig built for x86-64-v4: one 8-wide vector of tokens). */
  laneTileV4: number;
  /** Share of the FMA peak of the v4 MXFP4 row-lane tile's arithmetic alone (bench/probes/row-lane-tile.zig). */
  rowLaneTileV4: number;
  /** Shares of the FMA peak of the v4 bf16 multi-token tile alone (bench/probes/bf16-tile.zig): the kernel's 3 x 8, 4 x 6, 2 x 12, and 3 x 8 on f64 weights. */
  bf16Tile: { kernel: number; rows4: number; rows2: number; f64Weights: number };
}

/** One thread's MXFP4 T = 1 ceiling of each kernel variant: the probe loop that variant runs. */
export function mxfp4Ceilings(c: Ceiling): Record<string, number> {
  return { v4: c.mxfp4, v3: c.mxfp4V3 };
}

/**
 * The share of the FMA peak the tile alone reached that a multi-token row of `variant` runs
 * (`kind`, `tokens`), or undefined where no probe times it (v3 bf16, and MXFP4 below five
 * tokens outside the row lanes). The MXFP4 choice is the kernel's (zig/kernels/matvec_mxfp4.zig
 * `rowLanes` and `panel_min_tokens`): v4 runs 3 to 64 tokens that are not a multiple of 8 as
 * row-lane tiles, and from 5 tokens the rest as lane tiles, whose padding lanes (T = 13 fills
 * 16) only lower what the row can reach below the probe's figure. The v4 bf16 widened path
 * (vector ports `onFmaPorts`, two or more groups of 8 tokens: zig/kernels/matvec_bf16.zig
 * `takesWidened`) runs the first group of each run of up to 8 as the widening tile and the
 * others as the tile on f64 weights, so its bound is the time-weighted mix of the two.
 */
export function tileCeiling(c: Ceiling, variant: string, kind: "bf16" | "MXFP4", tokens: number, ports?: "besideFma" | "onFmaPorts"): number | undefined {
  if (kind === "bf16") {
    if (variant !== "v4" || tokens <= 1) return undefined;
    const groups = Math.ceil(tokens / 8);
    if (ports !== "onFmaPorts" || groups < 2) return c.bf16Tile.kernel;
    const run = Math.min(groups, 8);
    return run / (1 / c.bf16Tile.kernel + (run - 1) / c.bf16Tile.f64Weights);
  }
  if (variant === "v4" && tokens >= 3 && tokens <= 64 && tokens % 8 !== 0) return c.rowLaneTileV4;
  if (tokens < 5) return undefined;
  return variant === "v4" ? c.laneTileV4 : variant === "v3" ? c.laneTileV3 : undefined;
}

const probeSource = join(import.meta.dir, "probes", "ceiling.zig");
const laneTileSource = join(import.meta.dir, "probes", "lane-tile.zig");
const bf16TileSource = join(import.meta.dir, "probes", "bf16-tile.zig");
const rowLaneTileSource = join(import.meta.dir, "probes", "row-lane-tile.zig");

/** Builds `source` for `cpu` in `dir` (a file named after both), runs it once, and reads a positive number by name from the JSON it prints. */
function runProbe(dir: string, source: string, cpu: string): (name: string) => number {
  const exe = join(dir, `${basename(source, ".zig")}-${cpu}`);
  const build = Bun.spawnSync([...zigCommand(), "build-exe", source, "-O", "ReleaseFast", `-mcpu=${cpu}`, `-femit-bin=${exe}`], { cwd: dir, stderr: "pipe" });
  if (build.exitCode !== 0) throw new Error(`building ${source} failed: ${build.stderr.toString().trim()}`);
  const run = Bun.spawnSync([exe], { stderr: "pipe" });
  if (run.exitCode !== 0) throw new Error(`${source} exited ${run.exitCode}: ${run.stderr.toString().trim()}`);
  const j = JSON.parse(run.stdout.toString()) as Record<string, number>;
  return (name: string): number => {
    const v = j[name];
    if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) throw new Error(`${source} printed no figure '${name}'`);
    return v;
  };
}

/**
 * A share of the FMA peak read from a probe. A loop of multiply-adds cannot beat the peak of the
 * same thread, so a share well above 1 means the probe timed its peak wrong (as 16 chains on 16
 * registers did, spilled to the stack) and the figure must not pass for a ceiling.
 */
function probeShare(read: (name: string) => number, name: string): number {
  const v = read(name);
  if (v > 1.1) throw new Error(`probe figure '${name}' is ${v.toFixed(2)} of the FMA peak: its peak measurement is wrong`);
  return v;
}

export function benchCeiling(): Ceiling {
  const dir = mkdtempSync(join(tmpdir(), "k3-ceiling-"));
  try {
    const field = runProbe(dir, probeSource, "x86_64_v4");
    const laneTileV3 = runProbe(dir, laneTileSource, "x86_64_v3");
    const laneTileV4 = runProbe(dir, laneTileSource, "x86_64_v4");
    const bf16Tile = runProbe(dir, bf16TileSource, "x86_64_v4");
    const rowLaneTile = runProbe(dir, rowLaneTileSource, "x86_64_v4");
    return {
      fmaGLanes: field("fma_g_lanes_per_s"),
      bf16Unpack: field("bf16_unpack_g_weights_per_s"),
      bf16Integer: field("bf16_integer_g_weights_per_s"),
      mxfp4: field("mxfp4_g_weights_per_s"),
      mxfp4V3: field("mxfp4_v3_g_weights_per_s"),
      laneTileV3: probeShare(laneTileV3, "lane_tile_share"),
      laneTileV4: probeShare(laneTileV4, "lane_tile_share"),
      rowLaneTileV4: probeShare(rowLaneTile, "row_lane_tile_v4_share"),
      bf16Tile: {
        kernel: probeShare(bf16Tile, "bf16_tile_3x8"),
        rows4: probeShare(bf16Tile, "bf16_tile_4x6"),
        rows2: probeShare(bf16Tile, "bf16_tile_2x12"),
        f64Weights: probeShare(bf16Tile, "bf16_tile_3x8_f64"),
      },
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The report: each loop in G weights/s and as a share of the FMA peak (one multiply-add per 8
 * weights would reach the peak), and what the ceiling means for the targets: issue 12's bf16
 * 1-thread one needs 90% of `bandwidth1` (GB/s, 1 thread) streamed from RAM; issue 26 sets the
 * MXFP4 T = 1 ones as `mxfp4Shares` (per variant) of `threads` times the one-thread ceiling,
 * the figure the kernel bench's rows are then compared with. The figures go to `figures`
 * (named `ceiling.*`), and the lines are rendered from them.
 */
export function ceilingReport(c: Ceiling, bandwidth1: number, threads: number, mxfp4Shares: Record<string, number>, figures: Figures, indent = ""): string[] {
  const fma = figures.add("ceiling.fma", "f64 FMA peak of the probe's thread (bench/probes/ceiling.zig)", c.fmaGLanes, "G lanes/s",
    "a limit: the loops below are shares of it");
  const peak = { what: "the probe thread's f64 FMA peak, one weight a lane", value: c.fmaGLanes, unit: "G weights/s" };
  const loop = (name: string, what: string, gw: number) => figures.add(`ceiling.${name}`, `inner loop alone, 1 thread, in L2: ${what}`, gw, "G weights/s", peak);
  const tileReason = "a bound: the share of the FMA peak the tile's arithmetic alone reaches (operands in L1), the most its rows can reach";
  const tile = (name: string, what: string, share: number) => figures.add(`ceiling.${name}`, what, share, "share of the FMA peak", tileReason);
  const unpack = loop("bf16_unpack", "bf16, unpack + vcvtps2pd", c.bf16Unpack);
  const integer = loop("bf16_integer", "bf16, integer widening", c.bf16Integer);
  const mxfp4 = loop("mxfp4_v4", "MXFP4, vpermi2pd lookup", c.mxfp4);
  const mxfp4V3 = loop("mxfp4_v3", "MXFP4, v3 (vpshufb, 4-wide)", c.mxfp4V3);
  const laneV3 = tile("lane_tile_v3", "MXFP4 v3 lane tile alone (4 rows x 8 tokens; bench/probes/lane-tile.zig)", c.laneTileV3);
  const laneV4 = tile("lane_tile_v4", "MXFP4 v4 lane tile alone (one 8-wide vector of tokens)", c.laneTileV4);
  const rowLane = tile("row_lane_tile_v4", "MXFP4 v4 row-lane tile alone (8 rows x 4 tokens; bench/probes/row-lane-tile.zig)", c.rowLaneTileV4);
  const bf16Tile = tile("bf16_tile_v4", "bf16 v4 tile alone (3 rows x 8 tokens, weights widened in L1; bench/probes/bf16-tile.zig)", c.bf16Tile.kernel);
  const rows4 = tile("bf16_tile_v4_4x6", "bf16 v4 tile alone, 4 rows x 6 tokens", c.bf16Tile.rows4);
  const rows2 = tile("bf16_tile_v4_2x12", "bf16 v4 tile alone, 2 rows x 12 tokens", c.bf16Tile.rows2);
  const f64Weights = tile("bf16_tile_v4_f64", "bf16 v4 tile alone, 3 rows x 8 tokens on f64 weights", c.bf16Tile.f64Weights);
  const share = (f: Figure) => `${percent(f)} of the FMA peak`;
  const pct = (f: Figure) => `${(100 * f.value).toFixed(0)}%`;
  const bf16 = Math.max(c.bf16Unpack, c.bf16Integer);
  const need = figures.add("ceiling.bf16_target", "the bf16 ceiling, GB/s, against issue 12's 1-thread bf16 target", 2 * bf16, "GB/s",
    { what: "90% of the 1-thread memory read bandwidth", value: 0.9 * bandwidth1, unit: "GB/s" }, { min: 1, source: "issue 12 (within this CPU's reach)" });
  return [
    `${indent}ceiling of the f64 contract on this CPU (inner loops alone, 1 thread, in L2; bench/probes/ceiling.zig):`,
    `${indent}  f64 FMA peak                 ${fma.value.toFixed(1)} G lanes/s`,
    `${indent}  bf16, unpack + vcvtps2pd     ${unpack.value.toFixed(2)} G weights/s (${(2 * unpack.value).toFixed(1)} GB/s), ${share(unpack)}`,
    `${indent}  bf16, integer widening       ${integer.value.toFixed(2)} G weights/s (${(2 * integer.value).toFixed(1)} GB/s), ${share(integer)}`,
    `${indent}  MXFP4, vpermi2pd lookup      ${mxfp4.value.toFixed(2)} G weights/s, ${share(mxfp4)}`,
    `${indent}  MXFP4, v3 (vpshufb, 4-wide)  ${mxfp4V3.value.toFixed(2)} G weights/s, ${share(mxfp4V3)}`,
    `${indent}  MXFP4, v3 lane tile alone    ${pct(laneV3)} of the FMA peak (4 rows x 8 tokens, decoded weights in L1: ` +
      `chains, tree and scale; bench/probes/lane-tile.zig), the most the v3 T >= 32 rows can reach`,
    `${indent}  MXFP4, v4 lane tile alone    ${pct(laneV4)} of the FMA peak (the same on one 8-wide vector of tokens), ` +
      `the most the v4 rows at T = 32 and 64 can reach`,
    `${indent}  MXFP4, v4 row-lane tile      ${pct(rowLane)} of the FMA peak (8 rows x 4 tokens, decoded weights in L1: ` +
      `chains, tree and scale; bench/probes/row-lane-tile.zig), the most the v4 rows at other T >= 3 can reach`,
    `${indent}  bf16, v4 tile alone          ${pct(bf16Tile)} of the FMA peak (3 rows x 8 tokens as the kernel, weights widened in L1; ` +
      `4 x 6 ${pct(rows4)}, 2 x 12 ${pct(rows2)}, 3 x 8 on f64 weights ${pct(f64Weights)}; bench/probes/bf16-tile.zig), ` +
      `the most the v4 bf16 T > 1 rows can reach where widening runs beside the multiply-adds; where it shares their ports ` +
      `(vector ports onFmaPorts) the rows from 9 tokens widen once per 8 groups, and their bound mixes the two tiles (tileCeiling)`,
    `${indent}  bf16 1-thread target (90% of ${bandwidth1.toFixed(1)} GB/s = ${(need.limit?.value ?? NaN).toFixed(1)} GB/s): ${need.target?.met ? "within reach" : "above this CPU's ceiling"}`,
    ...Object.entries(mxfp4Ceilings(c)).map(([variant, one]) => {
      const shareOf = mxfp4Shares[variant] ?? NaN;
      const target = figures.add(`ceiling.mxfp4_t1_target_${variant}`, `issue 26's MXFP4 T = 1 target, ${variant}, ${threads} threads: ${(100 * shareOf).toFixed(0)}% of ${threads} x the 1-thread ceiling`,
        shareOf * threads * one, "G weights/s", "a target: the MXFP4 T = 1 rows with all threads are measured against the ceiling it is a share of");
      return `${indent}  MXFP4 T=1 target, ${variant}: ${(100 * shareOf).toFixed(0)}% of ${threads} x ${one.toFixed(2)} = ${target.value.toFixed(1)} G weights/s with ${threads} threads`;
    }),
  ];
}
