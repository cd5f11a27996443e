//! The ceiling of the f64 contract on this CPU (bench/ceiling.ts runs it): the inner loops of
//! the AVX-512 matvecs with nothing else (no lane tree, no scales, no threads, data in L2), next
//! to the f64 FMA peak of the same thread. No kernel that keeps model.md §8.3's orders can beat
//! these loops: each of them is one multiply-add per 8 products plus the fewest instructions
//! known to turn the stored weights into f64.
//!
//!   fma          16 independent chains of 8-wide f64 fused multiply-adds
//!   bf16_unpack  bf16 -> f32 by interleaving zero halves, f32 -> f64 (vcvtps2pd), multiply-add
//!                (the v4 kernel's widening), 4 rows sharing the activations
//!   bf16_integer bf16 bits sign-extended to 64 bits, shifted and masked into an f64 scaled by
//!                2^-896 against activations scaled by 2^896 (exact for finite weights; no
//!                conversion instruction), 4 rows
//!   mxfp4        8 packed bytes broadcast, per-lane shift, vpermi2pd table lookup, multiply-add
//!                (the v4 kernel's decode), 2 rows, one chain per group as the order requires
//!
//! Prints one JSON object: G weights/s (or G FMA lanes/s) per loop, best of several passes.
const std = @import("std");
const fma = @import("fma.zig");
const seconds = fma.seconds;

const V8 = @Vector(8, f64);
const F8 = @Vector(8, f32);
const U8 = @Vector(8, u64);

extern fn @"llvm.x86.avx512.vpermi2var.pd.512"(a: V8, idx: @Vector(8, i64), b: V8) V8;

const cols = 4096;
const rows = 64; // 512 KB of bf16, 128 KB of MXFP4 codes: in L2
const passes = 25;

inline fn unpack16(p: [*]const u16) [2]V8 {
    const w: @Vector(16, u16) = p[0..16].*;
    const z: @Vector(16, u16) = @splat(0);
    const lo: F8 = @bitCast(@shuffle(u16, z, w, [16]i32{ 0, -1, 0, -2, 0, -3, 0, -4, 0, -9, 0, -10, 0, -11, 0, -12 }));
    const hi: F8 = @bitCast(@shuffle(u16, z, w, [16]i32{ 0, -5, 0, -6, 0, -7, 0, -8, 0, -13, 0, -14, 0, -15, 0, -16 }));
    return .{ @floatCast(lo), @floatCast(hi) };
}

inline fn integer8(p: [*]const u16) V8 {
    const w: @Vector(8, i16) = @bitCast(p[0..8].*);
    const q: U8 = @bitCast(@as(@Vector(8, i64), w));
    return @bitCast((q << @splat(45)) & @as(U8, @splat(0x8FFF_FFFF_FFFF_FFFF)));
}

noinline fn bf16Loop(comptime integer: bool, w: [*]const u16, x: [*]const f64) f64 {
    var sink: V8 = @splat(0);
    var o: usize = 0;
    while (o < rows) : (o += 4) {
        var acc: [4][2]V8 = @splat(.{ @splat(0), @splat(0) });
        var i: usize = 0;
        while (i < cols) : (i += 16) {
            const x0: V8 = x[i..][0..8].*;
            const x1: V8 = x[i + 8 ..][0..8].*;
            inline for (0..4) |r| {
                const p = w + (o + r) * cols + i;
                const v: [2]V8 = if (integer) .{ integer8(p), integer8(p + 8) } else unpack16(p);
                acc[r][0] = @mulAdd(V8, v[0], x0, acc[r][0]);
                acc[r][1] = @mulAdd(V8, v[1], x1, acc[r][1]);
            }
        }
        inline for (0..4) |r| sink += acc[r][0] + acc[r][1];
    }
    // a side effect, so repeated calls with the same arguments are not merged
    asm volatile ("" ::: "memory");
    return @reduce(.Add, sink);
}

const e2m1 = [16]f64{ 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0 };

