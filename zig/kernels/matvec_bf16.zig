//! Linear maps with bf16 or f32 weights: y[t][o] = Σ_i W[o][i]·x[t][i] (model.md §6.1).
//!
//! Canonical order (§8.3), the same for both weight types and every path:
//!   * each product W[o][i]·x[t][i] is formed in f64 (exact: a bf16 or f32 weight times an f32
//!     activation needs at most 48 significant bits), so a fused multiply-add and a separate
//!     multiply and add give the same bits;
//!   * 16 f64 lane accumulators, lane l receiving i ≡ l (mod 16) for i < 16·⌊n/16⌋ in
//!     increasing i, each starting at +0;
//!   * lanes combined as c_m = (a_m + a_{m+4}) + (a_{m+8} + a_{m+12}) for m = 0…3, then
//!     (c_0 + c_1) + (c_2 + c_3);
//!   * the remaining n mod 16 elements added sequentially in f64;
//!   * one rounding to f32.
//! The SIMD path holds the 16 lanes in four 4-wide f64 registers (lane l = register l/4,
//! element l mod 4), so (r0 + r1) + (r2 + r3) computed elementwise is exactly c_0…c_3. The
//! activations are widened to f64 once per call (exact) and shared by all threads.
//!   * One token (decode): three rows run together to share the activation loads; a row
//!     computed alone (chunk edges) runs the same per-row sequence.
//!   * Several tokens (prefill): the 16 lanes of a (row, token) are independent chains, so
//!     the path runs one lane group (one register's worth of lanes) at a time, and a register
//!     tile holds one accumulator per (row, token): each weight vector is widened once for
//!     the tile's tokens and each activation vector loaded once for its rows (the activations
//!     widened into token panels, `widenSharedPanels`), over blocks of
//!     `multi_block_rows` rows and `multi_block_cols` columns so the weights and activations
//!     being reused stay in cache. The accumulators of every (row, token, lane group) are
//!     carried from one column block to the next (stored and reloaded unchanged), so each lane
//!     still receives its elements in increasing i from +0, and the tree, the tail and the
//!     rounding are the one-token ones: y[t][o] has the bits of a T = 1 call whatever T, the
//!     tiling or the thread count.
//!   * Several tokens where widening costs multiply-adds (AVX-512 on Intel, common.VectorPorts):
//!     the first token group of a block widens the weights in its tiles and keeps an f64 copy
//!     that up to seven more groups multiply from (`multiTokenWidened`); same order, same bits.
//! Threads split output rows, never the reduction.
const std = @import("std");
const common = @import("common.zig");
const pool = @import("pool");

pub const Error = common.Error;

/// Lanes of the canonical accumulation.
pub const lanes = 16;
/// Output rows computed together on the SIMD path (they share the activation loads): 16
/// accumulators. Measured on Zen 4 (2026-12-01, x86-64-v3 code, 7168 x 12288 streamed from
/// RAM): three rows ran at 16 GB/s with one thread and with two, four rows at 16 and 29-30; in
/// cache both run at 19 GB/s with one thread.
const block_rows = 4;
/// Software prefetch distance along a weight row, in elements (2 KB of bf16). A prefetch past
/// the end of a row is a harmless hint. The multi-token path keeps it: the first token group of
/// a row block reads the weights from memory.
const prefetch_elems: usize = 1024;
/// Prefetch into L2 (prefetcht1), not non-temporally: on Zen 4 (2026-12-01, 7168 x 12288, 2
/// threads, one run) the non-temporal hint gave 27 GB/s of weights and t1/t2 31-32 GB/s, of
/// 33.9 GB/s measured read bandwidth; t0 (into L1) gave 27.
pub const prefetch_locality = 2;
/// The multi-token path's f64 vectors: 8 lanes in the AVX-512 variant, else 4. The 16
/// canonical lanes of a (row, token) are `lane_groups` such vectors, and they are independent
/// chains, so the path runs one lane group at a time and a register tile holds one accumulator
/// per (row, token): AVX2 lane group k = elements 4k … 4k+3 of every 16; AVX-512 group 0 =
/// elements 0-3 and 8-11, group 1 = 4-7 and 12-15 (`wide_order`, the activations stored so).
const multi_lanes = if (common.wide) 8 else 4;
const lane_groups = lanes / multi_lanes;
const MVec = @Vector(multi_lanes, f64);
/// Register tile of the multi-token path, rows × tokens accumulators plus one weight vector
/// per row and one activation vector: 3 × 8 + 3 + 1 of the 32 AVX-512 registers, 1 × 12 + 1 + 1
/// of the 16 AVX2 ones (the activations come from the token panel, `widenSharedPanels`, at
/// fixed offsets from one pointer). Measured on Zen 4 (2026-12-06, 7168 × 12288, T = 32, 2
/// threads, as shares of the FMA peak): AVX2 1 × 12 74-76%, 1 × 14 75%, 2 × 6 66%, 3 × 4 62%;
/// AVX-512 4 × 6 86-90%, 3 × 8 85%, 2 × 12 74%. On the AVX-512 Xeons the widening (vpunpcklwd,
/// vcvtps2pd) issues on the ports of the multiply-adds, so fewer widenings per multiply-add
/// win there: 3 × 8 over 4 × 6 at T = 32, paired runs, 1 and 2 threads, 49-50% against
/// 47-48% and 48-49% against 46-47% (2026-12-06), and by 4-5 points on the Xeon of the session
/// before; the tile alone in L1 (bench/probes/bf16-tile.zig) 65% against 62%. 2 × 12 widens
/// least but loses more on Zen 4 than it gains here. (Before the panel, with every token's row
/// a multiple of 4 KB from the next, AVX2 1 × 12 ran at 22%: twelve tokens' lines in one L1 set.)
const multi: struct { rows: usize, tokens: usize } = if (common.wide) .{ .rows = 3, .tokens = 8 } else .{ .rows = 1, .tokens = 12 };
/// Rows per block of the multi-token path: every token group of the block passes over the
/// same rows, which then come from cache instead of memory after the first group.
const multi_block_rows = 64;
/// Columns per block of the multi-token path: one lane group of a twelve-token AVX2 panel over
/// 1,024 columns, or of an eight-token AVX-512 one over 768, is 24 KB, read contiguously, which
/// stays in L1 while the block's rows pass over it. Measured on AVX2 at T = 32, 2 threads
/// (2026-12-06): 512 or 768 columns 74-76%, 1,024 76-81%, 2,048 41% (48 KB: the lane group no
/// longer fits L1); 16 rows 73%, 32 or 64 rows 75-81%, 128 rows 75%. AVX-512 3 × 8 on the Xeon
/// measured the same at 768 and 1,024 columns (32 KB, all of Zen 4's L1).
const multi_block_cols = if (common.wide) 768 else 1024;

