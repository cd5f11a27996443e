//! Gated MLA attention core with NoPE (model.md §6.7 steps 5-7): causal softmax attention over
//! a cache of expanded keys and values. The projections, the latent norms, the output gate
//! (plain `gate` elementwise op, no norm) and o_proj are separate kernels.
//!
//! Layouts (H heads, dn content, dr rope slot, dv value; dq = dn + dr):
//!   q    [T][H][dq]        per head [ qn (dn) | qr (dr) ]: the q_b_proj output as is
//!   kv   [N][H][dn+dv]     per position, per head [ kn (dn) | v (dv) ]: the kv_b_proj output
//!   kr   [N][dr]           per position, the ONE rope-slot key shared by all heads (raw: no
//!                          norm, never rotated)
//!   out  [T][H][dv]        head-major, ready for the gate and o_proj
//! where N = pos0 + T: the cache already holds positions 0 … pos0+T−1 (the caller appends the
//! T new positions before calling). Query t sits at position p = pos0 + t and attends to
//! positions s = 0 … p only (causal mask, always applied).
//!
//! Order and precision (§6.7, §8.3), per (t, h):
//!   score_s = f32( Σ_{i<dn} qn_i·kn_{s,i} + Σ_{i<dr} qr_i·kr_{s,i} ) · f32(dq^−1/2)
//!             (one f64 accumulator from +0, content part then rope part, sequential;
//!             each product exact in f64)
//!   m = max_s score_s;  e_s = exp(score_s − m) in f32;  Z = Σ_s e_s in f64, s ascending
//!   w_s = f32(e_s / Z)  (division in f64)
//!   o_j = Σ_s w_s·v_{s,j} in f32, s ascending from +0, one rounded product at a time.
//! SIMD path (see `TokenJob`), per query token in three phases: scores (threads split
//! positions; a few positions × eight heads of chains at once, lane = head, each still the
//! sequential sum above), softmax (threads split heads), values (threads split heads; 64
//! output channels accumulate in registers while positions stream past in ascending order).
//! Scores of all heads live in shared scratch, H × (pos0+T) f32, with q widened to f64.
//! The scalar path runs one (token, head) at a time with plain loops. Either way every (t, h)
//! output is computed in the documented order.
const std = @import("std");
const common = @import("common.zig");
const num = @import("numerics.zig");
const pool = @import("../pool.zig");

pub const Error = common.Error;

/// Upper bound on dq (released: 192); a named limit for the f64 copy of q in scratch.
pub const max_dq = 512;

const F8 = @Vector(8, f32);

pub const Shape = struct {
    heads: usize,
    dn: usize,
    dr: usize,
    dv: usize,

    fn dq(self: Shape) usize {
        return self.dn + self.dr;
    }
    fn kvRow(self: Shape) usize {
        return self.heads * (self.dn + self.dv);
    }
};

/// f32(dq^−1/2): the softmax scale (NOT dn^−1/2).
pub fn softmaxScale(dq: usize) f32 {
    return @floatCast(1.0 / @sqrt(@as(f64, @floatFromInt(dq))));
}

/// Heads whose score sums run together on the SIMD path (two f64 vectors, lane = head).
pub const head_block = 8;
/// Positions per parallel chunk of the score phase.
const position_grain = 16;
/// Positions whose score chains are interleaved (with two head vectors: 8 chains in flight).
const positions_ilp = 3;

/// f32 vectors of output channels the value phase accumulates in registers at once.
const value_vectors = 8;

fn blockCount(heads: usize) usize {
    return (heads + head_block - 1) / head_block;
}