inline fn lookup(p: [*]const u8, comptime q: usize) V8 {
    const shifts: U8 = if (q % 2 == 0) .{ 0, 4, 8, 12, 16, 20, 24, 28 } else .{ 32, 36, 40, 44, 48, 52, 56, 60 };
    const word: *align(1) const u64 = @ptrCast(p + (q / 2) * 8);
    const v: U8 = @splat(word.*);
    return @"llvm.x86.avx512.vpermi2var.pd.512"(e2m1[0..8].*, @bitCast(v >> shifts), e2m1[8..16].*);
}

noinline fn mxfp4Loop(codes: [*]const u8, x: [*]const f64) f64 {
    const groups = cols / 32;
    var sink: V8 = @splat(0);
    var o: usize = 0;
    while (o < rows) : (o += 2) {
        for (0..groups) |g| {
            var acc: [2]V8 = .{ @splat(0), @splat(0) };
            inline for (0..4) |q| {
                const xv: V8 = x[g * 32 + 8 * q ..][0..8].*;
                inline for (0..2) |r| acc[r] = @mulAdd(V8, lookup(codes + (o + r) * (cols / 2) + g * 16, q), xv, acc[r]);
            }
            sink += acc[0] + acc[1];
        }
    }
    asm volatile ("" ::: "memory");
    return @reduce(.Add, sink);
}

// The AVX2 (x86-64-v3) variant's MXFP4 inner loop: 32 packed bytes (two groups) split into
// nibbles, interleaved per 128-bit half, looked up as doubled codes with one vpshufb per 32,
// widened i8 -> i32 -> f64 quads, one 4-wide multiply-add per quad (zig/kernels/matvec_mxfp4.zig
// `pairWeights`, the same instructions). Two rows share each activation quad.
extern fn @"llvm.x86.avx2.pshuf.b"(table: @Vector(32, u8), index: @Vector(32, u8)) @Vector(32, u8);
const V4 = @Vector(4, f64);
const doubled_lut: @Vector(32, u8) = blk: {
    const d = [16]i8{ 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };
    var t: [32]u8 = undefined;
    for (0..32) |i| t[i] = @bitCast(d[i % 16]);
    break :blk t;
};

fn interleave(comptime base: usize) [32]i32 {
    var m: [32]i32 = undefined;
    for (0..2) |half| for (0..8) |j| {
        const src: i32 = @intCast(16 * half + base + j);
        m[16 * half + 2 * j] = src;
        m[16 * half + 2 * j + 1] = ~src;
    };
    return m;
}

fn octet(comptime first: i32) [8]i32 {
    var m: [8]i32 = undefined;
    for (0..8) |j| m[j] = first + @as(i32, @intCast(j));
    return m;
}

inline fn pairQuads(bytes: *const [32]u8) [2][8]V4 {
    @setEvalBranchQuota(10_000);
    const b: @Vector(32, u8) = bytes.*;
    const mask: @Vector(32, u8) = @splat(0x0F);
    const lo = b & mask;
    const hi = (b >> @as(@Vector(32, u3), @splat(4))) & mask;
    const v0: @Vector(32, i8) = @bitCast(@"llvm.x86.avx2.pshuf.b"(doubled_lut, @shuffle(u8, lo, hi, interleave(0))));
    const v1: @Vector(32, i8) = @bitCast(@"llvm.x86.avx2.pshuf.b"(doubled_lut, @shuffle(u8, lo, hi, interleave(8))));
    var out: [2][8]V4 = undefined;
    inline for (0..2) |g| inline for (0..2) |k| {
        const a: @Vector(8, i32) = @as(@Vector(8, i8), @shuffle(i8, v0, undefined, octet(16 * g + 8 * k)));
        const c: @Vector(8, i32) = @as(@Vector(8, i8), @shuffle(i8, v1, undefined, octet(16 * g + 8 * k)));
        out[g][2 * k] = @floatFromInt(@as(@Vector(4, i32), @shuffle(i32, a, undefined, [4]i32{ 0, 1, 2, 3 })));
        out[g][2 * k + 1] = @floatFromInt(@as(@Vector(4, i32), @shuffle(i32, a, undefined, [4]i32{ 4, 5, 6, 7 })));
        out[g][4 + 2 * k] = @floatFromInt(@as(@Vector(4, i32), @shuffle(i32, c, undefined, [4]i32{ 0, 1, 2, 3 })));
        out[g][4 + 2 * k + 1] = @floatFromInt(@as(@Vector(4, i32), @shuffle(i32, c, undefined, [4]i32{ 4, 5, 6, 7 })));
    };
    return out;
}