/// The scalar reference: the canonical order written as plain loops over f32 activations,
/// with separate multiply and add (no fused operation anywhere).
pub fn dotScalar(comptime W: type, w: []const W, x: []const f32) f32 {
    std.debug.assert(w.len == x.len);
    const n = w.len;
    const body = n - n % lanes;
    var a = [_]f64{0} ** lanes;
    var i: usize = 0;
    while (i < body) : (i += 1) {
        const p = common.weightF64(W, w[i]) * @as(f64, x[i]);
        a[i % lanes] = a[i % lanes] + p;
    }
    var c: [4]f64 = undefined;
    for (0..4) |m| c[m] = (a[m] + a[m + 4]) + (a[m + 8] + a[m + 12]);
    var acc = (c[0] + c[1]) + (c[2] + c[3]);
    while (i < n) : (i += 1) acc = acc + common.weightF64(W, w[i]) * @as(f64, x[i]);
    return @floatCast(acc);
}

const V4 = @Vector(4, f64);
const F4 = @Vector(4, f32);

/// Sixteen bf16 weights as f32 by interleaving zero halves below the bits (vpunpcklwd /
/// vpunpckhwd, the exact 16-bit shift): within each 128-bit half that gives elements
/// {0-3, 8-11} (first) and {4-7, 12-15} (second).
inline fn unpackBf16(p: [*]const u16) [2]@Vector(8, f32) {
    const w: @Vector(16, u16) = p[0..16].*;
    const z: @Vector(16, u16) = @splat(0);
    return .{
        @bitCast(@shuffle(u16, z, w, [16]i32{ 0, ~@as(i32, 0), 0, ~@as(i32, 1), 0, ~@as(i32, 2), 0, ~@as(i32, 3), 0, ~@as(i32, 8), 0, ~@as(i32, 9), 0, ~@as(i32, 10), 0, ~@as(i32, 11) })),
        @bitCast(@shuffle(u16, z, w, [16]i32{ 0, ~@as(i32, 4), 0, ~@as(i32, 5), 0, ~@as(i32, 6), 0, ~@as(i32, 7), 0, ~@as(i32, 12), 0, ~@as(i32, 13), 0, ~@as(i32, 14), 0, ~@as(i32, 15) })),
    };
}

/// Sixteen consecutive weights as four f64 vectors holding elements 0-3, 4-7, 8-11, 12-15
/// (bf16: `unpackBf16`'s halves routed to their lanes, so the partition is the canonical one).
inline fn widen16(comptime W: type, p: [*]const W) [4]V4 {
    switch (W) {
        u16 => {
            const lo, const hi = unpackBf16(p);
            return .{
                @floatCast(@as(F4, @shuffle(f32, lo, undefined, [4]i32{ 0, 1, 2, 3 }))),
                @floatCast(@as(F4, @shuffle(f32, hi, undefined, [4]i32{ 0, 1, 2, 3 }))),
                @floatCast(@as(F4, @shuffle(f32, lo, undefined, [4]i32{ 4, 5, 6, 7 }))),
                @floatCast(@as(F4, @shuffle(f32, hi, undefined, [4]i32{ 4, 5, 6, 7 }))),
            };
        },
        f32 => {
            var out: [4]V4 = undefined;
            inline for (0..4) |k| out[k] = @floatCast(@as(F4, p[4 * k ..][0..4].*));
            return out;
        },
        else => @compileError("weights are bf16 bits (u16) or f32"),
    }
}

/// B rows against R token vectors already widened to f64, over elements [from, to) (a
/// multiple of 16 apart), continuing the lane accumulators: acc[b][t][k] holds canonical
/// lanes 4k … 4k+3 of row b, token t. Each weight is widened once for all R tokens.
inline fn tile(comptime W: type, comptime B: usize, comptime R: usize, w: [B][*]const W, x64: [R][*]const f64, from: usize, to: usize, acc: *[B][R][4]V4) void {
    var a = acc.*;
    var i = from;
    while (i < to) : (i += lanes) {
        // one prefetch per 64-byte line: every other step for bf16
        const line = W == f32 or i % 32 == 0;
        inline for (0..B) |b| {
            if (line) @prefetch(w[b] + i + prefetch_elems, .{ .locality = prefetch_locality });
            const wv = widen16(W, w[b] + i);
            inline for (0..R) |t| {
                inline for (0..4) |k| a[b][t][k] = @mulAdd(V4, wv[k], x64[t][i + 4 * k ..][0..4].*, a[b][t][k]);
            }
        }
    }
    acc.* = a;
}

/// The lane tree, the sequential tail (the `tail` elements after the body: weights `wt`,
/// activations `xt`) and the one rounding to f32 of a (row, token) whose body lanes are `acc`.
inline fn finish(comptime W: type, acc: [4]V4, wt: [*]const W, xt: [*]const f64, tail: usize) f32 {
    const c = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    var s = (c[0] + c[1]) + (c[2] + c[3]);
    for (0..tail) |j| s = @mulAdd(f64, common.weightF64(W, wt[j]), xt[j], s);
    return @floatCast(s);
}