/// The scalar reference: one (token, head) at a time, plain loops, the documented order.
const ScalarJob = struct {
    q: [*]const f32,
    kv: [*]const f32,
    kr: [*]const f32,
    out: [*]f32,
    shape: Shape,
    pos0: usize,
    scale: f32,

    fn run(self: *const ScalarJob, begin: usize, end: usize, worker: usize) void {
        const sh = self.shape;
        const scores: [*]f32 = @ptrCast(@alignCast(pool.scratchFor(worker).ptr));
        for (begin..end) |item| {
            const t = item / sh.heads;
            const h = item % sh.heads;
            const n = self.pos0 + t + 1;
            const dq = sh.dq();
            const kv_row = sh.kvRow();
            const koff = h * (sh.dn + sh.dv);
            const qrow = self.q + (t * sh.heads + h) * dq;
            for (0..n) |s| {
                var acc: f64 = 0;
                const k = self.kv + s * kv_row + koff;
                for (0..sh.dn) |i| acc = acc + @as(f64, qrow[i]) * @as(f64, k[i]);
                for (0..sh.dr) |i| acc = acc + @as(f64, qrow[sh.dn + i]) * @as(f64, self.kr[s * sh.dr + i]);
                scores[s] = @as(f32, @floatCast(acc)) * self.scale;
            }
            softmax(scores[0..n]);
            const o = self.out + (t * sh.heads + h) * sh.dv;
            @memset(o[0..sh.dv], 0);
            for (0..n) |s| {
                const v = self.kv + s * kv_row + koff + sh.dn;
                for (0..sh.dv) |j| o[j] = o[j] + scores[s] * v[j];
            }
        }
    }
};

/// The SIMD path for one query token, in three phases over the cache (kv rows are head-major,
/// so one position is one contiguous row):
///   scores  positions split across threads; each position's row is read once for all heads
///           (three positions × eight heads of chains at a time, lane = head, every lane the
///           sequential f64 chain);
///   softmax heads split across threads;
///   values  heads split across threads; per head, up to 64 output channels accumulate in
///           registers while positions stream past in ascending order (the documented order).
/// Scores live in shared scratch as [H][n] f32.
const TokenJob = struct {
    kv: [*]const f32,
    kr: [*]const f32,
    out: [*]f32,
    scores: [*]f32,
    /// q of token t widened to f64, per block of eight heads element-major: [block][max_dq][8]
    q64: [*]const [head_block]f64,
    shape: Shape,
    /// query token index within the call, and the number of visible positions (pos0 + t + 1)
    t: usize,
    n: usize,
    scale: f32,

    fn scorePhase(self: *const TokenJob, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        var s = begin;
        while (s + positions_ilp <= end) : (s += positions_ilp) self.scorePositions(positions_ilp, s);
        while (s < end) : (s += 1) self.scorePositions(1, s);
    }

    /// Scores of every head at positions s … s+P−1 (their rows are read once, in order).
    fn scorePositions(self: *const TokenJob, comptime P: usize, s: usize) void {
        const sh = self.shape;
        const hw = sh.dn + sh.dv;
        for (0..blockCount(sh.heads)) |b| {
            const h0 = b * head_block;
            const q = self.q64 + b * max_dq;
            var rows: [P][*]const f32 = undefined;
            var krs: [P][*]const f32 = undefined;
            inline for (0..P) |p| {
                rows[p] = self.kv + (s + p) * sh.kvRow() + h0 * hw;
                krs[p] = self.kr + (s + p) * sh.dr;
            }
            switch (@min(head_block, sh.heads - h0)) {
                inline 1...head_block => |C| {
                    const acc = if (C % 4 == 0) scoresQuads(C, P, q, rows, hw, krs, sh.dn, sh.dr) else scoresScalar(C, P, q, rows, hw, krs, sh.dn, sh.dr);
                    inline for (0..P) |p| inline for (0..C) |c| {
                        self.scores[(h0 + c) * self.n + s + p] = @as(f32, @floatCast(acc[p][c])) * self.scale;
                    };
                },
                else => unreachable,
            }
        }
    }

    fn softmaxPhase(self: *const TokenJob, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        for (begin..end) |h| softmax(self.scores[h * self.n ..][0..self.n]);
    }

    fn valuePhase(self: *const TokenJob, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const sh = self.shape;
        const out = self.out + self.t * sh.heads * sh.dv;
        for (begin..end) |h| {
            var j: usize = 0;
            while (j + 8 * value_vectors <= sh.dv) : (j += 8 * value_vectors) self.valueChunk(value_vectors, h, j, out);
            switch ((sh.dv - j) / 8) {
                inline 0...value_vectors - 1 => |V| if (V > 0) self.valueChunk(V, h, j, out),
                else => unreachable,
            }
            j += (sh.dv - j) / 8 * 8;
            // the last dv mod 8 channels
            const w = self.scores + h * self.n;
            while (j < sh.dv) : (j += 1) {
                var o: f32 = 0;
                for (0..self.n) |s| o = o + w[s] * self.kv[s * sh.kvRow() + h * (sh.dn + sh.dv) + sh.dn + j];
                out[h * sh.dv + j] = o;
            }
        }
    }

    /// Channels j … j+8V−1 of head h: V vector accumulators stay in registers while the
    /// positions stream past (s ascending; f32 product rounded, then the add).
    fn valueChunk(self: *const TokenJob, comptime V: usize, h: usize, j: usize, out: [*]f32) void {
        const sh = self.shape;
        const w = self.scores + h * self.n;
        const v0 = self.kv + h * (sh.dn + sh.dv) + sh.dn + j;
        const row = sh.kvRow();
        var acc: [V]F8 = undefined;
        inline for (0..V) |k| acc[k] = @splat(0);
        for (0..self.n) |s| {
            const v = v0 + s * row;
            const ws: F8 = @splat(w[s]);
            inline for (0..V) |k| acc[k] = acc[k] + ws * @as(F8, v[8 * k ..][0..8].*);
        }
        inline for (0..V) |k| out[h * sh.dv + j + 8 * k ..][0..8].* = acc[k];
    }
};

