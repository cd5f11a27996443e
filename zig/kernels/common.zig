//! Shared by every kernel: the error set, the scalar/SIMD path switch, exact widening.
const std = @import("std");
const pool = @import("pool");

pub const Error = error{
    /// A size, count or pointer is out of range (the ABI layer maps it to `bad_argument`).
    BadArgument,
    /// Scratch memory could not be grown.
    OutOfMemory,
};

/// Which implementation the kernels with a separate scalar reference run, in this compilation.
/// `.simd` is the default and the fast path; `.scalar` is the plain-loop reference that exists
/// to prove every variant reproduces the canonical order bit for bit (model.md §8.4). Both are
/// always compiled; the switch is process-wide, set by zig/isa/dispatch.zig when the scalar
/// variant is selected (`k3_isa_select`), and by the Zig tests directly.
pub const Path = enum(u32) { simd = 0, scalar = 1 };

var path_setting = std.atomic.Value(u32).init(@intFromEnum(Path.simd));

pub fn setPath(p: Path) void {
    path_setting.store(@intFromEnum(p), .seq_cst);
}

pub fn path() Path {
    return @enumFromInt(path_setting.load(.monotonic));
}

/// Where this CPU issues its vector shuffles, blends and conversions (zig/pool.zig
/// `VectorPorts`): kernels read it to choose between paths that give the same bits.
pub const VectorPorts = pool.VectorPorts;

pub fn vectorPorts() VectorPorts {
    return pool.vectorPorts();
}

/// bf16 bits -> f32: a 16-bit left shift into the high half (exact; model.md §4).
pub inline fn bf16ToF32(bits: u16) f32 {
    return @bitCast(@as(u32, bits) << 16);
}

/// The same widening on a vector of bf16 bits.
pub inline fn bf16ToF32V(comptime N: comptime_int, bits: @Vector(N, u16)) @Vector(N, f32) {
    const w: @Vector(N, u32) = bits;
    return @bitCast(w << @as(@Vector(N, u5), @splat(16)));
}

/// A weight (bf16 bits or f32) widened exactly to f64: every kernel that reads a matrix in
/// place widens through these two.
pub inline fn weightF64(comptime W: type, w: W) f64 {
    return switch (W) {
        u16 => bf16ToF32(w),
        f32 => w,
        else => @compileError("weights are bf16 bits (u16) or f32"),
    };
}

/// N consecutive weights widened exactly to f64.
pub inline fn weightsF64(comptime W: type, comptime N: usize, p: [*]const W) @Vector(N, f64) {
    return switch (W) {
        u16 => @floatCast(bf16ToF32V(N, p[0..N].*)),
        f32 => @floatCast(@as(@Vector(N, f32), p[0..N].*)),
        else => @compileError("weights are bf16 bits (u16) or f32"),
    };
}

/// Overflow-checked product of sizes (element counts) for argument checks.
pub fn mulSize(a: usize, b: usize) Error!usize {
    return std.math.mul(usize, a, b) catch error.BadArgument;
}

/// dst[i] = f32(src[i]) for bf16 bits (embedding rows, small vectors at load time).
pub fn widenBf16(src: [*]const u16, dst: [*]f32, count: usize) void {
    var i: usize = 0;
    while (i + 8 <= count) : (i += 8) dst[i..][0..8].* = bf16ToF32V(8, src[i..][0..8].*);
    while (i < count) : (i += 1) dst[i] = bf16ToF32(src[i]);
}

/// `widenBf16` for the ABI (table.zig `widen_bf16`): refuses an empty count.
pub fn widenBf16Checked(src: [*]const u16, dst: [*]f32, count: usize) Error!void {
    if (count == 0) return error.BadArgument;
    widenBf16(src, dst, count);
}

/// True in the compilation of the AVX-512 variant (x86-64-v4: AVX512F, BW, DQ, VL; zig/isa/):
/// kernels with code of their own for it select that code at compile time with this.
pub const wide = @import("builtin").cpu.arch == .x86_64 and
    std.Target.x86.featureSetHasAll(@import("builtin").cpu.features, .{ .avx512f, .avx512bw, .avx512dq, .avx512vl });
