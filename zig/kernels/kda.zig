//! Kimi Delta Attention pieces (model.md §6.6): the decay chain, the delta-rule recurrence,
//! and the gated output norm. Projections, ShortConv, L2Norm and σ(β) are separate kernels.
//!
//! Shapes: Hk heads of width D; P = Hk·D; every P-wide vector is head-major (index h·D + d).
//!
//! Decay (per token, per channel i = h·D + d), all f32:
//!     a_h = exp(A_log[h])          ONE value per HEAD (A_log indexed by h, never by i)
//!     u_i = a_h · (z_i + dt_bias_i)
//!     g_i = gmin · σ(u_i)          log-decay in [gmin, 0]
//!     α_i = exp(g_i)               retention
//!
//! Recurrence (per head; S is D×D f32, row i = key channel, column j = value channel), per
//! token, all f32, in this order:
//!     q'_i = q_i · qscale                      (qscale = f32(D^−1/2) normally; q pre-scaled → 1)
//!     (a) S[i][j] ← α_i · S[i][j]              decay every row
//!     (b) u_j = Σ_i k_i · S[i][j]              from the DECAYED state, sequential i = 0 … D−1
//!     (c) S[i][j] ← S[i][j] + (k_i·β)·(v_j − u_j)
//!     (d) o_j = Σ_i q'_i · S[i][j]             from the UPDATED state, sequential i
//! Sums start at +0 and add one rounded product at a time (no fused multiply-add). The SIMD
//! path vectorises over j (8 value channels per register): every lane runs exactly the scalar
//! sequence for its j. Threads split heads; each head runs its T tokens in order.
//!
//! Gated norm (steps 7-8): y = RMSNorm_head(o; o_norm, ε) ⊙ σ(gate): norm FIRST, then the gate
//! (MLA's gate has no norm and uses the plain `gate` elementwise op, never this one).
const std = @import("std");
const common = @import("common.zig");
const num = @import("numerics.zig");
const norm = @import("norm.zig");
const pool = @import("pool");

pub const Error = common.Error;

const F8 = @Vector(8, f32);

// ---------------------------------------------------------------------------------------------
// Decay

const DecayJob = struct {
    z: [*]const f32,
    a_log: [*]const f32,
    dt_bias: [*]const f32,
    alpha: [*]f32,
    g_out: ?[*]f32,
    heads: usize,
    d: usize,
    gmin: f32,
    scalar: bool,

    fn run(self: *const DecayJob, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const P = self.heads * self.d;
        // items are (token, head) pairs
        for (begin..end) |item| {
            const t = item / self.heads;
            const h = item % self.heads;
            const a = num.expS(self.a_log[h]);
            const base = t * P + h * self.d;
            var i: usize = 0;
            if (!self.scalar) {
                while (i + 8 <= self.d) : (i += 8) {
                    const c = h * self.d + i;
                    const u = @as(F8, @splat(a)) * (@as(F8, self.z[base + i ..][0..8].*) + @as(F8, self.dt_bias[c..][0..8].*));
                    const g = @as(F8, @splat(self.gmin)) * num.sigmoid(8, u);
                    if (self.g_out) |go| go[base + i ..][0..8].* = g;
                    self.alpha[base + i ..][0..8].* = num.exp(8, g);
                }
            }
            while (i < self.d) : (i += 1) {
                const u = a * (self.z[base + i] + self.dt_bias[h * self.d + i]);
                const g = self.gmin * num.sigmoidS(u);
                if (self.g_out) |go| go[base + i] = g;
                self.alpha[base + i] = num.expS(g);
            }
        }
    }
};