const zero_lanes = [4]V4{ @splat(0), @splat(0), @splat(0), @splat(0) };

/// R rows against one activation vector (`x64`, n elements): the one-token path.
inline fn dotRowsSimd(comptime W: type, comptime R: usize, w: [R][*]const W, x64: [*]const f64, n: usize) [R]f32 {
    const body = n - n % lanes;
    var acc: [R][1][4]V4 = @splat(.{zero_lanes});
    tile(W, R, 1, w, .{x64}, 0, body, &acc);
    var out: [R]f32 = undefined;
    inline for (0..R) |r| out[r] = finish(W, acc[r][0], w[r] + body, x64 + body, n - body);
    return out;
}

/// One row against x already widened to f64, in the canonical order: the SIMD path's dot, for
/// the kernels that take one (mla.zig's value output).
pub fn dotSimd(comptime W: type, w: [*]const W, x64: [*]const f64, n: usize) f32 {
    return dotRowsSimd(W, 1, .{w}, x64, n)[0];
}

// ---------------------------------------------------------------------------------------------
// The AVX-512 one-token path (compiled only where `common.wide`): the 16 lanes in two 8-wide
// f64 registers. Sixteen bf16 weights become f32 by interleaving zero halves below them within
// each 128-bit half (two unpacks), which yields elements {0-3, 8-11} and {4-7, 12-15}; those
// are widened to f64 as they are, and the activations are stored in the same order once per
// call (`widenPermuted`), so position p of the two registers always holds the same canonical
// lane: register 0 = lanes 0-3, 8-11, register 1 = lanes 4-7, 12-15. The lane tree is then
// (r0 + r1) = (a_m + a_{m+4} | a_{m+8} + a_{m+12}), whose halves added give c_0 … c_3. The
// tail beyond 16·⌊n/16⌋ keeps its natural order.

const V8 = @Vector(8, f64);

/// Element order of one 16-element block on the AVX-512 path.
const wide_order = [16]usize{ 0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15 };

/// x64[i] = x[i] in f64 with each full block of 16 stored in `wide_order`.
pub fn widenPermuted(x: [*]const f32, x64: [*]f64, count: usize) void {
    const body = count - count % lanes;
    var i: usize = 0;
    while (i < body) : (i += lanes) {
        const v: @Vector(16, f32) = x[i..][0..16].*;
        const p = @shuffle(f32, v, undefined, wideMask());
        x64[i..][0..8].* = @as(V8, @floatCast(@as(@Vector(8, f32), @shuffle(f32, p, undefined, [8]i32{ 0, 1, 2, 3, 4, 5, 6, 7 }))));
        x64[i + 8 ..][0..8].* = @as(V8, @floatCast(@as(@Vector(8, f32), @shuffle(f32, p, undefined, [8]i32{ 8, 9, 10, 11, 12, 13, 14, 15 }))));
    }
    while (i < count) : (i += 1) x64[i] = x[i];
}

fn wideMask() [16]i32 {
    var m: [16]i32 = undefined;
    for (0..16) |j| m[j] = @intCast(wide_order[j]);
    return m;
}

/// Sixteen consecutive weights as two f64 vectors in `wide_order`.
inline fn widen16Wide(comptime W: type, p: [*]const W) [2]V8 {
    switch (W) {
        u16 => {
            const lo, const hi = unpackBf16(p);
            return .{ @floatCast(lo), @floatCast(hi) };
        },
        f32 => {
            const v: @Vector(16, f32) = p[0..16].*;
            const q = @shuffle(f32, v, undefined, wideMask());
            return .{
                @floatCast(@as(@Vector(8, f32), @shuffle(f32, q, undefined, [8]i32{ 0, 1, 2, 3, 4, 5, 6, 7 }))),
                @floatCast(@as(@Vector(8, f32), @shuffle(f32, q, undefined, [8]i32{ 8, 9, 10, 11, 12, 13, 14, 15 }))),
            };
        },
        else => @compileError("weights are bf16 bits (u16) or f32"),
    }
}

/// Rows computed together on the AVX-512 one-token path (two accumulators each).
const wide_block_rows = 4;

/// R rows against one activation vector in `wide_order` (`x64`, n elements).
inline fn dotRowsWide(comptime W: type, comptime R: usize, w: [R][*]const W, x64: [*]const f64, n: usize) [R]f32 {
    const body = n - n % lanes;
    var acc: [R][2]V8 = @splat(.{ @splat(0), @splat(0) });
    var i: usize = 0;
    // Two blocks of 16 (one 64-byte line of bf16) per step: one prefetch per line.
    while (i + 2 * lanes <= body) : (i += 2 * lanes) {
        inline for (0..R) |r| @prefetch(w[r] + i + prefetch_elems, .{ .locality = prefetch_locality });
        inline for (0..2) |h| {
            const x0: V8 = x64[i + h * lanes ..][0..8].*;
            const x1: V8 = x64[i + h * lanes + 8 ..][0..8].*;
            inline for (0..R) |r| {
                const wv = widen16Wide(W, w[r] + i + h * lanes);
                acc[r][0] = @mulAdd(V8, wv[0], x0, acc[r][0]);
                acc[r][1] = @mulAdd(V8, wv[1], x1, acc[r][1]);
            }
        }
    }
    if (i < body) {
        const x0: V8 = x64[i..][0..8].*;
        const x1: V8 = x64[i + 8 ..][0..8].*;
        inline for (0..R) |r| {
            const wv = widen16Wide(W, w[r] + i);
            acc[r][0] = @mulAdd(V8, wv[0], x0, acc[r][0]);
            acc[r][1] = @mulAdd(V8, wv[1], x1, acc[r][1]);
        }
    }
    var out: [R]f32 = undefined;
    inline for (0..R) |r| out[r] = finishGroups(W, acc[r], w[r] + body, x64 + body, n - body);
    return out;
}

