//! SiTU-GLU (model.md §6.3) and the other elementwise operators of the forward pass.
//!
//! SiTU-GLU, every step an f32 operation, left to right:
//!     a = (β1·tanh(g/β1))·σ(g)        σ takes the UNCAPPED gate g
//!     b =  β2·tanh(u/β2)
//!     y = a·b                          |y| ≤ β1·β2
//! tanh and σ come from numerics.zig (one implementation for every path). The 8-wide loop and
//! the scalar tail run the same per-lane operations, so results do not depend on where an
//! element falls; the scalar path (k3_kernel_path) runs everything one lane at a time.
//! Work is split over elements in fixed chunks across threads; each element is independent.
const std = @import("std");
const common = @import("common.zig");
const num = @import("numerics.zig");
const pool = @import("pool");

pub const Error = common.Error;

const W = 8; // vector width of the SIMD path
const grain_elems = 16 * 1024;

inline fn situLanes(comptime N: comptime_int, g: @Vector(N, f32), u: @Vector(N, f32), b1: f32, b2: f32) @Vector(N, f32) {
    const v1: @Vector(N, f32) = @splat(b1);
    const v2: @Vector(N, f32) = @splat(b2);
    const a = (v1 * num.tanh(N, g / v1)) * num.sigmoid(N, g);
    const b = v2 * num.tanh(N, u / v2);
    return a * b;
}

/// Elementwise operators available through `elementwise` (and k3_vmath for the transcendentals).
pub const Op = enum(u32) {
    /// y = e^x
    exp = 0,
    /// y = σ(x)
    sigmoid = 1,
    /// y = tanh(x)
    tanh = 2,
    /// y = x·σ(x)
    silu = 3,
    /// y = ln(1 + e^x) (scalar only; not used by K3's forward pass)
    softplus = 4,
    /// y = x·σ(g)  (output gates: KDA after o_norm, MLA without a norm)
    gate = 5,
    /// y = x + g
    add = 6,
    /// y = x + f32(a·g)  (a scalar; the MoE aggregate acc ← acc + w_j·d)
    axpy = 7,
    /// y = SiTU-GLU(gate = x, up = g) with β1 = a, β2 = b
    situ = 8,
};

inline fn lanes(comptime N: comptime_int, op: Op, x: @Vector(N, f32), g: @Vector(N, f32), a: f32, b: f32) @Vector(N, f32) {
    return switch (op) {
        .exp => num.exp(N, x),
        .sigmoid => num.sigmoid(N, x),
        .tanh => num.tanh(N, x),
        .silu => num.silu(N, x),
        .softplus => blk: {
            var out: @Vector(N, f32) = undefined;
            inline for (0..N) |l| out[l] = num.softplus(x[l]);
            break :blk out;
        },
        .gate => x * num.sigmoid(N, g),
        .add => x + g,
        .axpy => x + @as(@Vector(N, f32), @splat(a)) * g,
        .situ => situLanes(N, x, g, a, b),
    };
}

/// Whether `op` reads the second operand g.
pub fn takesSecond(op: Op) bool {
    return switch (op) {
        .gate, .add, .axpy, .situ => true,
        else => false,
    };
}

fn runRange(op: Op, x: [*]const f32, g: [*]const f32, y: [*]f32, a: f32, b: f32, begin: usize, end: usize, scalar: bool) void {
    var i = begin;
    const two = takesSecond(op);
    if (!scalar) {
        while (i + W <= end) : (i += W) {
            const xv: @Vector(W, f32) = x[i..][0..W].*;
            const gv: @Vector(W, f32) = if (two) g[i..][0..W].* else xv;
            y[i..][0..W].* = lanes(W, op, xv, gv, a, b);
        }
    }
    while (i < end) : (i += 1) {
        const xv: @Vector(1, f32) = .{x[i]};
        const gv: @Vector(1, f32) = .{if (two) g[i] else x[i]};
        y[i] = lanes(1, op, xv, gv, a, b)[0];
    }
}

const Job = struct {
    op: Op,
    x: [*]const f32,
    g: [*]const f32,
    y: [*]f32,
    a: f32,
    b: f32,
    scalar: bool,

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        // items are chunks of grain_elems elements
        const n_end = end * grain_elems;
        runRange(self.op, self.x, self.g, self.y, self.a, self.b, begin * grain_elems, n_end, self.scalar);
    }
};