noinline fn mxfp4LoopV3(codes: [*]const u8, x: [*]const f64) f64 {
    const groups = cols / 32;
    var sink: V4 = @splat(0);
    var o: usize = 0;
    while (o < rows) : (o += 2) {
        var g: usize = 0;
        while (g < groups) : (g += 2) {
            var acc: [2][2]V4 = .{ .{ @splat(0), @splat(0) }, .{ @splat(0), @splat(0) } };
            var w: [2][2][8]V4 = undefined;
            inline for (0..2) |r| w[r] = pairQuads(codes[(o + r) * (cols / 2) + g * 16 ..][0..32]);
            inline for (0..2) |h| inline for (0..8) |k| {
                const xv: V4 = x[(g + h) * 32 + 4 * k ..][0..4].*;
                inline for (0..2) |r| acc[r][k % 2] = @mulAdd(V4, w[r][h][k], xv, acc[r][k % 2]);
            };
            sink += (acc[0][0] + acc[0][1]) + (acc[1][0] + acc[1][1]);
        }
    }
    asm volatile ("" ::: "memory");
    return @reduce(.Add, sink);
}

fn best(comptime f: anytype, args: anytype, reps: usize) f64 {
    var fastest = std.math.inf(f64);
    var keep: f64 = 0;
    for (0..passes) |_| {
        var timer = std.time.Timer.start() catch unreachable;
        for (0..reps) |_| keep += @call(.never_inline, f, args);
        fastest = @min(fastest, seconds(&timer));
    }
    std.mem.doNotOptimizeAway(keep);
    return fastest;
}

pub fn main() !void {
    const alloc = std.heap.page_allocator;
    const w = try alloc.alloc(u16, rows * cols);
    defer alloc.free(w);
    var state: u32 = 0x9e3779b9;
    for (w) |*b| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        b.* = @truncate((state & 0xbfff) | 0x3800);
    }
    const codes = try alloc.alloc(u8, rows * cols / 2);
    defer alloc.free(codes);
    for (codes, 0..) |*c, i| c.* = @truncate(w[i] ^ (w[i] >> 8));
    const x = try alloc.alloc(f64, cols);
    defer alloc.free(x);
    for (x, 0..) |*v, i| v.* = @sin(@as(f64, @floatFromInt(i)));

    const fma_steps = 1 << 21;
    const fma_s = best(fma.chains, .{ V8, 16, fma_steps, 0.5 }, 1);
    const reps = 20;
    const weights: f64 = @floatFromInt(rows * cols * reps);
    const unpack_s = best(bf16Loop, .{ false, w.ptr, x.ptr }, reps);
    const integer_s = best(bf16Loop, .{ true, w.ptr, x.ptr }, reps);
    const mxfp4_s = best(mxfp4Loop, .{ codes.ptr, x.ptr }, reps);
    const mxfp4_v3_s = best(mxfp4LoopV3, .{ codes.ptr, x.ptr }, reps);
    const out = std.io.getStdOut().writer();
    try out.print("{{\"fma_g_lanes_per_s\":{d:.3},\"bf16_unpack_g_weights_per_s\":{d:.3},\"bf16_integer_g_weights_per_s\":{d:.3},\"mxfp4_g_weights_per_s\":{d:.3},\"mxfp4_v3_g_weights_per_s\":{d:.3}}}\n", .{
        @as(f64, @floatFromInt(fma_steps * 16 * 8)) / fma_s / 1e9,
        weights / unpack_s / 1e9,
        weights / integer_s / 1e9,
        weights / mxfp4_s / 1e9,
        weights / mxfp4_v3_s / 1e9,
    });
}