fn Job(comptime W: type) type {
    return struct {
        w: [*]const W,
        rows: usize,
        cols: usize,
        x: [*]const f32,
        x64: [*]const f64,
        y: [*]f32,
        tokens: usize,
        scalar: bool,

        fn run(self: *const @This(), begin: usize, end: usize, worker: usize) void {
            const n = self.cols;
            if (self.scalar) {
                for (begin..end) |o| {
                    const row = self.w[o * n ..][0..n];
                    for (0..self.tokens) |t| {
                        self.y[t * self.rows + o] = dotScalar(W, row, self.x[t * n ..][0..n]);
                    }
                }
                return;
            }
            if (self.tokens > 1) {
                if (takesWidened(self.tokens)) return self.multiTokenWidened(begin, end, worker);
                return self.multiToken(begin, end);
            }
            if (common.wide) return self.oneTokenWide(begin, end);
            var o = begin;
            while (o + block_rows <= end) : (o += block_rows) {
                var ws: [block_rows][*]const W = undefined;
                inline for (0..block_rows) |r| ws[r] = self.w + (o + r) * n;
                const out = dotRowsSimd(W, block_rows, ws, self.x64, n);
                inline for (0..block_rows) |r| self.y[o + r] = out[r];
            }
            while (o < end) : (o += 1) {
                const out = dotRowsSimd(W, 1, .{self.w + o * n}, self.x64, n);
                self.y[o] = out[0];
            }
        }

        fn oneTokenWide(self: *const @This(), begin: usize, end: usize) void {
            const n = self.cols;
            var o = begin;
            while (o + wide_block_rows <= end) : (o += wide_block_rows) {
                var ws: [wide_block_rows][*]const W = undefined;
                inline for (0..wide_block_rows) |r| ws[r] = self.w + (o + r) * n;
                const out = dotRowsWide(W, wide_block_rows, ws, self.x64, n);
                inline for (0..wide_block_rows) |r| self.y[o + r] = out[r];
            }
            while (o < end) : (o += 1) self.y[o] = dotRowsWide(W, 1, .{self.w + o * n}, self.x64, n)[0];
        }

        /// The multi-token path where widening costs multiply-adds (`takesWidened`): rows in
        /// blocks of `widened_rows`, tokens in runs of at most `widened_groups` token groups,
        /// columns in blocks of `widened_cols`. In each block the first token group widens
        /// the weights in its tiles as `multiToken` does and also stores them, as f64, in the
        /// worker's scratch; the run's other groups multiply from that copy, so a weight is
        /// widened once per run of up to 64 tokens instead of once per 8. Every (row, token,
        /// lane group) accumulator lives in scratch across the column blocks and receives its
        /// elements in the same order as in `multiToken`: the same bits.
        fn multiTokenWidened(self: *const @This(), begin: usize, end: usize, worker: usize) void {
            const T = self.tokens;
            const n = self.cols;
            const body = n - n % lanes;
            const groups = tokenGroups(T);
            const raw = pool.scratchFor(worker);
            const wscr: [*]MVec = @ptrCast(@alignCast(raw.ptr));
            const acc: [*]MVec = wscr + widened_rows * (widened_cols / multi_lanes);
            var o = begin;
            while (o < end) {
                const nb = @min(widened_rows, end - o);
                var k0: usize = 0;
                while (k0 < groups) {
                    const k1 = @min(groups, k0 + widened_groups);
                    const t_lo = tokenGroupStart(T, groups, k0);
                    const t_hi = tokenGroupStart(T, groups, k1);
                    std.debug.assert(widenedScratch(t_hi - t_lo) <= raw.len);
                    // the tiles start the accumulators at +0 in the first column block; with no
                    // whole block of 16 there is none
                    if (body == 0) @memset(acc[0 .. nb * (t_hi - t_lo) * lane_groups], @as(MVec, @splat(0)));
                    var from: usize = 0;
                    while (from < body) {
                        const to = @min(body, from + widened_cols);
                        // where the block the next run's first group widens starts, for this run's
                        // last group to bring into L2 (`widened_prefetch_elems`)
                        const nextBlock: ?[*]const W = if (to < body) self.w + o * n + to else if (k1 < groups) self.w + o * n else if (o + nb < end) self.w + (o + nb) * n else null;
                        for (k0..k1) |k| {
                            const t0 = tokenGroupStart(T, groups, k);
                            const size = tokenGroupStart(T, groups, k + 1) - t0;
                            const a = acc + nb * (t0 - t_lo) * lane_groups;
                            switch (size) {
                                inline 1...multi.tokens => |R| if (k == k0) self.columnBlock(R, .store, o, nb, t0, from, to, wscr, @ptrCast(a), null) else self.columnBlock(R, .load, o, nb, t0, from, to, wscr, @ptrCast(a), if (k + 1 < k1) null else nextBlock),
                                else => unreachable,
                            }
                        }
                        from = to;
                    }
                    for (k0..k1) |k| {
                        const t0 = tokenGroupStart(T, groups, k);
                        const size = tokenGroupStart(T, groups, k + 1) - t0;
                        const a = acc + nb * (t0 - t_lo) * lane_groups;
                        switch (size) {
                            inline 1...multi.tokens => |R| self.finishRows(R, o, nb, t0, @ptrCast(a)),
                            else => unreachable,
                        }
                    }
                    k0 = k1;
                }
                o += nb;
            }
        }

        /// Token group t0 … t0+R−1 against rows o … o+nb−1 over the column block [from, to),
        /// lane group by lane group, in tiles of `multi.rows` rows, for both multi-token paths.
        /// `copy`: `.none` in `tokenGroup` (`wscr` unused); on the widened path `.store` for a
        /// run's first group and `.load` for the others (lane group g of row b's block j of the
        /// copy at wscr[(g·widened_rows + b)·(widened_cols/lanes) + j]). `ahead`, if any, is
        /// where the block the next first group widens starts (row o's element), prefetched
        /// into L2 as this group goes.
        fn columnBlock(self: *const @This(), comptime R: usize, comptime copy: Copy, o: usize, nb: usize, t0: usize, from: usize, to: usize, wscr: [*]MVec, acc: [*][lane_groups][R]MVec, ahead: ?[*]const W) void {
            const panel = self.x64 + t0 * self.cols;
            inline for (0..lane_groups) |g| {
                var b: usize = 0;
                while (b < nb) {
                    switch (@min(multi.rows, nb - b)) {
                        inline 1...multi.rows => |B| {
                            const kept = if (copy == .none) undefined else wscr + (g * widened_rows + b) * (widened_cols / lanes);
                            self.groupTile(B, R, g, copy, o + b, panel, from, to, acc + b, kept, if (ahead) |p| p + b * self.cols else null);
                            b += B;
                        },
                        else => unreachable,
                    }
                }
            }
        }

        /// Blocks of `multi_block_rows` rows; tokens in balanced groups of at most
        /// `multi.tokens` (a group of one would widen every weight for a single token).
        fn multiToken(self: *const @This(), begin: usize, end: usize) void {
            const T = self.tokens;
            const groups = tokenGroups(T);
            var o = begin;
            while (o < end) {
                const nb = @min(multi_block_rows, end - o);
                var t: usize = 0;
                for (0..groups) |g| {
                    const size = tokenGroupStart(T, groups, g + 1) - tokenGroupStart(T, groups, g);
                    switch (size) {
                        inline 1...multi.tokens => |R| self.tokenGroup(R, o, nb, t),
                        else => unreachable,
                    }
                    t += size;
                }
                o += nb;
            }
        }

        /// Rows o … o+nb−1 against tokens t0 … t0+R−1: per column block, per lane group,
        /// register tiles of `multi.rows` rows × R tokens with one accumulator each.
        fn tokenGroup(self: *const @This(), comptime R: usize, o: usize, nb: usize, t0: usize) void {
            std.debug.assert(nb >= 1 and nb <= multi_block_rows and o + nb <= self.rows and t0 + R <= self.tokens);
            const n = self.cols;
            const body = n - n % lanes;
            var acc: [multi_block_rows][lane_groups][R]MVec = undefined;
            // the tiles start them at +0 in the first column block, if there is one
            if (body == 0) for (acc[0..nb]) |*a| {
                a.* = @splat(@splat(@splat(0)));
            };
            var from: usize = 0;
            while (from < body) {
                const to = @min(body, from + multi_block_cols);
                self.columnBlock(R, .none, o, nb, t0, from, to, undefined, &acc, null);
                from = to;
            }
            self.finishRows(R, o, nb, t0, &acc);
        }

        /// The tree, tail and rounding (`finishGroups`) of rows o … o+nb−1 × tokens t0 …
        /// t0+R−1, whose lane accumulators are acc[b][g][t].
        fn finishRows(self: *const @This(), comptime R: usize, o: usize, nb: usize, t0: usize, acc: [*]const [lane_groups][R]MVec) void {
            const n = self.cols;
            const body = n - n % lanes;
            const panel = self.x64 + t0 * n;
            for (0..nb) |b| {
                inline for (0..R) |t| {
                    var groups: [lane_groups]MVec = undefined;
                    inline for (0..lane_groups) |g| groups[g] = acc[b][g][t];
                    self.y[(t0 + t) * self.rows + o + b] = finishGroups(W, groups, self.w + (o + b) * n + body, panel + panelTailOffset(n, R, t), n - body);
                }
            }
        }

        /// Lane group g of rows o … o+B−1 × R tokens over elements [from, to), continuing the
        /// accumulators acc[b][g][t]: each weight vector widened once for R tokens (or, `copy`
        /// `.load`, read from the f64 copy `kept`, row b's block j at kept[b·(widened_cols/lanes)
        /// + j]; `.store` widens and keeps it there), each activation vector loaded once for B
        /// rows. With `ahead`, the load tile prefetches row b's weights at ahead + b·n + (i −
        /// from) into L2 as it passes column i.
        inline fn groupTile(self: *const @This(), comptime B: usize, comptime R: usize, comptime g: usize, comptime copy: Copy, o: usize, panel: [*]const f64, from: usize, to: usize, acc: [*][lane_groups][R]MVec, kept: [*]MVec, ahead: ?[*]const W) void {
            const n = self.cols;
            const body = n - n % lanes;
            var a: [B][R]MVec = undefined;
            // the first column block starts every accumulator at +0
            inline for (0..B) |b| a[b] = if (from == 0) @splat(@splat(0)) else acc[b][g];
            var i = from;
            var j: usize = 0;
            while (i < to) : ({
                i += lanes;
                j += 1;
            }) {
                var wv: [B]MVec = undefined;
                // one prefetch per 64-byte line: every other step for bf16
                const line = W == f32 or i % 32 == 0;
                inline for (0..B) |b| {
                    if (copy == .load) {
                        wv[b] = kept[b * (widened_cols / lanes) + j];
                        if (g == 0 and line) if (ahead) |p| @prefetch(p + b * n + (i - from), .{ .locality = prefetch_locality });
                    } else {
                        const row = self.w + (o + b) * n;
                        if (line) {
                            if (copy == .store) {
                                @prefetch(row + i + widened_prefetch_elems, .{ .locality = 3 });
                            } else if (g == 0) {
                                @prefetch(row + i + prefetch_elems, .{ .locality = prefetch_locality });
                            }
                        }
                        wv[b] = widenGroup(W, g, row + i);
                        if (copy == .store) kept[b * (widened_cols / lanes) + j] = wv[b];
                    }
                }
                inline for (0..R) |t| {
                    const xv: MVec = panel[panelOffset(body, R, g, i, t)..][0..multi_lanes].*;
                    inline for (0..B) |b| a[b][t] = @mulAdd(MVec, wv[b], xv, a[b][t]);
                }
            }
            inline for (0..B) |b| acc[b][g] = a[b];
        }
    };
}

