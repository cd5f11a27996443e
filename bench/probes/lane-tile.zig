//! The MXFP4 lane tile's arithmetic alone (bench/ceiling.ts builds it for x86-64-v3 and for
//! x86-64-v4 and runs both): the group loop of `laneTile` in zig/kernels/matvec_mxfp4.zig at the
//! shape T >= 32 runs, 4 rows x 8 tokens (two 4-wide vectors on v3, one 8-wide on v4), with
//! weights already decoded and every operand in L1.
//! Per group: the eight canonical chains of four multiply-adds from +0 (elements l, l+8, l+16,
//! l+24, a broadcast weight times the tokens' activations), run a pair at a time in the tree's
//! order with the kernel's pinning, the tree ((c0+c4)+(c1+c5))+((c2+c6)+(c3+c7)), and the scaled
//! add to the totals (one multiply-add, exact as the kernel's `addScaledSum`). No decode, no memory
//! traffic beyond L1: a kernel built this way on 16 registers cannot beat it, so it is the ceiling
//! the T >= 32 share of v3 is read against (and on v4, whose 32 registers hold the tile without
//! spills, the v4 share).
//!
//! Prints one JSON object: the loop's multiply-adds as a share of the f64 FMA peak of the same
//! thread, each the best of rounds that time the peak and the loop back to back.
const std = @import("std");
const fma = @import("fma.zig");

/// f64 lanes of a vector: 8 where the build target has AVX-512 (the v4 kernels), else 4.
const lanes = if (fma.avx512) 8 else 4;
const V = @Vector(lanes, f64);
const rows = 4;
const vectors = 8 / lanes; // 8 tokens
const groups = 8; // 16 KB of activations, 8 KB of weights: in L1
const rounds = 25;

/// The kernel's `inOrder`: an empty volatile asm the value passes through, which keeps the
/// chains in program order, a pair at a time.
inline fn pin(v: V) V {
    return asm volatile ("" : [out] "=v" (-> V) : [in] "0" (v));
}

const Set = [rows][vectors]V;

inline fn chain(comptime l: usize, w: *const [rows][groups * 32]f64, x: *const [groups * 32][vectors]V, j: usize) Set {
    var acc: Set = undefined;
    inline for (0..rows) |b| inline for (0..vectors) |k| {
        acc[b][k] = @splat(0);
        if (l < 4) acc[b][k] = pin(acc[b][k]);
    };
    inline for (0..4) |m| {
        const c = j * 32 + l + 8 * m;
        inline for (0..rows) |b| {
            const wb: V = @splat(w[b][c]);
            inline for (0..vectors) |k| acc[b][k] = @mulAdd(V, wb, x[c][k], acc[b][k]);
        }
    }
    return acc;
}

inline fn add(p: Set, q: Set) Set {
    var r: Set = undefined;
    inline for (0..rows) |b| inline for (0..vectors) |k| {
        r[b][k] = pin(p[b][k] + q[b][k]);
    };
    return r;
}

noinline fn tileLoop(reps: usize, w: *const [rows][groups * 32]f64, x: *const [groups * 32][vectors]V, scales: *const [rows][groups]f64) f64 {
    var tot: Set = undefined;
    inline for (0..rows) |b| inline for (0..vectors) |k| {
        tot[b][k] = @splat(0);
    };
    for (0..reps) |_| {
        for (0..groups) |j| {
            const left = add(add(chain(0, w, x, j), chain(4, w, x, j)), add(chain(1, w, x, j), chain(5, w, x, j)));
            const right = add(add(chain(2, w, x, j), chain(6, w, x, j)), add(chain(3, w, x, j), chain(7, w, x, j)));
            const g = add(left, right);
            inline for (0..rows) |b| inline for (0..vectors) |k| {
                tot[b][k] = @mulAdd(V, g[b][k], @as(V, @splat(scales[b][j])), tot[b][k]);
            };
        }
    }
    var s: V = @splat(0);
    inline for (0..rows) |b| inline for (0..vectors) |k| {
        s += tot[b][k];
    };
    asm volatile ("" ::: "memory");
    return @reduce(.Add, s);
}

pub fn main() !void {
    var w: [rows][groups * 32]f64 align(64) = undefined;
    var x: [groups * 32][vectors]V align(64) = undefined;
    var scales: [rows][groups]f64 = undefined;
    for (0..rows) |b| {
        for (0..groups * 32) |c| w[b][c] = @floatFromInt(@as(i32, @intCast((b * 7 + c * 3) % 13)) - 6);
        for (0..groups) |j| scales[b][j] = 1.0 / @as(f64, @floatFromInt(j + 1));
    }
    for (0..groups * 32) |c| {
        for (0..vectors) |k| {
            for (0..lanes) |t| x[c][k][t] = @sin(@as(f64, @floatFromInt(c * 8 + k * lanes + t)));
        }
    }
    const reps = 20_000;
    // the same number of multiply-adds of the same width as the tile loop does
    const tile_fmas = reps * groups * 32 * rows * vectors;
    const share = try fma.shareOfPeak(V, tile_fmas, rounds, tileLoop, .{ reps, &w, &x, &scales });
    const out = std.io.getStdOut().writer();
    try out.print("{{\"lane_tile_share\":{d:.4}}}\n", .{share});
}
