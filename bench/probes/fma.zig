//! What the probes time their loops against (ceiling.zig, lane-tile.zig): the f64 FMA peak of
//! one thread as independent chains of fused multiply-adds, and a timer's seconds.
const std = @import("std");

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

pub fn seconds(timer: *std.time.Timer) f64 {
    return @as(f64, @floatFromInt(timer.read())) / 1e9;
}