/// Score sums of C heads at P positions as C·P independent sequential f64 chains.
inline fn scoresScalar(comptime C: usize, comptime P: usize, q64: [*]const [head_block]f64, rows: [P][*]const f32, hw: usize, krs: [P][*]const f32, dn: usize, dr: usize) [P][C]f64 {
    var acc: [P][C]f64 = undefined;
    inline for (0..P) |p| acc[p] = [_]f64{0} ** C;
    for (0..dn) |i| {
        inline for (0..P) |p| inline for (0..C) |c| {
            acc[p][c] = @mulAdd(f64, q64[i][c], rows[p][c * hw + i], acc[p][c]);
        };
    }
    for (0..dr) |i| {
        inline for (0..P) |p| {
            const k: f64 = krs[p][i];
            inline for (0..C) |c| acc[p][c] = @mulAdd(f64, q64[dn + i][c], k, acc[p][c]);
        }
    }
    return acc;
}

const F4 = @Vector(4, f32);
const D4 = @Vector(4, f64);

/// The same chains with four heads per f64 vector (lane = head), P positions interleaved so
/// that 2·P vector chains are in flight: a 4 heads × 4 elements block of keys is loaded and
/// transposed so that each vector holds one element of four heads, and every lane still adds
/// its products in element order (exact products: FMA = multiply then add).
inline fn scoresQuads(comptime C: usize, comptime P: usize, q64: [*]const [head_block]f64, rows: [P][*]const f32, hw: usize, krs: [P][*]const f32, dn: usize, dr: usize) [P][C]f64 {
    const V = C / 4;
    var acc: [P][V]D4 = undefined;
    inline for (0..P) |p| inline for (0..V) |v| {
        acc[p][v] = @splat(0);
    };
    var i: usize = 0;
    while (i + 4 <= dn) : (i += 4) {
        inline for (0..P) |p| inline for (0..V) |v| {
            const base = rows[p] + 4 * v * hw + i;
            const r0: F4 = base[0..4].*;
            const r1: F4 = base[hw..][0..4].*;
            const r2: F4 = base[2 * hw ..][0..4].*;
            const r3: F4 = base[3 * hw ..][0..4].*;
            const t0 = @shuffle(f32, r0, r1, [4]i32{ 0, ~@as(i32, 0), 1, ~@as(i32, 1) });
            const t1 = @shuffle(f32, r2, r3, [4]i32{ 0, ~@as(i32, 0), 1, ~@as(i32, 1) });
            const t2 = @shuffle(f32, r0, r1, [4]i32{ 2, ~@as(i32, 2), 3, ~@as(i32, 3) });
            const t3 = @shuffle(f32, r2, r3, [4]i32{ 2, ~@as(i32, 2), 3, ~@as(i32, 3) });
            const cols = [4]F4{
                @shuffle(f32, t0, t1, [4]i32{ 0, 1, ~@as(i32, 0), ~@as(i32, 1) }),
                @shuffle(f32, t0, t1, [4]i32{ 2, 3, ~@as(i32, 2), ~@as(i32, 3) }),
                @shuffle(f32, t2, t3, [4]i32{ 0, 1, ~@as(i32, 0), ~@as(i32, 1) }),
                @shuffle(f32, t2, t3, [4]i32{ 2, 3, ~@as(i32, 2), ~@as(i32, 3) }),
            };
            inline for (0..4) |k| {
                const qv: D4 = q64[i + k][4 * v ..][0..4].*;
                acc[p][v] = @mulAdd(D4, qv, @as(D4, @floatCast(cols[k])), acc[p][v]);
            }
        };
    }
    while (i < dn) : (i += 1) {
        inline for (0..P) |p| inline for (0..V) |v| {
            const base = rows[p] + 4 * v * hw + i;
            const kv4 = F4{ base[0], base[hw], base[2 * hw], base[3 * hw] };
            const qv: D4 = q64[i][4 * v ..][0..4].*;
            acc[p][v] = @mulAdd(D4, qv, @as(D4, @floatCast(kv4)), acc[p][v]);
        };
    }
    for (0..dr) |j| {
        inline for (0..P) |p| {
            const k: D4 = @splat(@as(f64, krs[p][j]));
            inline for (0..V) |v| {
                const qv: D4 = q64[dn + j][4 * v ..][0..4].*;
                acc[p][v] = @mulAdd(D4, qv, k, acc[p][v]);
            }
        }
    }
    var out: [P][C]f64 = undefined;
    inline for (0..P) |p| inline for (0..V) |v| inline for (0..4) |l| {
        out[p][4 * v + l] = acc[p][v][l];
    };
    return out;
}

