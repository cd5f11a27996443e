//! MoE router (model.md §6.10): sigmoid scores, biased top-k selection, unbiased weights.
//!
//! Per token, with x the FULL-WIDTH post-attention-normalised hidden state (E):
//!   logit_e = f32( Σ_i W[e][i]·x[i] )   f64 accumulator from +0, STRICTLY sequential i
//!                                        (no lanes; each product exact in f64)
//!   s_e = σ(logit_e)                     f32
//!   c_e = s_e + bias_e                   f32; selection only
//!   T   = repeated arg-max over c: the largest, ties to the LOWEST index, removed, k times
//!         (T is in descending c order; NaN is never preferred over a number)
//!   w_j = s_{T_j}                        UNBIASED score
//!   if renormalize: sum = Σ_j w_j in f64 in T order; inv = f32(1/(sum + 1e-20)) in f64;
//!                   w_j = f32(w_j·inv)   (also when k = 1; see the kernels report)
//!   w_j = f32(w_j·ρ)
//! Logit rows are independent: threads split experts; eight rows run interleaved (independent
//! accumulators, each still the sequential sum). Selection is per token.
const std = @import("std");
const common = @import("common.zig");
const num = @import("numerics.zig");
const matvec = @import("matvec_bf16.zig");
const pool = @import("pool");

pub const Error = common.Error;

/// Upper bound on k (the released model selects 16).
pub const max_k = 256;
const ilp = 8;

pub const Dtype = enum(u32) { bf16 = 0, f32 = 1 };

fn LogitJob(comptime W: type) type {
    return struct {
        w: [*]const W,
        experts: usize,
        e: usize,
        x64: [*]const f64,
        logits: [*]f32,
        tokens: usize,

        fn run(self: *const @This(), begin: usize, end: usize, worker: usize) void {
            _ = worker;
            const E = self.e;
            var r = begin;
            while (r + ilp <= end) : (r += ilp) {
                for (0..self.tokens) |t| {
                    const x = self.x64 + t * E;
                    var acc = [_]f64{0} ** ilp;
                    for (0..E) |i| {
                        inline for (0..ilp) |l| acc[l] = @mulAdd(f64, common.weightF64(W, self.w[(r + l) * E + i]), x[i], acc[l]);
                    }
                    inline for (0..ilp) |l| self.logits[t * self.experts + r + l] = @floatCast(acc[l]);
                }
            }
            while (r < end) : (r += 1) {
                for (0..self.tokens) |t| {
                    const x = self.x64 + t * E;
                    var acc: f64 = 0;
                    for (0..E) |i| acc = acc + common.weightF64(W, self.w[r * E + i]) * x[i];
                    self.logits[t * self.experts + r] = @floatCast(acc);
                }
            }
        }
    };
}

pub const Params = extern struct {
    experts: usize,
    e: usize,
    k: usize,
    renormalize: bool,
    rho: f32,
};

/// Selection and weights for one token from its logits (overwritten with the scores s).
fn select(scores: []f32, bias: []const f32, k: usize, renormalize: bool, rho: f32, idx: []u32, weights: []f32) void {
    std.debug.assert(k >= 1 and k <= scores.len and k <= max_k and bias.len == scores.len and idx.len == k and weights.len == k);
    for (scores) |*v| v.* = num.sigmoidS(v.*);
    // Which experts are taken: a stack bitmap up to 4096 experts (released: 896); beyond that
    // the already-selected list is searched (k is small).
    var taken_buf: [4096]bool = undefined;
    const use_buf = scores.len <= taken_buf.len;
    if (use_buf) @memset(taken_buf[0..scores.len], false);
    for (0..k) |j| {
        var best: ?usize = null;
        var best_c: f32 = 0;
        for (scores, 0..) |s, e| {
            if (use_buf) {
                if (taken_buf[e]) continue;
            } else if (std.mem.indexOfScalar(u32, idx[0..j], @intCast(e)) != null) continue;
            const c = s + bias[e];
            if (best == null or (std.math.isNan(best_c) and !std.math.isNan(c)) or c > best_c) {
                best = e;
                best_c = c;
            }
        }
        const b = best.?;
        if (use_buf) taken_buf[b] = true;
        idx[j] = @intCast(b);
        weights[j] = scores[b];
    }
    if (renormalize) {
        var sum: f64 = 0;
        for (weights[0..k]) |w| sum = sum + @as(f64, w);
        const inv: f32 = @floatCast(1.0 / (sum + 1e-20));
        for (weights[0..k]) |*w| w.* = w.* * inv;
    }
    for (weights[0..k]) |*w| w.* = w.* * rho;
}

