//! Gated MLA attention core (NoPE) in the latent space: model.md §6.7 steps 4-8 with kv_b_proj
//! absorbed into the query and output sides (the reformulation the last bullet of §6.7 allows;
//! it is not bit-identical to the expanded form, and k3 uses it on every path). The cache
//! holds, per position, only the normalised latent c_kv (R = kv_lora_rank floats) and the one
//! shared rope-slot key kr (dr floats): 576 floats on the released model instead of 24,640.
//! The projections, the latent norms, the output gate and o_proj are separate kernels.
//!
//! Layouts (H heads, dn content, dr rope slot, dv value, R latent; dq = dn + dr):
//!   q    [T][H][dq]        per head [ qn (dn) | qr (dr) ]: the q_b_proj output as is
//!   W    [H·(dn+dv)][R]    kv_b_proj as shipped (bf16 bits or f32), read in place: rows
//!                          h·(dn+dv) + i, i < dn, are head h's key rows (W_kb,h, dn × R), rows
//!                          h·(dn+dv) + dn + j, j < dv, its value rows (W_vb,h, dv × R)
//!   ckv  [N][R]            per position the kv_a_layernorm output (the latent)
//!   kr   [N][dr]           per position the ONE rope-slot key shared by all heads (raw)
//!   out  [T][H][dv]        head-major, ready for the gate and o_proj
//! where N = pos0 + T: the caller appends the T new positions to ckv and kr before calling.
//! Query t sits at position p = pos0 + t and attends to positions s = 0 … p (causal, always).
//!
//! The canonical order and precision, per (t, h), every product formed in f64 (exact: a bf16
//! or f32 weight or an f32 activation times an f32 needs at most 48 significant bits, so a
//! fused multiply-add equals a multiply then an add), every f64 accumulator starting at +0:
//!   1. absorb:  ql_r = f32( Σ_{i<dn} W[h·(dn+dv)+i][r] · qn_i ),  i ascending, one f64
//!               accumulator per r                                           (R values)
//!   2. score:   score_s = f32( Σ_{r<R} ql_r·ckv_{s,r} + Σ_{i<dr} qr_i·kr_{s,i} ) · f32(dq^−1/2)
//!               one f64 accumulator, latent part r ascending, then the rope part i ascending
//!   3. softmax: m = max_s score_s; e_s = exp(score_s − m) in f32 (numerics.zig, the one exp);
//!               Z = Σ_s e_s in f64, s ascending; w_s = f32(e_s / Z), the division in f64
//!   4. latent value sum: ol_r = f32( Σ_{s≤p} w_s·ckv_{s,r} ), s ascending, one f64
//!               accumulator per r                                           (R values)
//!   5. v-out:   o_j = f32( Σ_r W[h·(dn+dv)+dn+j][r] · ol_r ) in the linear-map order of §6.1
//!               (16 f64 lanes by r mod 16, tree (a_m+a_{m+4})+(a_{m+8}+a_{m+12}), then
//!               (c0+c1)+(c2+c3), the R mod 16 tail sequential)                (dv values)
//! Why these choices: ql and ol are rounded to f32 once, like the expanded kn = f32(W_kb·c_kv)
//! and v = f32(W_vb·c_kv) they replace, so every later product stays exact in f64 and the
//! SIMD path may use FMAs; the value sum runs in f64 (the expanded form's f32 sum was the least
//! accurate step, and here its products are exact anyway); the score keeps the sequential
//! chain of §8.3 with R in place of dn; step 5 is an ordinary matrix row times a vector.
//!
//! SIMD path, per query token, five phases, each a parallel loop whose items are independent
//! outputs (never a split reduction), so any thread count gives the same bits. The score of a
//! position stays one sequential chain, so the vectors run across positions, heads and
//! channels instead of along a dot (lanes: 8 f64 in the AVX-512 variant, else 4):
//!   absorb   threads split heads; lane = r: a head's key rows stream in order, four at a
//!            time, over R f64 accumulators, each lane still the sequential sum over i; the
//!            result is stored widened back to f64, element-major, lane = head ([R + dr][Hpad])
//!   scores   threads split positions, widened to f64 a block at a time; lane = head: a tile
//!            of head vectors × positions runs its chains in registers, one load of a head
//!            vector serving every position of the tile and one broadcast cache element every
//!            head vector
//!   softmax  threads split heads; exp and the division vectorised along positions (the one
//!            exp, any width), the Z chains of several heads interleaved
//!   values   threads split channels (one part each, so the cache is read and widened once in
//!            all); lane = r: a tile of heads × channel vectors over a block of positions, one
//!            load of a cache vector serving every head, accumulators parked per block, so each
//!            lane still adds s = 0, 1, … in order
//!   v-out    threads split heads; the 16 lanes of step 5 in four 4-wide f64 registers
//! The scalar path runs one (token, head) at a time with plain loops in the same order.
const std = @import("std");
const common = @import("common.zig");
const num = @import("numerics.zig");
const matvec_bf16 = @import("matvec_bf16.zig");
const widen = matvec_bf16.widen;
const pool = @import("pool");