/// In place: scores → f32(e_s / Z) with e_s = exp(score_s − max) in f32, Z = Σ e_s in f64.
fn softmax(scores: []f32) void {
    var m = scores[0];
    for (scores[1..]) |v| m = @max(m, v);
    var z: f64 = 0;
    for (scores) |*v| {
        const e = num.expS(v.* - m);
        v.* = e;
        z = z + @as(f64, e);
    }
    for (scores) |*v| v.* = @floatCast(@as(f64, v.*) / z);
}

/// Causal attention for T queries at positions pos0 … pos0+T−1 over the cache (see the file
/// comment for layouts). `out` must not alias the inputs.
pub fn attention(q: [*]const f32, kv: [*]const f32, kr: [*]const f32, out: [*]f32, tokens: usize, pos0: usize, shape: Shape) Error!void {
    if (tokens == 0 or shape.heads == 0 or shape.dn == 0 or shape.dv == 0) return error.BadArgument;
    if (shape.dq() > max_dq) return error.BadArgument;
    const n_max = pos0 + tokens;
    const scale = softmaxScale(shape.dq());
    if (common.path() == .scalar) {
        pool.reserveScratch(try common.mulSize(n_max, @sizeOf(f32))) catch return error.OutOfMemory;
        const job = ScalarJob{ .q = q, .kv = kv, .kr = kr, .out = out, .shape = shape, .pos0 = pos0, .scale = scale };
        pool.parallelFor(try common.mulSize(tokens, shape.heads), 1, &job, ScalarJob.run);
        return;
    }
    const blocks = blockCount(shape.heads);
    const q_bytes = try common.mulSize(blocks * max_dq * head_block, @sizeOf(f64));
    const score_bytes = try common.mulSize(try common.mulSize(shape.heads, n_max), @sizeOf(f32));
    const buf = pool.reserveShared(q_bytes + score_bytes) catch return error.OutOfMemory;
    const q64: [*][head_block]f64 = @ptrCast(@alignCast(buf.ptr));
    const scores: [*]f32 = @ptrCast(@alignCast(buf.ptr + q_bytes));
    const dq = shape.dq();
    for (0..tokens) |t| {
        const n = pos0 + t + 1;
        @memset(q64[0 .. blocks * max_dq], [_]f64{0} ** head_block);
        for (0..shape.heads) |h| {
            const qrow = q + (t * shape.heads + h) * dq;
            for (0..dq) |i| q64[(h / head_block) * max_dq + i][h % head_block] = qrow[i];
        }
        const job = TokenJob{ .kv = kv, .kr = kr, .out = out, .scores = scores, .q64 = q64, .shape = shape, .t = t, .n = n, .scale = scale };
        pool.parallelFor(n, position_grain, &job, TokenJob.scorePhase);
        pool.parallelFor(shape.heads, @max(1, 4096 / n), &job, TokenJob.softmaxPhase);
        pool.parallelFor(shape.heads, 1, &job, TokenJob.valuePhase);
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "MLA: causal, prefill == incremental, SIMD == scalar, threads identical" {
    var prng = std.Random.DefaultPrng.init(31);
    const rnd = prng.random();
    const alloc = testing.allocator;
    const sh = Shape{ .heads = 11, .dn = 6, .dr = 2, .dv = 13 }; // a block of 8 heads and one of 3; dv = 8 + tail
    const T = 11;
    const q = try alloc.alloc(f32, T * sh.heads * sh.dq());
    defer alloc.free(q);
    const kv = try alloc.alloc(f32, T * sh.kvRow());
    defer alloc.free(kv);
    const kr = try alloc.alloc(f32, T * sh.dr);
    defer alloc.free(kr);
    for (q) |*v| v.* = rnd.floatNorm(f32);
    for (kv) |*v| v.* = rnd.floatNorm(f32);
    for (kr) |*v| v.* = rnd.floatNorm(f32);
    const per = sh.heads * sh.dv;
    var full: [T * 11 * 13]f32 = undefined;
    var inc: [T * 11 * 13]f32 = undefined;
    try attention(q.ptr, kv.ptr, kr.ptr, &full, T, 0, sh);
    for (0..T) |t| try attention(q.ptr + t * sh.heads * sh.dq(), kv.ptr, kr.ptr, inc[t * per ..].ptr, 1, t, sh);
    try testing.expectEqualSlices(u32, @ptrCast(&full), @ptrCast(&inc));
    common.setPath(.scalar);
    try attention(q.ptr, kv.ptr, kr.ptr, &inc, T, 0, sh);
    common.setPath(.simd);
    try testing.expectEqualSlices(u32, @ptrCast(&full), @ptrCast(&inc));
    for ([_]u32{ 1, 2, 3 }) |threads| {
        try pool.init(threads);
        pool.setFineGrain(threads > 1);
        try attention(q.ptr, kv.ptr, kr.ptr, &inc, T, 0, sh);
        try testing.expectEqualSlices(u32, @ptrCast(&full), @ptrCast(&inc));
    }
    pool.setFineGrain(false);
    pool.deinit();
    // position 0 attends only to itself: out = v_0
    for (0..sh.heads) |h| {
        for (0..sh.dv) |j| try testing.expectEqual(kv[h * (sh.dn + sh.dv) + sh.dn + j], full[h * sh.dv + j]);
    }
    // changing a later position's key does not change earlier outputs
    kv[(T - 1) * sh.kvRow()] += 5;
    try attention(q.ptr, kv.ptr, kr.ptr, &inc, T, 0, sh);
    try testing.expectEqualSlices(u32, @ptrCast(full[0 .. (T - 1) * per]), @ptrCast(inc[0 .. (T - 1) * per]));
}