/// α (and optionally g) for T tokens. z: [T][P] = W_fb·W_fa·x before dt_bias; a_log: the first
/// Hk values of A_log; dt_bias: [P]. alpha, g_out: [T][P]. Outputs may alias z.
pub fn decay(z: [*]const f32, a_log: [*]const f32, dt_bias: [*]const f32, alpha: [*]f32, g_out: ?[*]f32, tokens: usize, heads: usize, d: usize, gmin: f32) Error!void {
    if (tokens == 0 or heads == 0 or d == 0) return error.BadArgument;
    const job = DecayJob{ .z = z, .a_log = a_log, .dt_bias = dt_bias, .alpha = alpha, .g_out = g_out, .heads = heads, .d = d, .gmin = gmin, .scalar = common.path() == .scalar };
    pool.parallelFor(try common.mulSize(tokens, heads), @max(1, 8192 / d), &job, DecayJob.run);
}

// ---------------------------------------------------------------------------------------------
// Recurrence

/// Upper bound on D (the released model has 128): a named limit for the per-head stack vectors.
pub const max_head_dim = 512;

/// One token of one head. `s` is the head's D×D state; q, k, v, alpha are the head's D-slices.
fn step(s: []f32, q: []const f32, k: []const f32, v: []const f32, alpha: []const f32, beta: f32, qscale: f32, o: []f32, scalar: bool) void {
    const D = q.len;
    std.debug.assert(D <= max_head_dim and k.len == D and v.len == D and alpha.len == D and o.len == D and s.len == D * D);
    var u: [max_head_dim]f32 = undefined;
    var delta: [max_head_dim]f32 = undefined;
    @memset(u[0..D], 0);
    @memset(o[0..D], 0);
    const vec_end = if (scalar) 0 else D - D % 8;
    // (a) decay and (b) read from the decayed state
    for (0..D) |i| {
        const row = s[i * D ..][0..D];
        const ai = alpha[i];
        const ki = k[i];
        var j: usize = 0;
        while (j < vec_end) : (j += 8) {
            const r = @as(F8, @splat(ai)) * @as(F8, row[j..][0..8].*);
            row[j..][0..8].* = r;
            u[j..][0..8].* = @as(F8, u[j..][0..8].*) + @as(F8, @splat(ki)) * r;
        }
        while (j < D) : (j += 1) {
            const r = ai * row[j];
            row[j] = r;
            u[j] = u[j] + ki * r;
        }
    }
    for (0..D) |j| delta[j] = v[j] - u[j];
    // (c) delta write and (d) output from the updated state
    for (0..D) |i| {
        const row = s[i * D ..][0..D];
        const kb = k[i] * beta;
        const qi = q[i] * qscale;
        var j: usize = 0;
        while (j < vec_end) : (j += 8) {
            const r = @as(F8, row[j..][0..8].*) + @as(F8, @splat(kb)) * @as(F8, delta[j..][0..8].*);
            row[j..][0..8].* = r;
            o[j..][0..8].* = @as(F8, o[j..][0..8].*) + @as(F8, @splat(qi)) * r;
        }
        while (j < D) : (j += 1) {
            const r = row[j] + kb * delta[j];
            row[j] = r;
            o[j] = o[j] + qi * r;
        }
    }
}

const RecJob = struct {
    q: [*]const f32,
    k: [*]const f32,
    v: [*]const f32,
    alpha: [*]const f32,
    beta: [*]const f32,
    state: [*]f32,
    o: [*]f32,
    tokens: usize,
    heads: usize,
    d: usize,
    qscale: f32,
    scalar: bool,

    fn run(self: *const RecJob, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const D = self.d;
        const P = self.heads * D;
        for (begin..end) |h| {
            const s = self.state[h * D * D ..][0 .. D * D];
            for (0..self.tokens) |t| {
                const off = t * P + h * D;
                step(s, self.q[off..][0..D], self.k[off..][0..D], self.v[off..][0..D], self.alpha[off..][0..D], self.beta[t * self.heads + h], self.qscale, self.o[off..][0..D], self.scalar);
            }
        }
    }
};