/// The widened multi-token path's blocks, measured on the AVX-512 Xeon (2026-12-06, 1 thread,
/// 3072 × 3584, T = 16 / 32 / 64, shares of the FMA peak): 66 rows × 768 columns 58 / 66 /
/// 69%; 63 × 768 57-58 / 64-66 / 67-69%; 64 × 512 57 / 64 / 67%; 96 × 384 and 48 × 384 a point
/// or two lower; 1,024 columns 54 / 61 / 66% and 1,536 48 / 54 / 56% (a token group's lane
/// group of activations, 8 × 512 × 8 bytes, no longer stays in L1 beside the tiles' weights).
/// 66 rows are 22 whole tiles; the f64 copy is 66 × 768 × 8 = 396 KB, in L2.
const widened_rows: usize = 66;
const widened_cols: usize = 768;
/// Token groups that share one widening: the accumulators of 66 rows × 64 tokens are 528 KB.
const widened_groups: usize = 8;
/// How far ahead the widened path's first group prefetches its weights along a row, into L1;
/// a run's last group has brought the block into L2 (`ahead` of `groupTile`). Between the first
/// group's passes over two blocks the run's other groups touch about 1 MB of copy,
/// accumulators and activations, which pushed the next block's weights out of L2 before they
/// were read. Measured on the AVX-512 Xeon (2026-12-06, 1 thread, 3072 × 3584, T = 64, the
/// first group's time over another group's, rdtsc around each in a scratch build): with the
/// multi-token prefetch alone (2 KB ahead into L2) 1.95-2.13; the last group prefetching the
/// next block of the same rows 1.67-1.79, and of the next rows too 1.53-1.60; this prefetch
/// instead of the 2 KB one 1.37-1.46 (256 elements 1.42-1.50). The call: 70-71% -> 72-73% of
/// the FMA peak, in best-of runs on a noisy host.
const widened_prefetch_elems: usize = 128;

