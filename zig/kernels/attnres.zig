//! Attention Residuals aggregator (model.md §6.8): softmax over depth sources, per token.
//!
//! Inputs: n sources s_0 … s_{n−1}, each a [T][E] f32 buffer (the block list in push order,
//! token embedding first, then the running partial sum last), and the folded vector
//! φ = norm_weight ⊙ proj_weight [E] (folded once at load time).
//!
//! Order and precision (§6.8, §8.3), per token:
//!   r_i     = f32( 1/sqrt(Σ_j s_i[j]²/E + ε) )     Σ in f64, sequential j (the RMSNorm factor)
//!   score_i = f32( Σ_j f32(s_i[j]·r_i) · φ[j] )    f64 accumulator from +0, sequential j
//!   m = max_i score_i;  e_i = exp(score_i − m) (f32);  Z = Σ_i e_i (f64, i ascending)
//!   p_i     = f32(e_i / Z)                          division in f64
//!   out[j]  = Σ_i p_i·s_i[j]                        f32 from +0, sources in list order
//! KEYS are normalised, VALUES are the raw sources. The per-source sums are independent
//! chains and run interleaved; each is still the sequential sum above. Tokens are independent;
//! threads split tokens. `out` must not alias a source.
const std = @import("std");
const common = @import("common.zig");
const num = @import("numerics.zig");
const pool = @import("pool");

pub const Error = common.Error;

/// Upper bound on sources (the released model aggregates at most 9).
pub const max_sources = 64;

const F8 = @Vector(8, f32);

const Job = struct {
    sources: [*]const [*]const f32,
    n: usize,
    phi: [*]const f32,
    out: [*]f32,
    probs: ?[*]f32,
    e: usize,
    eps: f32,
    scalar: bool,

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        for (begin..end) |t| self.token(t);
    }

    fn token(self: *const Job, t: usize) void {
        const E = self.e;
        const n = self.n;
        std.debug.assert(n >= 1 and n <= max_sources);
        var src: [max_sources][*]const f32 = undefined;
        for (0..n) |i| src[i] = self.sources[i] + t * E;
        // r_i: sums of squares, interleaved over sources
        var ss = [_]f64{0} ** max_sources;
        for (0..E) |j| {
            for (0..n) |i| {
                const v: f64 = src[i][j];
                ss[i] = @mulAdd(f64, v, v, ss[i]);
            }
        }
        var r: [max_sources]f32 = undefined;
        const ef: f64 = @floatFromInt(E);
        for (0..n) |i| r[i] = @floatCast(1.0 / @sqrt(ss[i] / ef + @as(f64, self.eps)));
        // scores
        var acc = [_]f64{0} ** max_sources;
        for (0..E) |j| {
            const phi: f64 = self.phi[j];
            for (0..n) |i| {
                const key: f64 = src[i][j] * r[i];
                acc[i] = @mulAdd(f64, key, phi, acc[i]);
            }
        }
        var score: [max_sources]f32 = undefined;
        for (0..n) |i| score[i] = @floatCast(acc[i]);
        // softmax over sources
        var m = score[0];
        for (score[1..n]) |v| m = @max(m, v);
        var ex: [max_sources]f32 = undefined;
        var z: f64 = 0;
        for (0..n) |i| {
            ex[i] = num.expS(score[i] - m);
            z = z + @as(f64, ex[i]);
        }
        var p: [max_sources]f32 = undefined;
        for (0..n) |i| p[i] = @floatCast(@as(f64, ex[i]) / z);
        if (self.probs) |pr| @memcpy(pr[t * n ..][0..n], p[0..n]);
        // out = Σ_i p_i·s_i (raw values), sources in order
        const o = self.out + t * E;
        var j: usize = 0;
        if (!self.scalar) {
            while (j + 8 <= E) : (j += 8) {
                var a: F8 = @splat(0);
                for (0..n) |i| a = a + @as(F8, @splat(p[i])) * @as(F8, src[i][j..][0..8].*);
                o[j..][0..8].* = a;
            }
        }
        while (j < E) : (j += 1) {
            var a: f32 = 0;
            for (0..n) |i| a = a + p[i] * src[i][j];
            o[j] = a;
        }
    }
};

/// out[t] = AR(sources[·][t]; φ) for t < tokens. `sources` is an array of n pointers, each to a
/// [T][E] buffer. `probs` (optional, [T][n]) receives the softmax weights p.
pub fn aggregate(sources: [*]const [*]const f32, n: usize, phi: [*]const f32, out: [*]f32, probs: ?[*]f32, tokens: usize, e: usize, eps: f32) Error!void {
    if (n == 0 or n > max_sources or tokens == 0 or e == 0) return error.BadArgument;
    const job = Job{ .sources = sources, .n = n, .phi = phi, .out = out, .probs = probs, .e = e, .eps = eps, .scalar = common.path() == .scalar };
    pool.parallelFor(tokens, 1, &job, Job.run);
}

/// `aggregate` for the ABI (table.zig `attnres`): the address list may hold nulls, refused.
pub fn aggregateList(sources: [*]const ?[*]const f32, n: usize, phi: [*]const f32, out: [*]f32, probs: ?[*]f32, tokens: usize, e: usize, eps: f32) Error!void {
    if (n == 0 or n > max_sources) return error.BadArgument;
    for (sources[0..n]) |s| if (s == null) return error.BadArgument;
    return aggregate(@ptrCast(sources), n, phi, out, probs, tokens, e, eps);
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "single source is the identity; values are raw; SIMD == scalar" {
    var prng = std.Random.DefaultPrng.init(37);
    const rnd = prng.random();
    const E = 21;
    const T = 2;
    var s0: [T * E]f32 = undefined;
    var s1: [T * E]f32 = undefined;
    var s2: [T * E]f32 = undefined;
    var phi: [E]f32 = undefined;
    for (&s0, &s1, &s2) |*a, *b, *c| {
        a.* = rnd.floatNorm(f32);
        b.* = 10 * rnd.floatNorm(f32);
        c.* = 0.1 * rnd.floatNorm(f32);
    }
    for (&phi) |*v| v.* = rnd.floatNorm(f32);
    var out: [T * E]f32 = undefined;
    const one = [_][*]const f32{&s1};
    try aggregate(&one, 1, &phi, &out, null, T, E, 1e-5);
    try testing.expectEqualSlices(u32, @ptrCast(&s1), @ptrCast(&out));
    const three = [_][*]const f32{ &s0, &s1, &s2 };
    var probs: [T * 3]f32 = undefined;
    try aggregate(&three, 3, &phi, &out, &probs, T, E, 1e-5);
    for (0..T) |t| {
        for (0..E) |j| {
            const want = ((0 + probs[t * 3] * s0[t * E + j]) + probs[t * 3 + 1] * s1[t * E + j]) + probs[t * 3 + 2] * s2[t * E + j];
            try testing.expectEqual(want, out[t * E + j]);
        }
    }
    var out2: [T * E]f32 = undefined;
    common.setPath(.scalar);
    try aggregate(&three, 3, &phi, &out2, null, T, E, 1e-5);
    common.setPath(.simd);
    try testing.expectEqualSlices(u32, @ptrCast(&out), @ptrCast(&out2));
}