/// The recurrence over T tokens for all heads. q, k: [T][P] L2-normalised (q NOT yet scaled:
/// the kernel multiplies by `qscale`); v, alpha: [T][P]; beta: [T][Hk] (already σ'd);
/// state: [Hk][D][D] in/out; o: [T][P] (must not alias the inputs).
pub fn recurrence(q: [*]const f32, k: [*]const f32, v: [*]const f32, alpha: [*]const f32, beta: [*]const f32, state: [*]f32, o: [*]f32, tokens: usize, heads: usize, d: usize, qscale: f32) Error!void {
    if (tokens == 0 or heads == 0 or d == 0 or d > max_head_dim) return error.BadArgument;
    const job = RecJob{ .q = q, .k = k, .v = v, .alpha = alpha, .beta = beta, .state = state, .o = o, .tokens = tokens, .heads = heads, .d = d, .qscale = qscale, .scalar = common.path() == .scalar };
    pool.parallelFor(heads, @max(1, 4096 / (d * tokens)), &job, RecJob.run);
}

/// f32(D^−1/2), the query scale applied before the recurrence.
pub fn queryScale(d: usize) f32 {
    return @floatCast(1.0 / @sqrt(@as(f64, @floatFromInt(d))));
}

// ---------------------------------------------------------------------------------------------
// Gated output norm

const GateJob = struct {
    o: [*]const f32,
    w: [*]const f32,
    gate: [*]const f32,
    y: [*]f32,
    d: usize,
    eps: f32,
    scalar: bool,

    fn run(self: *const GateJob, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const D = self.d;
        for (begin..end) |row| {
            const o = self.o[row * D ..][0..D];
            const r = norm.rmsScale(o, self.eps);
            const g = self.gate[row * D ..][0..D];
            const y = self.y[row * D ..][0..D];
            var j: usize = 0;
            if (!self.scalar) {
                while (j + 8 <= D) : (j += 8) {
                    const n = (@as(F8, self.w[j..][0..8].*) * @as(F8, o[j..][0..8].*)) * @as(F8, @splat(r));
                    y[j..][0..8].* = n * num.sigmoid(8, g[j..][0..8].*);
                }
            }
            while (j < D) : (j += 1) {
                const n = (self.w[j] * o[j]) * r;
                y[j] = n * num.sigmoidS(g[j]);
            }
        }
    }
};