/// What a multi-token tile does with the f64 copy of the weights (`multiTokenWidened`): none
/// (`multiToken`), widen and keep it, or multiply from it.
const Copy = enum { none, store, load };

/// Whether a call of `tokens` tokens takes the widened multi-token path: AVX-512 code, on a
/// CPU whose widening conversions issue on the multiply-add ports (common.VectorPorts), and at
/// least two token groups to share each widening.
inline fn takesWidened(tokens: usize) bool {
    return common.wide and common.vectorPorts() == .on_fma_ports and tokenGroups(tokens) >= 2;
}

/// Worker scratch of the widened path, in bytes: the f64 copy of a block and the accumulators
/// of a run (16 lanes per row and token).
fn widenedScratch(tokens: usize) usize {
    const t = @min(tokens, widened_groups * multi.tokens);
    return (widened_rows * widened_cols + widened_rows * t * lanes) * @sizeOf(f64);
}

/// Lane group g of the 16 weights at p, widened exactly to f64 (see `multi_lanes`): on
/// AVX-512 one half of `widen16Wide`; on AVX2 the four weights of the group alone, made f32 by
/// interleaving zero halves below them (vpunpcklwd) rather than zero-extending and shifting
/// (vpmovzxwd, vpslld): one vector operation fewer a weight vector (Zen 4, 2026-12-06, 7168 x
/// 12288, 1 thread, four alternated pairs: T = 32 56-57% -> 58-59% of the FMA peak, with the
/// 2 × 6 tile and each token's activations a row of its own; the panels came later).
inline fn widenGroup(comptime W: type, comptime g: usize, p: [*]const W) MVec {
    if (common.wide) return widen16Wide(W, p)[g];
    return switch (W) {
        u16 => blk: {
            const w: @Vector(4, u16) = p[4 * g ..][0..4].*;
            const z: @Vector(4, u16) = @splat(0);
            const f: @Vector(8, u16) = @shuffle(u16, z, w, [8]i32{ 0, ~@as(i32, 0), 0, ~@as(i32, 1), 0, ~@as(i32, 2), 0, ~@as(i32, 3) });
            break :blk @floatCast(@as(F4, @bitCast(f)));
        },
        f32 => @floatCast(@as(F4, p[4 * g ..][0..4].*)),
        else => @compileError("weights are bf16 bits (u16) or f32"),
    };
}

/// The lane tree, the sequential tail and the one rounding of a (row, token) whose lane
/// groups are `acc`: `finish` on AVX2; on AVX-512 the tree of the permuted order (register 0 =
/// lanes 0-3, 8-11, register 1 = lanes 4-7, 12-15), shared with the one-token path.
inline fn finishGroups(comptime W: type, acc: [lane_groups]MVec, wt: [*]const W, xt: [*]const f64, tail: usize) f32 {
    if (!common.wide) return finish(W, acc, wt, xt, tail);
    const p = acc[0] + acc[1];
    const c = @shuffle(f64, p, undefined, [4]i32{ 0, 1, 2, 3 }) + @shuffle(f64, p, undefined, [4]i32{ 4, 5, 6, 7 });
    var s = (c[0] + c[1]) + (c[2] + c[3]);
    for (0..tail) |j| s = @mulAdd(f64, common.weightF64(W, wt[j]), xt[j], s);
    return @floatCast(s);
}

/// Widens `count` f32 activations to f64 (exact) into pool shared scratch.
pub fn widenShared(x: [*]const f32, count: usize) Error![*]const f64 {
    const bytes = try common.mulSize(count, @sizeOf(f64));
    const buf = pool.reserveShared(bytes) catch return error.OutOfMemory;
    std.debug.assert(buf.len >= bytes);
    const x64: [*]f64 = @ptrCast(buf.ptr);
    widen(x, x64, count);
    return x64;
}

/// The multi-token path's token groups: the balanced partition of `tokens` into groups of at
/// most `multi.tokens`, group k starting at token `tokenGroupStart(tokens, groups, k)`.
fn tokenGroups(tokens: usize) usize {
    return (tokens + multi.tokens - 1) / multi.tokens;
}