pub const Error = common.Error;

/// kv_b_proj element type codes of `k3_mla_latent_attention` (bf16 bit patterns or f32).
pub const Dtype = enum(u32) { bf16 = 0, f32 = 1 };

pub const Shape = extern struct {
    heads: usize,
    dn: usize,
    dr: usize,
    dv: usize,
    /// kv_lora_rank: the width of the cached latent.
    rank: usize,

    pub fn dq(self: Shape) usize {
        return self.dn + self.dr;
    }
    /// kv_b_proj rows per head: dn key rows, then dv value rows.
    fn headRows(self: Shape) usize {
        return self.dn + self.dv;
    }
};

/// f32(dq^−1/2): the softmax scale (dq = dn + dr; NOT dn^−1/2 and NOT R^−1/2).
pub fn softmaxScale(dq: usize) f32 {
    return @floatCast(1.0 / @sqrt(@as(f64, @floatFromInt(dq))));
}

/// Key rows the absorb phase streams side by side.
const absorb_rows = 4;

/// Items per parallel chunk so that a chunk carries at least ~16K multiply-adds.
fn grain(work_per_item: usize) usize {
    return @max(1, 16 * 1024 / @max(1, work_per_item));
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

/// f32 lanes of the vectorised softmax, and the heads whose Z chains it interleaves.
const softmax_lanes = 8;
const softmax_heads = 8;

/// `softmax` for G rows of n scores (row g at rows + g·n), the same bits: the max is exact
/// whatever the order (every path takes the non-NaN operand), the exp is numerics.zig's at any
/// width, each Z is one f64 chain s = 0, 1, … (G chains side by side), the division is per
/// element in f64.
inline fn softmaxHeads(comptime G: usize, rows: [*]f32, n: usize) void {
    for (0..G) |g| expRow(rows[g * n ..][0..n]);
    var z: [G]f64 = [_]f64{0} ** G;
    for (0..n) |s| {
        inline for (0..G) |g| z[g] = z[g] + @as(f64, rows[g * n + s]);
    }
    for (0..G) |g| divideRow(rows[g * n ..][0..n], z[g]);
}

const SoftF = @Vector(softmax_lanes, f32);
const SoftD = @Vector(softmax_lanes, f64);

/// In place: v → exp(v − max) in f32.
fn expRow(row: []f32) void {
    const n = row.len;
    const body = n - n % softmax_lanes;
    var m = row[0];
    if (body > 0) {
        var mv: SoftF = row[0..softmax_lanes].*;
        var i: usize = softmax_lanes;
        while (i < body) : (i += softmax_lanes) mv = @max(mv, @as(SoftF, row[i..][0..softmax_lanes].*));
        m = @max(m, @reduce(.Max, mv));
    }
    for (row[body..]) |v| m = @max(m, v);
    const mv: SoftF = @splat(m);
    var i: usize = 0;
    while (i < body) : (i += softmax_lanes) row[i..][0..softmax_lanes].* = num.exp(softmax_lanes, @as(SoftF, row[i..][0..softmax_lanes].*) - mv);
    for (row[body..]) |*v| v.* = num.expS(v.* - m);
}

/// In place: e → f32(e / z), the division in f64.
fn divideRow(row: []f32, z: f64) void {
    const body = row.len - row.len % softmax_lanes;
    const zv: SoftD = @splat(z);
    var i: usize = 0;
    while (i < body) : (i += softmax_lanes) {
        const e: SoftD = @floatCast(@as(SoftF, row[i..][0..softmax_lanes].*));
        row[i..][0..softmax_lanes].* = @as(SoftF, @floatCast(e / zv));
    }
    for (row[body..]) |*v| v.* = @floatCast(@as(f64, v.*) / z);
}

/// The inputs of one call, shared by both paths.
fn Args(comptime W: type) type {
    return struct {
        q: [*]const f32,
        w: [*]const W,
        ckv: [*]const f32,
        kr: [*]const f32,
        out: [*]f32,
        shape: Shape,
        pos0: usize,
        scale: f32,
    };
}

/// The scalar reference: one (token, head) per item, plain loops, the documented order.
/// Worker scratch: ql [R] f32, scores [N] f32, ol [R] f32.
fn ScalarJob(comptime W: type) type {
    return struct {
        a: Args(W),

        fn run(self: *const @This(), begin: usize, end: usize, worker: usize) void {
            const a = self.a;
            const sh = a.shape;
            const R = sh.rank;
            const raw = pool.scratchFor(worker);
            const scratch: [*]f32 = @ptrCast(@alignCast(raw.ptr));
            const ql = scratch;
            const ol = scratch + R;
            const scores = scratch + 2 * R;
            for (begin..end) |item| {
                const t = item / sh.heads;
                const h = item % sh.heads;
                const n = a.pos0 + t + 1;
                // worker scratch as reserved by `attention`: ql, ol and every position's score
                std.debug.assert(raw.len >= (2 * R + n) * @sizeOf(f32));
                const qn = a.q + (t * sh.heads + h) * sh.dq();
                const qr = qn + sh.dn;
                const wk = a.w + h * sh.headRows() * R;
                for (0..R) |r| {
                    var acc: f64 = 0;
                    for (0..sh.dn) |i| acc = acc + common.weightF64(W, wk[i * R + r]) * @as(f64, qn[i]);
                    ql[r] = @floatCast(acc);
                }
                for (0..n) |s| {
                    var acc: f64 = 0;
                    const c = a.ckv + s * R;
                    for (0..R) |r| acc = acc + @as(f64, ql[r]) * @as(f64, c[r]);
                    for (0..sh.dr) |i| acc = acc + @as(f64, qr[i]) * @as(f64, a.kr[s * sh.dr + i]);
                    scores[s] = @as(f32, @floatCast(acc)) * a.scale;
                }
                softmax(scores[0..n]);
                for (0..R) |r| {
                    var acc: f64 = 0;
                    for (0..n) |s| acc = acc + @as(f64, scores[s]) * @as(f64, a.ckv[s * R + r]);
                    ol[r] = @floatCast(acc);
                }
                const o = a.out + (t * sh.heads + h) * sh.dv;
                const wv = wk + sh.dn * R;
                for (0..sh.dv) |j| o[j] = matvec_bf16.dotScalar(W, (wv + j * R)[0..R], ol[0..R]);
            }
        }
    };
}

/// f64 lanes of this compilation's vectors: 8 in the AVX-512 variant, else 4.
const lanes = if (common.wide) 8 else 4;
const Vec = @Vector(lanes, f64);

/// Register tiles of the two phases that run over every position (sized so that the
/// accumulators, the shared operands and one broadcast fit the 32 or 16 vector registers):
///   scores  `score_vectors` head vectors × `score_positions` positions of chains; per latent
///           channel, one load of each head vector serves every position, one broadcast cache
///           element serves every head vector
///   values  `value_heads` heads × `value_vectors` channel vectors; per position, one load of
///           each cache vector serves every head, one broadcast weight every vector
const Tile = struct { score_vectors: usize, score_positions: usize, value_heads: usize, value_vectors: usize };
const tile: Tile = if (common.wide)
    .{ .score_vectors = 4, .score_positions = 6, .value_heads = 3, .value_vectors = 6 }
else
    .{ .score_vectors = 2, .score_positions = 5, .value_heads = 3, .value_vectors = 3 };

/// Positions each phase widens to f64 at a time (R·8 bytes each: 128 KB at R = 512, so a block
/// stays in L2 while every tile of the thread's range reads it).
const position_block = 32;

fn headVectors(heads: usize) usize {
    return (heads + lanes - 1) / lanes;
}

fn valueTiles(rank: usize) usize {
    const span = tile.value_vectors * lanes;
    return (rank + span - 1) / span;
}

/// The SIMD path for one query token (see the file comment). Shared scratch:
///   q64    [R + dr][Hpad] f64: element-major, lane = head (Hpad = heads rounded up to whole
///          vectors): ql rounded to f32 and widened back for r < R, then qr; absent heads zero
///   scores [H][n] f32
///   ol64   [H][R] f64: ol rounded to f32, widened back
/// Worker scratch: the score phase's widened block [position_block][R + dr] f64; the value
/// phase's accumulators [heads of the chunk][R], widened block [position_block][R] and
/// widened weights [heads of the chunk][position_block], all f64.
fn TokenJob(comptime W: type) type {
    return struct {
        a: Args(W),
        q64: [*]f64,
        scores: [*]f32,
        ol64: [*]f64,
        /// query token index within the call, and the number of visible positions (pos0 + t + 1)
        t: usize,
        n: usize,
        /// items of the value phase: one per thread, at most one per channel tile
        parts: usize,

        const Self = @This();

        fn padded(self: *const Self) usize {
            return headVectors(self.a.shape.heads) * lanes;
        }

        /// Each head's key rows stream in order, `absorb_rows` at a time, over R accumulators
        /// in worker scratch: lane = r, each lane still the sequential sum over i.
        fn absorbPhase(self: *const Self, begin: usize, end: usize, worker: usize) void {
            const sh = self.a.shape;
            const R = sh.rank;
            const hp = self.padded();
            const raw = pool.scratchFor(worker);
            // as reserved by `attention`: R accumulators
            std.debug.assert(raw.len >= R * @sizeOf(f64));
            const acc: [*]f64 = @ptrCast(@alignCast(raw.ptr));
            for (begin..end) |h| {
                const qn = self.a.q + (self.t * sh.heads + h) * sh.dq();
                const wk = self.a.w + h * sh.headRows() * R;
                @memset(acc[0..R], 0);
                var i: usize = 0;
                while (i + absorb_rows <= sh.dn) : (i += absorb_rows) absorbRows(absorb_rows, wk + i * R, qn + i, R, acc);
                switch (sh.dn - i) {
                    inline 0...absorb_rows - 1 => |K| if (K > 0) absorbRows(K, wk + i * R, qn + i, R, acc),
                    else => unreachable,
                }
                const q64 = self.q64 + h;
                for (0..R) |r| q64[r * hp] = @as(f32, @floatCast(acc[r]));
                for (0..sh.dr) |j| q64[(R + j) * hp] = qn[sh.dn + j];
            }
        }

        /// acc[r] += Σ_{k<K} w[k·R + r]·q[k], k ascending, for every r.
        inline fn absorbRows(comptime K: usize, w: [*]const W, q: [*]const f32, R: usize, acc: [*]f64) void {
            var qk: [K]Vec = undefined;
            inline for (0..K) |k| qk[k] = @splat(@as(f64, q[k]));
            var r: usize = 0;
            while (r + lanes <= R) : (r += lanes) {
                var x: Vec = acc[r..][0..lanes].*;
                inline for (0..K) |k| x = @mulAdd(Vec, common.weightsF64(W, lanes, w + k * R + r), qk[k], x);
                acc[r..][0..lanes].* = x;
            }
            while (r < R) : (r += 1) {
                var x = acc[r];
                inline for (0..K) |k| x = @mulAdd(f64, common.weightF64(W, w[k * R + r]), qk[k][0], x);
                acc[r] = x;
            }
        }

        fn scorePhase(self: *const Self, begin: usize, end: usize, worker: usize) void {
            const sh = self.a.shape;
            const width = sh.rank + sh.dr;
            const raw = pool.scratchFor(worker);
            // as reserved by `attention`: one widened block of positions
            std.debug.assert(raw.len >= position_block * width * @sizeOf(f64));
            const block: [*]f64 = @ptrCast(@alignCast(raw.ptr));
            const vectors = headVectors(sh.heads);
            const P = tile.score_positions;
            var s0 = begin;
            while (s0 < end) : (s0 += position_block) {
                const count = @min(position_block, end - s0);
                for (0..count) |p| {
                    widen(self.a.ckv + (s0 + p) * sh.rank, block + p * width, sh.rank);
                    widen(self.a.kr + (s0 + p) * sh.dr, block + p * width + sh.rank, sh.dr);
                }
                var v0: usize = 0;
                while (v0 < vectors) : (v0 += tile.score_vectors) {
                    switch (@min(tile.score_vectors, vectors - v0)) {
                        inline 1...tile.score_vectors => |V| {
                            var p: usize = 0;
                            while (p + P <= count) : (p += P) self.scoreTile(V, P, block, width, s0 + p, p, v0);
                            switch (count - p) {
                                inline 0...P - 1 => |Q| if (Q > 0) self.scoreTile(V, Q, block, width, s0 + p, p, v0),
                                else => unreachable,
                            }
                        },
                        else => unreachable,
                    }
                }
            }
        }

        /// Scores of the heads of vectors v0 … v0+V−1 at positions s … s+P−1 (rows p … p+P−1
        /// of the widened block): each chain runs r = 0 … R−1, then the rope slot, in order.
        inline fn scoreTile(self: *const Self, comptime V: usize, comptime P: usize, block: [*]const f64, width: usize, s: usize, p0: usize, v0: usize) void {
            const hp = self.padded();
            var acc: [P][V]Vec = undefined;
            inline for (0..P) |p| inline for (0..V) |k| {
                acc[p][k] = @splat(0);
            };
            const q = self.q64 + v0 * lanes;
            for (0..width) |r| {
                var qv: [V]Vec = undefined;
                inline for (0..V) |k| qv[k] = q[r * hp + k * lanes ..][0..lanes].*;
                inline for (0..P) |p| {
                    const c: Vec = @splat(block[(p0 + p) * width + r]);
                    inline for (0..V) |k| acc[p][k] = @mulAdd(Vec, qv[k], c, acc[p][k]);
                }
            }
            const heads = self.a.shape.heads;
            inline for (0..P) |p| inline for (0..V) |k| {
                const sums: [lanes]f64 = acc[p][k];
                for (0..lanes) |l| {
                    const h = (v0 + k) * lanes + l;
                    if (h < heads) self.scores[h * self.n + s + p] = @as(f32, @floatCast(sums[l])) * self.a.scale;
                }
            };
        }

        /// Heads of the chunk in groups whose normaliser chains interleave: each Z is still one
        /// sequential f64 sum over s, the chains of different heads run side by side.
        fn softmaxPhase(self: *const Self, begin: usize, end: usize, worker: usize) void {
            _ = worker;
            var h = begin;
            while (h < end) {
                switch (@min(softmax_heads, end - h)) {
                    inline 1...softmax_heads => |G| {
                        softmaxHeads(G, self.scores + h * self.n, self.n);
                        h += G;
                    },
                    else => unreachable,
                }
            }
        }

        /// Items are `parts` ranges of whole channel tiles (`tile.value_vectors` vectors each,
        /// the last tile may be shorter): a part holds its channels for every head, so the
        /// cache is read and widened once in all, each thread reading only its columns.
        fn valuePhase(self: *const Self, begin: usize, end: usize, worker: usize) void {
            const R = self.a.shape.rank;
            const H = self.a.shape.heads;
            const span = tile.value_vectors * lanes;
            const tiles = valueTiles(R);
            const r0 = begin * tiles / self.parts * span;
            const r1 = @min(end * tiles / self.parts * span, R);
            const width = r1 - r0;
            const raw = pool.scratchFor(worker);
            // as reserved by `attention`: accumulators, one widened block, its weights
            std.debug.assert(raw.len >= (H * width + position_block * width + H * position_block) * @sizeOf(f64));
            const scratch: [*]f64 = @ptrCast(@alignCast(raw.ptr));
            const acc = scratch[0 .. H * width];
            const block = scratch + H * width;
            const w64 = block + position_block * width;
            @memset(acc, 0);
            const G = tile.value_heads;
            var s0: usize = 0;
            while (s0 < self.n) : (s0 += position_block) {
                const count = @min(position_block, self.n - s0);
                for (0..count) |s| widen(self.a.ckv + (s0 + s) * R + r0, block + s * width, width);
                for (0..H) |h| widen(self.scores + h * self.n + s0, w64 + h * position_block, count);
                var h0: usize = 0;
                while (h0 < H) : (h0 += G) {
                    switch (@min(G, H - h0)) {
                        inline 1...G => |HG| valueHeads(HG, acc.ptr + h0 * width, block, w64 + h0 * position_block, count, width),
                        else => unreachable,
                    }
                }
            }
            for (0..H) |h| {
                for (0..width) |c| self.ol64[h * R + r0 + c] = @as(f32, @floatCast(acc[h * width + c]));
            }
        }

        /// One block of positions for G heads over the chunk's `width` channels.
        inline fn valueHeads(comptime G: usize, a: [*]f64, block: [*]const f64, w: [*]const f64, count: usize, width: usize) void {
            const VV = tile.value_vectors;
            var c: usize = 0;
            while (c + VV * lanes <= width) : (c += VV * lanes) valueTile(G, VV, a, block, w, count, width, c);
            switch ((width - c) / lanes) {
                inline 0...VV - 1 => |V| if (V > 0) valueTile(G, V, a, block, w, count, width, c),
                else => unreachable,
            }
            c += (width - c) / lanes * lanes;
            while (c < width) : (c += 1) {
                inline for (0..G) |g| {
                    var x = a[g * width + c];
                    for (0..count) |s| x = @mulAdd(f64, w[g * position_block + s], block[s * width + c], x);
                    a[g * width + c] = x;
                }
            }
        }

        /// Channels c … c+V·lanes−1 of G heads over the `count` positions of the block; the
        /// accumulators are loaded from and parked back to `a` ([G][width]), each lane still
        /// adding s = 0, 1, … in order.
        inline fn valueTile(comptime G: usize, comptime V: usize, a: [*]f64, block: [*]const f64, w: [*]const f64, count: usize, width: usize, c0: usize) void {
            var acc: [G][V]Vec = undefined;
            inline for (0..G) |g| inline for (0..V) |k| {
                acc[g][k] = a[g * width + c0 + k * lanes ..][0..lanes].*;
            };
            for (0..count) |s| {
                var cv: [V]Vec = undefined;
                inline for (0..V) |k| cv[k] = block[s * width + c0 + k * lanes ..][0..lanes].*;
                inline for (0..G) |g| {
                    const ws: Vec = @splat(w[g * position_block + s]);
                    inline for (0..V) |k| acc[g][k] = @mulAdd(Vec, cv[k], ws, acc[g][k]);
                }
            }
            inline for (0..G) |g| inline for (0..V) |k| {
                a[g * width + c0 + k * lanes ..][0..lanes].* = acc[g][k];
            };
        }

        fn voutPhase(self: *const Self, begin: usize, end: usize, worker: usize) void {
            _ = worker;
            const sh = self.a.shape;
            const R = sh.rank;
            for (begin..end) |h| {
                const wv = self.a.w + (h * sh.headRows() + sh.dn) * R;
                const o = self.a.out + (self.t * sh.heads + h) * sh.dv;
                for (0..sh.dv) |j| o[j] = matvec_bf16.dotSimd(W, wv + j * R, self.ol64 + h * R, R);
            }
        }
    };
}

fn alignUp(bytes: usize) usize {
    return (bytes + pool.scratch_alignment - 1) / pool.scratch_alignment * pool.scratch_alignment;
}

/// `attention` for the ABI (table.zig `mla_latent_attention`): kv_b_proj `w` in the dtype
/// `w_dtype` says, the shape as counts; `kr` may be null only when dr = 0.
pub fn latentAttention(q: [*]const f32, w: *const anyopaque, w_dtype: Dtype, ckv: [*]const f32, kr: ?[*]const f32, out: [*]f32, tokens: usize, pos0: usize, heads: usize, dn: usize, dr: usize, dv: usize, rank: usize) Error!void {
    if (dr > 0 and kr == null) return error.BadArgument;
    var none: [1]f32 = undefined;
    const krp = kr orelse &none;
    const shape = Shape{ .heads = heads, .dn = dn, .dr = dr, .dv = dv, .rank = rank };
    return switch (w_dtype) {
        .bf16 => attention(u16, q, @ptrCast(@alignCast(w)), ckv, krp, out, tokens, pos0, shape),
        .f32 => attention(f32, q, @ptrCast(@alignCast(w)), ckv, krp, out, tokens, pos0, shape),
    };
}

/// Causal latent attention for T queries at positions pos0 … pos0+T−1 (see the file comment
/// for layouts and the order). `out` must not alias the inputs.
pub fn attention(comptime W: type, q: [*]const f32, w: [*]const W, ckv: [*]const f32, kr: [*]const f32, out: [*]f32, tokens: usize, pos0: usize, shape: Shape) Error!void {
    if (tokens == 0 or shape.heads == 0 or shape.dn == 0 or shape.dv == 0 or shape.rank == 0) return error.BadArgument;
    const R = shape.rank;
    const n_max = std.math.add(usize, pos0, tokens) catch return error.BadArgument;
    _ = try common.mulSize(try common.mulSize(shape.heads, shape.headRows()), R);
    const args = Args(W){ .q = q, .w = w, .ckv = ckv, .kr = kr, .out = out, .shape = shape, .pos0 = pos0, .scale = softmaxScale(shape.dq()) };
    if (common.path() == .scalar) {
        pool.reserveScratch(try common.mulSize(2 * R + n_max, @sizeOf(f32))) catch return error.OutOfMemory;
        const job = ScalarJob(W){ .a = args };
        pool.parallelFor(try common.mulSize(tokens, shape.heads), 1, &job, ScalarJob(W).run);
        return;
    }
    const hp = headVectors(shape.heads) * lanes;
    const width = R + shape.dr;
    const q_bytes = alignUp(try common.mulSize(try common.mulSize(hp, width), @sizeOf(f64)));
    const score_bytes = alignUp(try common.mulSize(try common.mulSize(shape.heads, n_max), @sizeOf(f32)));
    const ol_bytes = try common.mulSize(try common.mulSize(shape.heads, R), @sizeOf(f64));
    const buf = pool.reserveShared(q_bytes + score_bytes + ol_bytes) catch return error.OutOfMemory;
    // a chunk of the value phase may hold every channel (one thread, or a call inside a task)
    const value_floats = try common.mulSize(shape.heads + position_block, R) + shape.heads * position_block;
    pool.reserveScratch(try common.mulSize(@max(value_floats, position_block * width), @sizeOf(f64))) catch return error.OutOfMemory;
    const q64: [*]f64 = @ptrCast(@alignCast(buf.ptr));
    const scores: [*]f32 = @ptrCast(@alignCast(buf.ptr + q_bytes));
    const ol64: [*]f64 = @ptrCast(@alignCast(buf.ptr + q_bytes + score_bytes));
    const H = shape.heads;
    // Once per call: every token's absorb phase rewrites all lanes of the present heads, so
    // only the lanes of absent heads (a last vector of fewer than `lanes`) need their zeros.
    @memset(q64[0 .. hp * width], 0);
    const parts = @min(valueTiles(R), pool.threadCount());
    for (0..tokens) |t| {
        const n = pos0 + t + 1;
        const job = TokenJob(W){ .a = args, .q64 = q64, .scores = scores, .ol64 = ol64, .t = t, .n = n, .parts = parts };
        const J = TokenJob(W);
        pool.parallelFor(H, grain(shape.dn * R), &job, J.absorbPhase);
        pool.parallelFor(n, grain(H * width), &job, J.scorePhase);
        pool.parallelFor(H, grain(4 * n), &job, J.softmaxPhase);
        pool.parallelFor(parts, 1, &job, J.valuePhase);
        pool.parallelFor(H, grain(shape.dv * R), &job, J.voutPhase);
    }
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

/// The expanded formulation of §6.7 steps 4-7 in f64 throughout (keys and values re-expanded
/// from the latent, exp from std): what the latent kernel must agree with up to rounding.
fn expandedF64(alloc: std.mem.Allocator, q: []const f32, w: []const f32, ckv: []const f32, kr: []const f32, tokens: usize, sh: Shape) ![]f64 {
    const R = sh.rank;
    const out = try alloc.alloc(f64, tokens * sh.heads * sh.dv);
    const scores = try alloc.alloc(f64, tokens);
    defer alloc.free(scores);
    const scale = 1.0 / @sqrt(@as(f64, @floatFromInt(sh.dq())));
    for (0..tokens) |t| for (0..sh.heads) |h| {
        const qrow = q[(t * sh.heads + h) * sh.dq() ..];
        var m: f64 = -std.math.inf(f64);
        for (0..t + 1) |s| {
            var acc: f64 = 0;
            for (0..sh.dn) |i| {
                var k: f64 = 0;
                for (0..R) |r| k += @as(f64, w[(h * sh.headRows() + i) * R + r]) * ckv[s * R + r];
                acc += qrow[i] * k;
            }
            for (0..sh.dr) |i| acc += @as(f64, qrow[sh.dn + i]) * kr[s * sh.dr + i];
            scores[s] = acc * scale;
            m = @max(m, scores[s]);
        }
        var z: f64 = 0;
        for (0..t + 1) |s| {
            scores[s] = @exp(scores[s] - m);
            z += scores[s];
        }
        for (0..sh.dv) |j| {
            var o: f64 = 0;
            for (0..t + 1) |s| {
                var v: f64 = 0;
                for (0..R) |r| v += @as(f64, w[(h * sh.headRows() + sh.dn + j) * R + r]) * ckv[s * R + r];
                o += scores[s] / z * v;
            }
            out[(t * sh.heads + h) * sh.dv + j] = o;
        }
    };
    return out;
}

test "MLA latent: causal, prefill == incremental, SIMD == scalar, threads identical, bf16 == f32, close to the expanded form" {
    var prng = std.Random.DefaultPrng.init(31);
    const rnd = prng.random();
    const alloc = testing.allocator;
    // 11 heads: a block of 8 and one of 3; R = 37: 32 + one vector + a tail of 1; dv odd.
    const sh = Shape{ .heads = 11, .dn = 6, .dr = 2, .dv = 13, .rank = 37 };
    const T = 11;
    const q = try alloc.alloc(f32, T * sh.heads * sh.dq());
    defer alloc.free(q);
    const wbits = try alloc.alloc(u16, sh.heads * sh.headRows() * sh.rank);
    defer alloc.free(wbits);
    const w32 = try alloc.alloc(f32, wbits.len);
    defer alloc.free(w32);
    const ckv = try alloc.alloc(f32, T * sh.rank);
    defer alloc.free(ckv);
    const kr = try alloc.alloc(f32, T * sh.dr);
    defer alloc.free(kr);
    for (q) |*v| v.* = rnd.floatNorm(f32);
    for (wbits, w32) |*b, *f| {
        const x: f32 = 0.3 * rnd.floatNorm(f32);
        b.* = @truncate(@as(u32, @bitCast(x)) >> 16);
        f.* = common.bf16ToF32(b.*);
    }
    for (ckv) |*v| v.* = rnd.floatNorm(f32);
    for (kr) |*v| v.* = rnd.floatNorm(f32);
    const per = sh.heads * sh.dv;
    const full = try alloc.alloc(f32, T * per);
    defer alloc.free(full);
    const other = try alloc.alloc(f32, T * per);
    defer alloc.free(other);
    try attention(u16, q.ptr, wbits.ptr, ckv.ptr, kr.ptr, full.ptr, T, 0, sh);
    for (0..T) |t| try attention(u16, q.ptr + t * sh.heads * sh.dq(), wbits.ptr, ckv.ptr, kr.ptr, other[t * per ..].ptr, 1, t, sh);
    try testing.expectEqualSlices(u32, @ptrCast(full), @ptrCast(other));
    try attention(f32, q.ptr, w32.ptr, ckv.ptr, kr.ptr, other.ptr, T, 0, sh);
    try testing.expectEqualSlices(u32, @ptrCast(full), @ptrCast(other));
    common.setPath(.scalar);
    try attention(u16, q.ptr, wbits.ptr, ckv.ptr, kr.ptr, other.ptr, T, 0, sh);
    common.setPath(.simd);
    try testing.expectEqualSlices(u32, @ptrCast(full), @ptrCast(other));
    for ([_]u32{ 1, 2, 3 }) |threads| {
        try pool.init(threads);
        pool.setFineGrain(threads > 1);
        try attention(u16, q.ptr, wbits.ptr, ckv.ptr, kr.ptr, other.ptr, T, 0, sh);
        try testing.expectEqualSlices(u32, @ptrCast(full), @ptrCast(other));
    }
    pool.setFineGrain(false);
    pool.deinit();
    const want = try expandedF64(alloc, q, w32, ckv, kr, T, sh);
    defer alloc.free(want);
    for (full, want) |got, ref| try testing.expectApproxEqAbs(ref, @as(f64, got), 1e-5 * (1 + @abs(ref)));
    // changing a later position's latent does not change earlier outputs
    ckv[(T - 1) * sh.rank] += 5;
    try attention(u16, q.ptr, wbits.ptr, ckv.ptr, kr.ptr, other.ptr, T, 0, sh);
    try testing.expectEqualSlices(u32, @ptrCast(full[0 .. (T - 1) * per]), @ptrCast(other[0 .. (T - 1) * per]));
}
