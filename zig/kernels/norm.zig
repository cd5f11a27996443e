//! RMSNorm (model.md §6.2) and L2Norm (§6.4), row by row.
//!
//! Order and precision (§8.3), identical on every path:
//!   RMSNorm: ss = Σ_i x_i² in f64, sequential i = 0 … n−1 (each square exact in f64);
//!            r  = f32( 1 / sqrt(ss/n + ε) ) computed in f64 (ε is the f32 value, widened);
//!            y_i = f32( f32(w_i·x_i) · r ), or f32(x_i·r) without a gain.
//!   L2Norm:  ss as above; r = f32( 1 / sqrt(ss + 1e-6) ) in f64; y_i = f32(x_i·r).
//! The elementwise products are the same IEEE operations on every lane, so the 8-wide loop and
//! the scalar tail (and the scalar path) give identical bits. Rows are independent; threads
//! split rows. y may alias x (in place).
const std = @import("std");
const common = @import("common.zig");
const pool = @import("pool");

pub const Error = common.Error;

/// L2Norm epsilon (inside the square root, added to the SUM of squares).
pub const l2_eps: f64 = 1e-6;

const F8 = @Vector(8, f32);

pub fn sumSquares(x: []const f32) f64 {
    var ss: f64 = 0;
    for (x) |v| {
        const d: f64 = v;
        ss = @mulAdd(f64, d, d, ss); // the square is exact in f64: same as multiply then add
    }
    return ss;
}

/// The RMSNorm scale factor of one row: f32(1/sqrt(Σx²/n + ε)).
pub fn rmsScale(x: []const f32, eps: f32) f32 {
    const n: f64 = @floatFromInt(x.len);
    return @floatCast(1.0 / @sqrt(sumSquares(x) / n + @as(f64, eps)));
}

/// y = x·r elementwise, or (w·x)·r with a gain.
fn scaleRow(x: []const f32, w: ?[]const f32, r: f32, y: []f32, scalar: bool) void {
    const n = x.len;
    var i: usize = 0;
    if (!scalar) {
        const rv: F8 = @splat(r);
        while (i + 8 <= n) : (i += 8) {
            const xv: F8 = x[i..][0..8].*;
            y[i..][0..8].* = if (w) |g| (@as(F8, g[i..][0..8].*) * xv) * rv else xv * rv;
        }
    }
    while (i < n) : (i += 1) {
        y[i] = if (w) |g| (g[i] * x[i]) * r else x[i] * r;
    }
}

const Kind = enum { rms, l2 };

const Job = struct {
    kind: Kind,
    x: [*]const f32,
    w: ?[*]const f32,
    y: [*]f32,
    n: usize,
    eps: f32,
    scalar: bool,

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const n = self.n;
        for (begin..end) |row| {
            const x = self.x[row * n ..][0..n];
            const r: f32 = switch (self.kind) {
                .rms => rmsScale(x, self.eps),
                .l2 => @floatCast(1.0 / @sqrt(sumSquares(x) + l2_eps)),
            };
            const w: ?[]const f32 = if (self.w) |g| g[0..n] else null;
            scaleRow(x, w, r, self.y[row * n ..][0..n], self.scalar);
        }
    }
};

fn grain(n: usize) usize {
    return @max(1, (32 * 1024) / @max(n, 1));
}

/// RMSNorm of `rows` rows of n elements; `w` (n gains) may be null for no gain.
pub fn rmsnorm(x: [*]const f32, w: ?[*]const f32, y: [*]f32, rows: usize, n: usize, eps: f32) Error!void {
    if (rows == 0 or n == 0) return error.BadArgument;
    const job = Job{ .kind = .rms, .x = x, .w = w, .y = y, .n = n, .eps = eps, .scalar = common.path() == .scalar };
    pool.parallelFor(rows, grain(n), &job, Job.run);
}

/// L2Norm of `rows` rows of n elements (KDA q and k, one row per head).
pub fn l2norm(x: [*]const f32, y: [*]f32, rows: usize, n: usize) Error!void {
    if (rows == 0 or n == 0) return error.BadArgument;
    const job = Job{ .kind = .l2, .x = x, .w = null, .y = y, .n = n, .eps = 0, .scalar = common.path() == .scalar };
    pool.parallelFor(rows, grain(n), &job, Job.run);
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "rmsnorm follows the documented order; SIMD equals scalar; in place works" {
    var prng = std.Random.DefaultPrng.init(11);
    const rnd = prng.random();
    const n = 37;
    var x: [2 * n]f32 = undefined;
    var w: [n]f32 = undefined;
    for (&x) |*v| v.* = rnd.float(f32) * 4 - 2;
    for (&w) |*v| v.* = 1 + (rnd.float(f32) - 0.5) * 0.2;
    var y: [2 * n]f32 = undefined;
    try rmsnorm(&x, &w, &y, 2, n, 1e-5);
    for (0..2) |row| {
        var ss: f64 = 0;
        for (x[row * n ..][0..n]) |v| ss += @as(f64, v) * v;
        const r: f32 = @floatCast(1.0 / @sqrt(ss / n + @as(f64, @as(f32, 1e-5))));
        for (0..n) |i| try testing.expectEqual((w[i] * x[row * n + i]) * r, y[row * n + i]);
    }
    common.setPath(.scalar);
    var ys: [2 * n]f32 = undefined;
    try rmsnorm(&x, &w, &ys, 2, n, 1e-5);
    common.setPath(.simd);
    try testing.expectEqualSlices(u32, @ptrCast(&y), @ptrCast(&ys));
    try rmsnorm(&x, &w, &x, 2, n, 1e-5);
    try testing.expectEqualSlices(u32, @ptrCast(&y), @ptrCast(&x));
}

test "l2norm uses the SUM of squares" {
    var x = [_]f32{ 3, 4, 0, 0 };
    var y: [4]f32 = undefined;
    try l2norm(&x, &y, 1, 4);
    try testing.expectApproxEqAbs(@as(f32, 0.6), y[0], 1e-6);
    try testing.expectApproxEqAbs(@as(f32, 0.8), y[1], 1e-6);
}