fn tokenGroupStart(tokens: usize, groups: usize, k: usize) usize {
    return (tokens * k) / groups;
}

/// Where token t's lane group g of the 16-element block at column i sits in a panel of R
/// tokens whose rows have `body` elements in whole blocks (`widenSharedPanels`).
inline fn panelOffset(body: usize, R: usize, g: usize, i: usize, t: usize) usize {
    return g * (body * R / lane_groups) + (i / lane_groups) * R + t * multi_lanes;
}

/// Where token t's n mod 16 tail elements start in a panel of R tokens of n elements.
inline fn panelTailOffset(n: usize, R: usize, t: usize) usize {
    const body = n - n % lanes;
    return body * R + t * (n - body);
}

/// Widens the activations (exact) into pool shared scratch as one panel per token group (the
/// R tokens from t0 occupy elements t0·n … (t0+R)·n−1): lane group g of every 16-element
/// block (`wide_order` on AVX-512), block by block and token by token within a block, so the
/// element at offset g·(body·R/lane_groups) + (j/lane_groups)·R + t·multi_lanes is token t's
/// lane group g of the block starting at column j; then each token's n mod 16 tail elements.
/// A tile's pass over one lane group then reads one contiguous run, every token's vector at a
/// fixed distance from one pointer. Rows of their own would put the tokens a multiple of 4 KB
/// apart at the model's widths, all in the same L1 sets. A call of one token widens its plain
/// row instead, as the one-token paths read it.
fn widenSharedPanels(x: [*]const f32, cols: usize, tokens: usize) Error![*]const f64 {
    const bytes = try common.mulSize(try common.mulSize(cols, tokens), @sizeOf(f64));
    const buf = pool.reserveShared(bytes) catch return error.OutOfMemory;
    std.debug.assert(buf.len >= bytes);
    const x64: [*]f64 = @ptrCast(buf.ptr);
    if (tokens == 1) {
        if (common.wide) widenPermuted(x, x64, cols) else widen(x, x64, cols);
        return x64;
    }
    const body = cols - cols % lanes;
    const groups = tokenGroups(tokens);
    for (0..groups) |k| {
        const t0 = tokenGroupStart(tokens, groups, k);
        const size = tokenGroupStart(tokens, groups, k + 1) - t0;
        const panel = x64 + t0 * cols;
        for (0..size) |t| {
            const row = x + (t0 + t) * cols;
            var i: usize = 0;
            while (i < body) : (i += lanes) {
                var block: [lanes]f64 = undefined;
                if (common.wide) widenPermuted(row + i, &block, lanes) else widen(row + i, &block, lanes);
                for (0..lane_groups) |g| panel[panelOffset(body, size, g, i, t)..][0..multi_lanes].* = block[g * multi_lanes ..][0..multi_lanes].*;
            }
            widen(row + body, panel + panelTailOffset(cols, size, t), cols - body);
        }
    }
    return x64;
}

pub fn widen(x: [*]const f32, x64: [*]f64, count: usize) void {
    var i: usize = 0;
    while (i + 8 <= count) : (i += 8) {
        const v: @Vector(8, f32) = x[i..][0..8].*;
        x64[i..][0..8].* = @as(@Vector(8, f64), @floatCast(v));
    }
    while (i < count) : (i += 1) x64[i] = x[i];
}

/// Rows per parallel chunk: at least ~64K multiply-adds so a chunk outweighs its dispatch.
pub fn grainRows(cols: usize, tokens: usize) usize {
    return @max(1, (64 * 1024) / @max(1, cols * tokens));
}

/// y[t][o] = Σ_i W[o][i]·x[t][i] for t < tokens; W is rows × cols, x is tokens × cols,
/// y is tokens × rows (all row-major, contiguous). y must not overlap W or x.
/// The bf16 entry point (table.zig `matmul_bf16`).
pub fn matmulBf16(w: [*]const u16, rows: usize, cols: usize, x: [*]const f32, y: [*]f32, tokens: usize) Error!void {
    return matmul(u16, w, rows, cols, x, y, tokens);
}

/// The f32 entry point (table.zig `matmul_f32`).
pub fn matmulF32(w: [*]const f32, rows: usize, cols: usize, x: [*]const f32, y: [*]f32, tokens: usize) Error!void {
    return matmul(f32, w, rows, cols, x, y, tokens);
}

