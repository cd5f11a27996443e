//! What the probes time their loops against (ceiling.zig and the tile probes): the f64 FMA peak of
//! one thread as independent chains of fused multiply-adds, a timer's seconds, and a loop's share of that peak.
const std = @import("std");
const builtin = @import("builtin");

/// `count` independent chains of `V`-wide fused multiply-adds, `n` steps each (the FMA latency
/// times the pipes needs at least 8 chains in flight; more leave margin). Each chain settles
/// near seed/(1 - m), so nothing overflows or turns subnormal. Returns their sum.
pub noinline fn chains(comptime V: type, comptime count: usize, n: usize, seed: f64) f64 {
    var acc: [count]V = undefined;
    for (&acc, 0..) |*a, k| a.* = @splat(seed * @as(f64, @floatFromInt(k)));
    const m: V = @splat(1.0000001);
    const c: V = @splat(seed);
    for (0..n) |_| {
        inline for (0..count) |k| acc[k] = @mulAdd(V, acc[k], m, c);
    }
    var s: V = @splat(0);
    for (acc) |a| s += a;
    asm volatile ("" ::: "memory");
    return @reduce(.Add, s);
}

/// Whether the build target has AVX-512 (the v4 kernels): 32 vector registers of 8 f64 lanes.
pub const avx512 = builtin.cpu.arch == .x86_64 and std.Target.x86.featureSetHas(builtin.cpu.features, .avx512f);

/// Chains the peak is timed with: 16 on 32 registers; 12 where there are 16 (x86-64-v3), since
/// 16 chains and their two constants do not fit there, and a chain spilled to the stack waits
/// on a store each step: with 16, an Intel Xeon (2026-12-06) put its v3 lane tile at 122% of
/// "the peak", with 12 at 81-85%. 12 still covers the FMA latency times the pipes.
pub const peak_chains = if (builtin.cpu.arch == .x86_64 and !avx512) 12 else 16;

pub fn seconds(timer: *std.time.Timer) f64 {
    return @as(f64, @floatFromInt(timer.read())) / 1e9;
}

/// `loop`'s multiply-adds as a share of the FMA peak of the same thread, the best of `rounds`
/// that each time `fmas` V-wide multiply-adds as independent chains and then `loop(args)` (which
/// does as many), back to back. Both results are kept so that neither is optimised away.
pub fn shareOfPeak(comptime V: type, fmas: usize, rounds: usize, comptime loop: anytype, args: anytype) !f64 {
    var peak_s: f64 = std.math.inf(f64);
    var loop_s: f64 = std.math.inf(f64);
    var sink: f64 = 0;
    for (0..rounds) |_| {
        var timer = try std.time.Timer.start();
        sink += chains(V, peak_chains, fmas / peak_chains, 0.5);
        peak_s = @min(peak_s, seconds(&timer));
        timer.reset();
        sink += @call(.auto, loop, args);
        loop_s = @min(loop_s, seconds(&timer));
    }
    std.mem.doNotOptimizeAway(sink);
    return peak_s / loop_s;
}
