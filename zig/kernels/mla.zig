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
//! SIMD path: heads are taken in blocks of eight whose cache slices of a position are
//! adjacent, so the cache is streamed position by position; the eight heads' score sums run as
//! independent accumulators (each still the sequential sum above) and the value sums are
//! vectorised over j. The scalar path runs one head at a time with plain loops. Threads split
//! (t, head block) pairs; scratch holds a block's scores (8 × (pos0+T) f32 per worker).
const std = @import("std");
const common = @import("common.zig");
const num = @import("numerics.zig");
const pool = @import("../pool.zig");

pub const Error = common.Error;

/// Upper bound on dq (released: 192); a named limit for the per-task stack copy of q
/// (head_block × max_dq f64 = 32 KB of worker stack).
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

/// Heads processed together on the SIMD path: their cache slices of one position are adjacent
/// (head-major rows), so a block streams the cache row by row instead of striding through it.
pub const head_block = 8;

const Job = struct {
    q: [*]const f32,
    kv: [*]const f32,
    kr: [*]const f32,
    out: [*]f32,
    shape: Shape,
    pos0: usize,
    scale: f32,
    scalar: bool,

    fn blocks(self: *const Job) usize {
        return (self.shape.heads + head_block - 1) / head_block;
    }

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        const sh = self.shape;
        const scratch = pool.scratchFor(worker);
        const scores: [*]f32 = @ptrCast(@alignCast(scratch.ptr));
        for (begin..end) |item| {
            if (self.scalar) {
                const t = item / sh.heads;
                const n = self.pos0 + t + 1;
                headScalar(self, t, item % sh.heads, n, scores[0..n]);
            } else {
                const nb = self.blocks();
                const t = item / nb;
                const h0 = (item % nb) * head_block;
                const count = @min(head_block, sh.heads - h0);
                switch (count) {
                    inline 1...head_block => |c| headBlock(c, self, t, h0, scores),
                    else => unreachable,
                }
            }
        }
    }

    /// The scalar reference: one head at a time, plain loops, the documented order.
    fn headScalar(self: *const Job, t: usize, h: usize, n: usize, scores: []f32) void {
        const sh = self.shape;
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
        softmax(scores);
        const o = self.out + (t * sh.heads + h) * sh.dv;
        @memset(o[0..sh.dv], 0);
        for (0..n) |s| {
            const v = self.kv + s * kv_row + koff + sh.dn;
            for (0..sh.dv) |j| o[j] = o[j] + scores[s] * v[j];
        }
    }

    /// C heads h0 … h0+C−1 of query t. Scores of the C heads run as C independent f64 chains
    /// (each the sequential sum); the value sums are vectorised over j. Scratch holds C rows
    /// of n scores.
    fn headBlock(comptime C: usize, self: *const Job, t: usize, h0: usize, scratch: [*]f32) void {
        const sh = self.shape;
        const dq = sh.dq();
        const n = self.pos0 + t + 1;
        const kv_row = sh.kvRow();
        const hw = sh.dn + sh.dv;
        var q64: [C][max_dq]f64 = undefined;
        inline for (0..C) |c| {
            const qrow = self.q + (t * sh.heads + h0 + c) * dq;
            for (0..dq) |i| q64[c][i] = qrow[i];
        }
        var sc: [C][*]f32 = undefined;
        inline for (0..C) |c| sc[c] = scratch + c * n;
        for (0..n) |s| {
            const row = self.kv + s * kv_row + h0 * hw;
            var acc = [_]f64{0} ** C;
            for (0..sh.dn) |i| {
                inline for (0..C) |c| acc[c] = @mulAdd(f64, q64[c][i], row[c * hw + i], acc[c]);
            }
            const kr = self.kr + s * sh.dr;
            for (0..sh.dr) |i| {
                const k: f64 = kr[i];
                inline for (0..C) |c| acc[c] = @mulAdd(f64, q64[c][sh.dn + i], k, acc[c]);
            }
            inline for (0..C) |c| sc[c][s] = @as(f32, @floatCast(acc[c])) * self.scale;
        }
        inline for (0..C) |c| softmax(sc[c][0..n]);
        var o: [C][*]f32 = undefined;
        inline for (0..C) |c| {
            o[c] = self.out + (t * sh.heads + h0 + c) * sh.dv;
            @memset(o[c][0..sh.dv], 0);
        }
        const vec_end = sh.dv - sh.dv % 8;
        for (0..n) |s| {
            const row = self.kv + s * kv_row + h0 * hw + sh.dn;
            inline for (0..C) |c| {
                const w = sc[c][s];
                const v = row + c * hw;
                var j: usize = 0;
                while (j < vec_end) : (j += 8) {
                    o[c][j..][0..8].* = @as(F8, o[c][j..][0..8].*) + @as(F8, @splat(w)) * @as(F8, v[j..][0..8].*);
                }
                while (j < sh.dv) : (j += 1) o[c][j] = o[c][j] + w * v[j];
            }
        }
    }
};

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
    const scalar = common.path() == .scalar;
    const score_rows: usize = if (scalar) 1 else @min(head_block, shape.heads);
    pool.reserveScratch(try common.mulSize(try common.mulSize(n_max, score_rows), @sizeOf(f32))) catch return error.OutOfMemory;
    const job = Job{ .q = q, .kv = kv, .kr = kr, .out = out, .shape = shape, .pos0 = pos0, .scale = softmaxScale(shape.dq()), .scalar = scalar };
    const per_head = n_max * (shape.dq() + shape.dv);
    if (scalar) {
        pool.parallelFor(try common.mulSize(tokens, shape.heads), @max(1, 16384 / @max(per_head, 1)), &job, Job.run);
    } else {
        const per_item = per_head * @min(head_block, shape.heads);
        pool.parallelFor(try common.mulSize(tokens, job.blocks()), @max(1, 16384 / @max(per_item, 1)), &job, Job.run);
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