/// y = RMSNorm per head of o (gain w: [D], shared by all heads) ⊙ σ(gate); o, gate, y: [T][P].
/// Bit-identical to `rmsnorm` (rows = T·Hk, n = D) followed by the `gate` elementwise op.
/// y may alias o or gate.
pub fn gatedNorm(o: [*]const f32, w: [*]const f32, gate: [*]const f32, y: [*]f32, tokens: usize, heads: usize, d: usize, eps: f32) Error!void {
    if (tokens == 0 or heads == 0 or d == 0) return error.BadArgument;
    const job = GateJob{ .o = o, .w = w, .gate = gate, .y = y, .d = d, .eps = eps, .scalar = common.path() == .scalar };
    pool.parallelFor(try common.mulSize(tokens, heads), @max(1, 8192 / d), &job, GateJob.run);
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "recurrence: SIMD == scalar, T=8 == 8 x T=1, threads 1/2/3 identical; write before output" {
    var prng = std.Random.DefaultPrng.init(23);
    const rnd = prng.random();
    const alloc = testing.allocator;
    const H = 3;
    const D = 20; // 16 vector lanes + 4 tail
    const T = 8;
    const P = H * D;
    const q = try alloc.alloc(f32, T * P);
    defer alloc.free(q);
    const k = try alloc.alloc(f32, T * P);
    defer alloc.free(k);
    const v = try alloc.alloc(f32, T * P);
    defer alloc.free(v);
    const al = try alloc.alloc(f32, T * P);
    defer alloc.free(al);
    var beta: [T * H]f32 = undefined;
    for (q, k, v, al) |*a, *b, *c, *d| {
        a.* = rnd.floatNorm(f32);
        b.* = rnd.floatNorm(f32);
        c.* = rnd.floatNorm(f32);
        d.* = 0.005 + 0.99 * rnd.float(f32);
    }
    for (&beta) |*b| b.* = rnd.float(f32);
    try norm.l2norm(q.ptr, q.ptr, T * H, D);
    try norm.l2norm(k.ptr, k.ptr, T * H, D);
    const qs = queryScale(D);

    var outs: [4][T * P]f32 = undefined;
    var states: [4][H * D * D]f32 = undefined;
    // 0: SIMD, all tokens in one call
    @memset(&states[0], 0);
    try recurrence(q.ptr, k.ptr, v.ptr, al.ptr, &beta, &states[0], &outs[0], T, H, D, qs);
    // 1: scalar path
    common.setPath(.scalar);
    @memset(&states[1], 0);
    try recurrence(q.ptr, k.ptr, v.ptr, al.ptr, &beta, &states[1], &outs[1], T, H, D, qs);
    common.setPath(.simd);
    // 2: one token per call
    @memset(&states[2], 0);
    for (0..T) |t| try recurrence(q.ptr + t * P, k.ptr + t * P, v.ptr + t * P, al.ptr + t * P, beta[t * H ..].ptr, &states[2], outs[2][t * P ..].ptr, 1, H, D, qs);
    for (1..3) |c| {
        try testing.expectEqualSlices(u32, @ptrCast(&outs[0]), @ptrCast(&outs[c]));
        try testing.expectEqualSlices(u32, @ptrCast(&states[0]), @ptrCast(&states[c]));
    }
    for ([_]u32{ 1, 2, 3 }) |threads| {
        try pool.init(threads);
        pool.setFineGrain(threads > 1);
        @memset(&states[3], 0);
        try recurrence(q.ptr, k.ptr, v.ptr, al.ptr, &beta, &states[3], &outs[3], T, H, D, qs);
        try testing.expectEqualSlices(u32, @ptrCast(&outs[0]), @ptrCast(&outs[3]));
    }
    pool.setFineGrain(false);
    pool.deinit();

    // first token from zero state: S = β k vᵀ, o_j = (q'·k) β v_j (checks read-after-write)
    for (0..H) |h| {
        var qk: f32 = 0;
        for (0..D) |i| qk += (q[h * D + i] * qs) * ((k[h * D + i] * beta[h]) * v[h * D + 0]);
        try testing.expectApproxEqAbs(qk, outs[0][h * D + 0], 1e-5);
    }
}

test "decay uses A_log per head" {
    const H = 2;
    const D = 9;
    var z = [_]f32{0.3} ** (H * D);
    const a_log = [_]f32{ -0.4, 1.2 };
    const dt = [_]f32{0.1} ** (H * D);
    var alpha: [H * D]f32 = undefined;
    var g: [H * D]f32 = undefined;
    try decay(&z, &a_log, &dt, &alpha, &g, 1, H, D, -5.0);
    for (0..H) |h| {
        const a = num.expS(a_log[h]);
        const u = a * (@as(f32, 0.3) + @as(f32, 0.1));
        const gw = @as(f32, -5.0) * num.sigmoidS(u);
        for (0..D) |d| {
            try testing.expectEqual(gw, g[h * D + d]);
            try testing.expectEqual(num.expS(gw), alpha[h * D + d]);
        }
    }
    try testing.expect(alpha[0] != alpha[D]);
}

test "gated norm == rmsnorm then gate" {
    var prng = std.Random.DefaultPrng.init(29);
    const rnd = prng.random();
    const H = 2;
    const D = 12;
    var o: [H * D]f32 = undefined;
    var gate: [H * D]f32 = undefined;
    var w: [D]f32 = undefined;
    for (&o, &gate) |*a, *b| {
        a.* = rnd.floatNorm(f32);
        b.* = rnd.floatNorm(f32);
    }
    for (&w) |*a| a.* = 1 + 0.1 * rnd.floatNorm(f32);
    var y: [H * D]f32 = undefined;
    try gatedNorm(&o, &w, &gate, &y, 1, H, D, 1e-5);
    var n: [H * D]f32 = undefined;
    try norm.rmsnorm(&o, &w, &n, H, D, 1e-5);
    for (0..H * D) |i| try testing.expectEqual(n[i] * num.sigmoidS(gate[i]), y[i]);
}