/// y[i] = op(x[i], g[i]) for i < count. g is ignored (may be null) for one-operand ops.
/// y may alias x or g.
pub fn elementwise(op: Op, x: [*]const f32, g: ?[*]const f32, y: [*]f32, count: usize, a: f32, b: f32) Error!void {
    if (count == 0) return error.BadArgument;
    if (takesSecond(op) and g == null) return error.BadArgument;
    const scalar = common.path() == .scalar;
    const second = g orelse x;
    const full_chunks = count / grain_elems;
    if (full_chunks > 0) {
        const job = Job{ .op = op, .x = x, .g = second, .y = y, .a = a, .b = b, .scalar = scalar };
        pool.parallelFor(full_chunks, 1, &job, Job.run);
    }
    runRange(op, x, second, y, a, b, full_chunks * grain_elems, count, scalar);
}

/// SiTU-GLU over `count` elements: gate[i], up[i] -> y[i].
pub fn situGlu(gate: [*]const f32, up: [*]const f32, y: [*]f32, count: usize, beta1: f32, beta2: f32) Error!void {
    return elementwise(.situ, gate, up, y, count, beta1, beta2);
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "SiTU saturates at exactly 100 with β = 4, 25 and takes σ of the uncapped gate" {
    var g = [_]f32{ 1000, 0.5, -1000, 3.0 };
    var u = [_]f32{ -1000, 0.5, 1000, 2.0 };
    var y: [4]f32 = undefined;
    try situGlu(&g, &u, &y, 4, 4.0, 25.0);
    try testing.expectEqual(@as(f32, -100), y[0]);
    try testing.expect(@abs(y[2]) <= 100);
    const gc: f32 = 3.0;
    const want = ((4.0 * num.tanhS(gc / 4.0)) * num.sigmoidS(gc)) * (25.0 * num.tanhS(@as(f32, 2.0) / 25.0));
    try testing.expectEqual(want, y[3]);
}

test "axpy rounds the product before the add (no contraction)" {
    // a·g = (1 + 2^-23)² = 1 + 2^-22 + 2^-46 exactly; f32 rounds it to 1 + 2^-22, then + (-1)
    // gives 2^-22. A fused multiply-add would give 2^-22 + 2^-46.
    var x = [_]f32{-1.0};
    var g = [_]f32{1.0 + 0x1p-23};
    var y: [1]f32 = undefined;
    try elementwise(.axpy, &x, &g, &y, 1, 1.0 + 0x1p-23, 0);
    try testing.expectEqual(@as(f32, 0x1p-22), y[0]);
}

test "elementwise ops: SIMD, scalar path and chunk boundaries agree bit for bit" {
    var prng = std.Random.DefaultPrng.init(17);
    const rnd = prng.random();
    const alloc = testing.allocator;
    const n = grain_elems * 2 + 13;
    const x = try alloc.alloc(f32, n);
    defer alloc.free(x);
    const g = try alloc.alloc(f32, n);
    defer alloc.free(g);
    const y1 = try alloc.alloc(f32, n);
    defer alloc.free(y1);
    const y2 = try alloc.alloc(f32, n);
    defer alloc.free(y2);
    for (x, g) |*a, *b| {
        a.* = (rnd.float(f32) * 2 - 1) * 30;
        b.* = (rnd.float(f32) * 2 - 1) * 30;
    }
    for ([_]Op{ .exp, .sigmoid, .tanh, .silu, .softplus, .gate, .add, .axpy, .situ }) |op| {
        try elementwise(op, x.ptr, g.ptr, y1.ptr, n, 0.75, 25.0);
        common.setPath(.scalar);
        try elementwise(op, x.ptr, g.ptr, y2.ptr, n, 0.75, 25.0);
        common.setPath(.simd);
        try testing.expectEqualSlices(u32, @ptrCast(y1), @ptrCast(y2));
        // an odd offset moves every element to a different lane position
        try elementwise(op, x.ptr + 3, g.ptr + 3, y2.ptr, n - 3, 0.75, 25.0);
        try testing.expectEqualSlices(u32, @ptrCast(y1[3..]), @ptrCast(y2[0 .. n - 3]));
    }
}
