//! The AVX-512 bf16 multi-token tile's arithmetic alone (bench/ceiling.ts builds it for
//! x86-64-v4 and runs it): the step of `groupTile` in zig/kernels/matvec_bf16.zig, B rows x R
//! tokens, one accumulator each, over one lane group of 16-element blocks with every operand in
//! L1. Each step widens one bf16 weight vector per row as the kernel does (vpunpcklwd with
//! zeros, then vcvtps2pd: exact) and multiply-adds it into the row's R accumulators against the
//! tokens' activation vectors. The same tile is timed once more with the weights already f64
//! (no widening): the gap between the two is what widening costs on this CPU, where the
//! conversions may share ports with the multiply-adds.
//!
//! Prints one JSON object: each tile's multiply-adds as a share of the f64 FMA peak of the same
//! thread, each the best of rounds that time the peak and the tile back to back.
const std = @import("std");
const fma = @import("fma.zig");

const V8 = @Vector(8, f64);
const steps = 32; // 512 columns: 1 KB of bf16 per row, R x 2 KB of activations, in L1
const rounds = 25;
const reps = 4_000;

/// Sixteen bf16 weights' lane group 0 ({0-3, 8-11}) as f64, the kernel's `widen16Wide(..)[0]`.
inline fn widenGroup0(p: [*]const u16) V8 {
    const w: @Vector(16, u16) = p[0..16].*;
    const z: @Vector(16, u16) = @splat(0);
    const f: @Vector(8, f32) = @bitCast(@shuffle(u16, z, w, [16]i32{ 0, ~@as(i32, 0), 0, ~@as(i32, 1), 0, ~@as(i32, 2), 0, ~@as(i32, 3), 0, ~@as(i32, 8), 0, ~@as(i32, 9), 0, ~@as(i32, 10), 0, ~@as(i32, 11) }));
    return @floatCast(f);
}

fn Tile(comptime B: usize, comptime R: usize, comptime widen: bool) type {
    return struct {
        const Weights = if (widen) [B][steps * 16]u16 else [B][steps]V8;
        noinline fn run(w: *const Weights, x: *const [steps][R]V8) f64 {
            var acc: [B][R]V8 = undefined;
            inline for (0..B) |b| inline for (0..R) |t| {
                acc[b][t] = @splat(0);
            };
            for (0..reps) |_| {
                for (0..steps) |i| {
                    var wv: [B]V8 = undefined;
                    inline for (0..B) |b| wv[b] = if (widen) widenGroup0(@ptrCast(&w[b][i * 16])) else w[b][i];
                    inline for (0..R) |t| {
                        const xv = x[i][t];
                        inline for (0..B) |b| acc[b][t] = @mulAdd(V8, wv[b], xv, acc[b][t]);
                    }
                }
            }
            var s: V8 = @splat(0);
            inline for (0..B) |b| inline for (0..R) |t| {
                s += acc[b][t];
            };
            asm volatile ("" ::: "memory");
            return @reduce(.Add, s);
        }

        /// The tile's multiply-adds as a share of the FMA peak, best of `rounds`.
        fn share() !f64 {
            var w: Weights align(64) = undefined;
            var x: [steps][R]V8 align(64) = undefined;
            for (0..B) |b| for (0..steps) |i| {
                if (widen) {
                    // small bf16 values (exponent near 1.0): no overflow over the reps
                    for (0..16) |k| w[b][i * 16 + k] = @intCast(0x3c00 + (b * 37 + i * 16 + k) % 128);
                } else {
                    for (0..8) |k| w[b][i][k] = 0.001 * @as(f64, @floatFromInt((b * 37 + i * 8 + k) % 128));
                }
            };
            for (0..steps) |i| for (0..R) |t| for (0..8) |k| {
                x[i][t][k] = @sin(@as(f64, @floatFromInt(i * 64 + t * 8 + k)));
            };
            return fma.shareOfPeak(V8, reps * steps * B * R, rounds, run, .{ &w, &x });
        }
    };
}

/// The kernel's tile (3 x 8), two other shapes with fewer or more widenings per multiply-add,
/// and the kernel's tile with the weights already f64.
pub fn main() !void {
    const out = std.io.getStdOut().writer();
    try out.print("{{\"bf16_tile_3x8\":{d:.4},\"bf16_tile_4x6\":{d:.4},\"bf16_tile_2x12\":{d:.4},\"bf16_tile_3x8_f64\":{d:.4}}}\n", .{
        try Tile(3, 8, true).share(),
        try Tile(4, 6, true).share(),
        try Tile(2, 12, true).share(),
        try Tile(3, 8, false).share(),
    });
}
