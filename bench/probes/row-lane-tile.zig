//! The AVX-512 MXFP4 row-lane tile's arithmetic alone (bench/ceiling.ts builds it for x86-64-v4 and
//! runs it): the group loop of `tile` in zig/kernels/mxfp4_row_lanes.zig at its widest, 8 rows (the
//! lanes) x 4 tokens, with weights already decoded and every operand in L1. Per group and token:
//! the eight canonical chains of four multiply-adds from +0 (a decoded weight vector times the
//! token's broadcast activation), run a pair at a time in the tree's order with the kernel's
//! pinning, the tree ((c0+c4)+(c1+c5))+((c2+c6)+(c3+c7)), the group's scale (built from its code
//! bytes), and the scaled add to the total (one multiply-add, exact as the kernel's `addScaledSum`)
//! that a 255 code skips. That is 32 multiply-adds, the tree's 7 adds and the scaled add per group
//! and token, which the model.md §8.3 order requires; no decode and no memory traffic beyond L1, so
//! no kernel keeping that order can beat it: the ceiling of the v4 MXFP4 rows whose token count is
//! not a multiple of 8 (the others run as lane tiles, bench/probes/lane-tile.zig).
//!
//! Prints one JSON object: the loop's multiply-adds as a share of the f64 FMA peak of the same
//! thread, the best of rounds that time the peak and the loop back to back.
const std = @import("std");
const fma = @import("fma.zig");

const V8 = @Vector(8, f64);
const tokens = 4;
const groups = 4; // the kernel's panel: 8 KB of decoded weights, 4 KB of activations
const rounds = 25;
const reps = 50_000;

/// The kernel's `inOrder`: an empty volatile asm the value passes through, which keeps the
/// chains in program order, a pair at a time.
inline fn pin(v: V8) V8 {
    return asm volatile ("" : [out] "=v" (-> V8) : [in] "0" (v));
}

const Set = [tokens]V8;

inline fn chain(comptime l: usize, w: *const [32]V8, x: *const [tokens][groups * 32]f64, j: usize) Set {
    var acc: Set = undefined;
    inline for (0..tokens) |t| {
        acc[t] = @splat(0);
        if (l < 4) acc[t] = pin(acc[t]);
    }
    inline for (0..4) |m| {
        const c = l + 8 * m;
        inline for (0..tokens) |t| acc[t] = @mulAdd(V8, w[c], @as(V8, @splat(x[t][j * 32 + c])), acc[t]);
    }
    return acc;
}

inline fn add(p: Set, q: Set) Set {
    var r: Set = undefined;
    inline for (0..tokens) |t| r[t] = pin(p[t] + q[t]);
    return r;
}

/// The kernel's `halfScales`: 2^(s−128) from each lane's code byte, exactly.
inline fn halfScales(codes: @Vector(8, u8)) V8 {
    const wide: @Vector(8, u64) = codes;
    return @bitCast((wide + @as(@Vector(8, u64), @splat(1023 - 128))) << @as(@Vector(8, u6), @splat(52)));
}

noinline fn tileLoop(w: *const [groups][32]V8, codes: *const [groups]@Vector(8, u8), x: *const [tokens][groups * 32]f64) f64 {
    var tot: Set = undefined;
    inline for (0..tokens) |t| tot[t] = @splat(0);
    for (0..reps) |_| {
        for (0..groups) |j| {
            const wj = &w[j];
            const left = add(add(chain(0, wj, x, j), chain(4, wj, x, j)), add(chain(1, wj, x, j), chain(5, wj, x, j)));
            const right = add(add(chain(2, wj, x, j), chain(6, wj, x, j)), add(chain(3, wj, x, j), chain(7, wj, x, j)));
            const g = add(left, right);
            const mult = halfScales(codes[j]);
            const skip = codes[j] == @as(@Vector(8, u8), @splat(255));
            inline for (0..tokens) |t| tot[t] = @select(f64, skip, tot[t], @mulAdd(V8, g[t], mult, tot[t]));
        }
    }
    var s: V8 = @splat(0);
    inline for (0..tokens) |t| s += tot[t];
    asm volatile ("" ::: "memory");
    return @reduce(.Add, s);
}

pub fn main() !void {
    var w: [groups][32]V8 align(64) = undefined;
    var codes: [groups]@Vector(8, u8) = undefined;
    var x: [tokens][groups * 32]f64 align(64) = undefined;
    for (0..groups) |j| {
        for (0..32) |c| {
            for (0..8) |r| w[j][c][r] = @floatFromInt(@as(i32, @intCast((r * 7 + c * 3 + j) % 13)) - 6);
        }
        // codes near 127 (scales near 1/2) and one lane at 255 (skipped), as released experts can have
        for (0..8) |r| codes[j][r] = if (r == 5 and j == 2) 255 else @intCast(126 + (r + j) % 3);
    }
    for (0..tokens) |t| {
        for (0..groups * 32) |c| x[t][c] = @sin(@as(f64, @floatFromInt(t * 1000 + c)));
    }
    // the same number of 8-wide multiply-adds as the tile loop does
    const tile_fmas = reps * groups * 32 * tokens;
    const share = try fma.shareOfPeak(V8, tile_fmas, rounds, tileLoop, .{ &w, &codes, &x });
    const out = std.io.getStdOut().writer();
    try out.print("{{\"row_lane_tile_v4_share\":{d:.4}}}\n", .{share});
}