pub fn matmul(comptime W: type, w: [*]const W, rows: usize, cols: usize, x: [*]const f32, y: [*]f32, tokens: usize) Error!void {
    if (rows == 0 or cols == 0 or tokens == 0) return error.BadArgument;
    _ = try common.mulSize(rows, cols);
    const scalar = common.path() == .scalar;
    const x64: [*]const f64 = if (scalar) undefined else try widenSharedPanels(x, cols, tokens);
    if (!scalar and takesWidened(tokens)) pool.reserveScratch(widenedScratch(tokens)) catch return error.OutOfMemory;
    const job = Job(W){ .w = w, .rows = rows, .cols = cols, .x = x, .x64 = x64, .y = y, .tokens = tokens, .scalar = scalar };
    pool.parallelFor(rows, grainRows(cols, tokens), &job, Job(W).run);
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn randomBf16(rnd: std.Random, scale: f32) u16 {
    const f: f32 = (rnd.float(f32) * 2 - 1) * scale;
    return @truncate(@as(u32, @bitCast(f)) >> 16);
}

test "SIMD equals scalar bit for bit, bf16 equals f32 on widened weights, any T equals T=1" {
    var prng = std.Random.DefaultPrng.init(1);
    const rnd = prng.random();
    const alloc = testing.allocator;
    // rows across the 3-row tiles and the 64- and 66-row blocks, cols across the 16 lanes and
    // the 768- and 1,024-column blocks (529 ≡ 1 and 1039 ≡ 15 mod 16); 65 and 72 tokens are
    // more than one run of the widened path (`widened_groups`)
    const sizes = [_][2]usize{ .{ 1, 1 }, .{ 3, 15 }, .{ 5, 16 }, .{ 7, 17 }, .{ 9, 33 }, .{ 13, 255 }, .{ 33, 1000 }, .{ 4, 4099 }, .{ 37, 529 }, .{ 70, 1039 } };
    const token_counts = [_]usize{ 1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 65, 72 };
    const max_tokens = 72;
    defer pool.setVectorPorts(.beside_fma);
    for (sizes) |sz| {
        const rows = sz[0];
        const cols = sz[1];
        const wb = try alloc.alloc(u16, rows * cols);
        defer alloc.free(wb);
        const wf = try alloc.alloc(f32, rows * cols);
        defer alloc.free(wf);
        const x = try alloc.alloc(f32, max_tokens * cols);
        defer alloc.free(x);
        for (wb, wf) |*b, *f| {
            b.* = randomBf16(rnd, 0.5);
            f.* = common.bf16ToF32(b.*);
        }
        // include values spanning many binades so the summation order matters
        for (x) |*v| v.* = (rnd.float(f32) * 2 - 1) * std.math.pow(f32, 2, @floatFromInt(rnd.intRangeAtMost(i32, -20, 20)));
        const y_simd = try alloc.alloc(f32, max_tokens * rows);
        defer alloc.free(y_simd);
        const y_f32 = try alloc.alloc(f32, max_tokens * rows);
        defer alloc.free(y_f32);
        const y_one = try alloc.alloc(f32, rows);
        defer alloc.free(y_one);
        // the per-token oracle: scalar reference bits of every (token, row)
        const want = try alloc.alloc(f32, max_tokens * rows);
        defer alloc.free(want);
        for (0..max_tokens) |t| {
            for (0..rows) |o| want[t * rows + o] = dotScalar(u16, wb[o * cols ..][0..cols], x[t * cols ..][0..cols]);
        }
        common.setPath(.simd);
        for (0..max_tokens) |t| {
            try matmul(u16, wb.ptr, rows, cols, x.ptr + t * cols, y_one.ptr, 1);
            try testing.expectEqualSlices(u32, @ptrCast(want[t * rows ..][0..rows]), @ptrCast(y_one));
        }
        // both multi-token plans (the widened path runs only in AVX-512 code)
        for ([_]pool.VectorPorts{ .beside_fma, .on_fma_ports }) |ports| {
            pool.setVectorPorts(ports);
            for (token_counts) |tokens| {
                try matmul(u16, wb.ptr, rows, cols, x.ptr, y_simd.ptr, tokens);
                try matmul(f32, wf.ptr, rows, cols, x.ptr, y_f32.ptr, tokens);
                try testing.expectEqualSlices(u32, @ptrCast(want[0 .. tokens * rows]), @ptrCast(y_simd[0 .. tokens * rows]));
                try testing.expectEqualSlices(u32, @ptrCast(y_simd[0 .. tokens * rows]), @ptrCast(y_f32[0 .. tokens * rows]));
            }
        }
        common.setPath(.scalar);
        try matmul(u16, wb.ptr, rows, cols, x.ptr, y_simd.ptr, 3);
        common.setPath(.simd);
        try testing.expectEqualSlices(u32, @ptrCast(want[0 .. 3 * rows]), @ptrCast(y_simd[0 .. 3 * rows]));
    }
}

test "canonical lane order, checked against a hand-written sum" {
    // 19 elements: lanes 0..2 get two products each, tail is 3 elements.
    var w: [19]f32 = undefined;
    var x: [19]f32 = undefined;
    for (0..19) |i| {
        w[i] = 1.0;
        x[i] = if (i % 2 == 0) 1e16 else 1.0;
    }
    x[18] = -1e16;
    var a = [_]f64{0} ** 16;
    for (0..16) |i| a[i] = @as(f64, x[i]);
    var c: [4]f64 = undefined;
    for (0..4) |m| c[m] = (a[m] + a[m + 4]) + (a[m + 8] + a[m + 12]);
    var want = (c[0] + c[1]) + (c[2] + c[3]);
    for (16..19) |i| want += @as(f64, x[i]);
    var y: [1]f32 = undefined;
    try matmul(f32, &w, 1, 19, &x, &y, 1);
    try testing.expectEqual(@as(f32, @floatCast(want)), y[0]);
}

test "thread counts 1, 2, 3 (coarse and one-row chunks) give identical bits, one token or many" {
    var prng = std.Random.DefaultPrng.init(3);
    const rnd = prng.random();
    const alloc = testing.allocator;
    const rows = 301;
    const cols = 517;
    const tokens = 7;
    const w = try alloc.alloc(u16, rows * cols);
    defer alloc.free(w);
    const x = try alloc.alloc(f32, tokens * cols);
    defer alloc.free(x);
    for (w) |*b| b.* = randomBf16(rnd, 1.0);
    for (x) |*v| v.* = rnd.float(f32) * 2 - 1;
    for ([_]usize{ 1, 2, tokens }) |T| {
        var ys: [5][tokens * rows]f32 = undefined;
        const runs = [_]struct { threads: u32, fine: bool }{ .{ .threads = 1, .fine = false }, .{ .threads = 2, .fine = false }, .{ .threads = 2, .fine = true }, .{ .threads = 3, .fine = false }, .{ .threads = 3, .fine = true } };
        for (runs, 0..) |run, k| {
            try pool.init(run.threads);
            pool.setFineGrain(run.fine);
            try matmul(u16, w.ptr, rows, cols, x.ptr, &ys[k], T);
        }
        for (1..runs.len) |k| try testing.expectEqualSlices(u32, @ptrCast(ys[0][0 .. T * rows]), @ptrCast(ys[k][0 .. T * rows]));
    }
    pool.setFineGrain(false);
    pool.deinit();
}