/// `route` for the ABI (table.zig `router`): `w` in the dtype `w_dtype` says, the parameters
/// as counts (`renormalize` ≠ 0 renormalises).
pub fn routeEntry(w: *const anyopaque, w_dtype: Dtype, bias: [*]const f32, x: [*]const f32, tokens: usize, experts: usize, e: usize, k: usize, renormalize: u32, rho: f32, idx: [*]u32, weights: [*]f32, scores: ?[*]f32) Error!void {
    const p = Params{ .experts = experts, .e = e, .k = k, .renormalize = renormalize != 0, .rho = rho };
    return switch (w_dtype) {
        .bf16 => route(u16, @ptrCast(@alignCast(w)), bias, x, tokens, p, idx, weights, scores),
        .f32 => route(f32, @ptrCast(@alignCast(w)), bias, x, tokens, p, idx, weights, scores),
    };
}

/// Routes T tokens. x: [T][E] f32; w: [experts][E] bf16 bits or f32; bias: [experts] f32.
/// idx: [T][k] u32 in selection order; weights: [T][k] f32. scores (optional, [T][experts])
/// receives σ(logit) for every expert; when null the kernel uses pool scratch instead.
pub fn route(comptime W: type, w: [*]const W, bias: [*]const f32, x: [*]const f32, tokens: usize, p: Params, idx: [*]u32, weights: [*]f32, scores: ?[*]f32) Error!void {
    if (tokens == 0 or p.experts == 0 or p.e == 0 or p.k == 0 or p.k > p.experts or p.k > max_k) return error.BadArgument;
    const logit_count = try common.mulSize(tokens, p.experts);
    // x widened to f64 and (when no output buffer was given) the logits share one buffer
    const x_count = try common.mulSize(tokens, p.e);
    const shared_bytes = try common.mulSize(x_count, 8) + (if (scores == null) try common.mulSize(logit_count, 4) else 0);
    const buf = pool.reserveShared(shared_bytes) catch return error.OutOfMemory;
    const x64: [*]f64 = @ptrCast(buf.ptr);
    matvec.widen(x, x64, x_count);
    const logits: [*]f32 = scores orelse @ptrCast(@alignCast(buf.ptr + x_count * 8));
    const job = LogitJob(W){ .w = w, .experts = p.experts, .e = p.e, .x64 = x64, .logits = logits, .tokens = tokens };
    pool.parallelFor(p.experts, @max(ilp, matvec.grainRows(p.e, tokens)), &job, LogitJob(W).run);
    for (0..tokens) |t| {
        select(logits[t * p.experts ..][0..p.experts], bias[0..p.experts], p.k, p.renormalize, p.rho, idx[t * p.k ..][0..p.k], weights[t * p.k ..][0..p.k]);
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "router: sequential logits, bias selects, unbiased weights, ties to lowest index" {
    const E = 5;
    const Ne = 4;
    // rows give logits 0, 0, 1, -1 for x = [1, 0, 0, 0, 0]
    const w = [_]f32{ 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, -1, 0, 0, 0, 0 };
    const x = [_]f32{ 1, 0, 0, 0, 0 };
    const bias = [_]f32{ 0, 0, -1, 2 };
    var idx: [2]u32 = undefined;
    var wt: [2]f32 = undefined;
    var sc: [Ne]f32 = undefined;
    try route(f32, &w, &bias, &x, 1, .{ .experts = Ne, .e = E, .k = 2, .renormalize = false, .rho = 1.0 }, &idx, &wt, &sc);
    // c = σ(0), σ(0), σ(1)-1, σ(-1)+2: expert 3 first, then the tie 0/1 goes to 0
    try testing.expectEqualSlices(u32, &.{ 3, 0 }, &idx);
    try testing.expectEqual(num.sigmoidS(-1), wt[0]); // unbiased
    try testing.expectEqual(@as(f32, 0.5), wt[1]);
    try route(f32, &w, &bias, &x, 1, .{ .experts = Ne, .e = E, .k = 2, .renormalize = true, .rho = 2.5 }, &idx, &wt, null);
    const s3: f32 = num.sigmoidS(-1);
    const inv: f32 = @floatCast(1.0 / ((@as(f64, s3) + 0.5) + 1e-20));
    try testing.expectEqual((s3 * inv) * 2.5, wt[0]);
}

test "router logits are the strictly sequential f64 sum (not the lane order)" {
    // 1e16, then sixteen 1s, then -1e16: sequential f64 loses every 1 against 1e16;
    // a 16-lane order would keep some.
    const E = 18;
    var w: [E]f32 = undefined;
    var x: [E]f32 = undefined;
    for (0..E) |i| {
        w[i] = 1;
        x[i] = 1;
    }
    x[0] = 1e16;
    x[17] = -1e16;
    var seq: f64 = 0;
    for (0..E) |i| seq += @as(f64, w[i]) * x[i];
    var idx: [1]u32 = undefined;
    var wt: [1]f32 = undefined;
    var sc: [1]f32 = undefined;
    const bias = [_]f32{0};
    try route(f32, &w, &bias, &x, 1, .{ .experts = 1, .e = E, .k = 1, .renormalize = false, .rho = 1 }, &idx, &wt, &sc);
    try testing.expectEqual(num.sigmoidS(@floatCast(seq)), sc[0]);
}
