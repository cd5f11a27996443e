//! MXFP4 matmul for a few tokens on AVX-512 with the rows as the lanes: a block of eight rows
//! is decoded a few groups at a time into a small panel, one vector per element holding that
//! element of the eight rows, and each token's activation is broadcast against it. The lane
//! tiles of matvec_mxfp4.zig make the tokens the lanes instead, so a token count that is not a
//! multiple of eight pays for padding lanes (T = 9 fills 12 lanes, T = 13 16); here a tile takes
//! one to `max_tile_tokens` tokens exactly.
//!
//! Per (row, token) the arithmetic is the one-token sequence of matvec_mxfp4.zig (model.md
//! §8.3): lane chain l of a group is elements l, l+8, l+16, l+24 multiplied in order from +0
//! (doubled codes, so every intermediate is twice the canonical one), the chains meet in the
//! tree ((l0+l4)+(l1+l5))+((l2+l6)+(l3+l7)), the group sum is multiplied by 2^(s−128) and added
//! to the row total in group order, and a 255 scale leaves the total as it was.
const std = @import("std");
const mx = @import("matvec_mxfp4.zig");

const V8 = @Vector(8, f64);
const U8x8 = @Vector(8, u64);

/// Rows per tile: the f64 lanes of one AVX-512 register.
pub const tile_rows = 8;
/// Most tokens per tile: each holds its total and up to four tree vectors live, 20 of the 32
/// registers. Five and six measured the same (Zen 4, 2026-12-06, 1 thread, 3072 x 3584, T = 4
/// to 32 within a point or two).
pub const max_tile_tokens = 4;
/// Most tokens of one call (the totals of a row block live on the stack).
pub const max_tokens = 64;

/// How far ahead along each row the decode prefetches (into L1), in bytes.
const prefetch_bytes = 256;

extern fn @"llvm.x86.avx512.vpermi2var.pd.512"(a: V8, idx: @Vector(8, i64), b: V8) V8;

/// Element c of eight rows' group as doubled values: its code is bits 4c … 4c+3 of the words
/// holding bytes 0-7 (c < 16) or 8-15 of each row's group, and `vpermi2pd` reads only the low
/// four bits of each shifted lane.
inline fn element(words: [2]U8x8, comptime c: usize) V8 {
    const shifted = words[c / 16] >> @as(U8x8, @splat(4 * (c % 16)));
    return @"llvm.x86.avx512.vpermi2var.pd.512"(mx.doubled_lo, @bitCast(shifted), mx.doubled_hi);
}

/// A decoded block: `panel_groups` groups of eight rows, element c of group j in
/// `weights[j][c]` (doubled values), and each group's eight scale bytes.
const Panel = struct {
    weights: [panel_groups][32]V8 align(64),
    codes: [panel_groups]@Vector(tile_rows, u8),
};

/// Groups decoded at once: 8 KB of weights, in L1 while every token tile runs over them.
const panel_groups = 4;

/// Lane chain l for B tokens: elements l, l+8, l+16, l+24 in order from +0.
inline fn chain(comptime B: usize, comptime l: usize, w: *const [32]V8, xs: [B][*]const f64) [B]V8 {
    var acc: [B]V8 = @splat(@splat(0));
    // the first chain of each pair starts after the pair before it is done (see `mx.inOrder`)
    if (l < 4) {
        inline for (0..B) |t| acc[t] = mx.inOrder(V8, acc[t]);
    }
    inline for (0..4) |m| {
        const c = l + 8 * m;
        inline for (0..B) |t| acc[t] = @mulAdd(V8, w[c], @as(V8, @splat(xs[t][c])), acc[t]);
    }
    return acc;
}

inline fn add(comptime B: usize, p: [B]V8, q: [B]V8) [B]V8 {
    var r: [B]V8 = undefined;
    inline for (0..B) |t| r[t] = mx.inOrder(V8, p[t] + q[t]);
    return r;
}

/// Decodes groups g0 … g0+kg−1 of rows r0 … r0+7.
fn decode(packed_w: [*]const u8, scales: [*]const u8, cols: usize, r0: usize, g0: usize, kg: usize, panel: *Panel) void {
    const half = cols / 2;
    const groups = cols / mx.group;
    for (0..kg) |j| {
        const g = g0 + j;
        var words: [2]U8x8 = undefined;
        inline for (0..tile_rows) |i| {
            const row = packed_w + (r0 + i) * half + g * 16;
            if (j == 0) {
                // both lines of a step that starts off a line (the released experts do)
                @prefetch(row + prefetch_bytes, .{ .locality = 3 });
                @prefetch(row + prefetch_bytes + 63, .{ .locality = 3 });
            }
            words[0][i] = std.mem.readInt(u64, row[0..8], .little);
            words[1][i] = std.mem.readInt(u64, row[8..16], .little);
            panel.codes[j][i] = scales[(r0 + i) * groups + g];
        }
        inline for (0..32) |c| panel.weights[j][c] = element(words, c);
    }
}

/// Tokens t0 … t0+B−1 against a decoded panel of kg groups, adding to their totals; x64 is the
/// activations widened to f64, tokens × cols, starting at the panel's first group.
inline fn tile(comptime B: usize, panel: *const Panel, kg: usize, x64: [*]const f64, cols: usize, t0: usize, totals: [*]V8) void {
    @setEvalBranchQuota(10_000);
    var tot: [B]V8 = undefined;
    inline for (0..B) |t| tot[t] = totals[t0 + t];
    for (0..kg) |j| {
        var xs: [B][*]const f64 = undefined;
        inline for (0..B) |t| xs[t] = x64 + (t0 + t) * cols + j * mx.group;
        const w = &panel.weights[j];
        const left = add(B, add(B, chain(B, 0, w, xs), chain(B, 4, w, xs)), add(B, chain(B, 1, w, xs), chain(B, 5, w, xs)));
        const right = add(B, add(B, chain(B, 2, w, xs), chain(B, 6, w, xs)), add(B, chain(B, 3, w, xs), chain(B, 7, w, xs)));
        const gsum = add(B, left, right);
        const codes = panel.codes[j];
        const mult = mx.halfScales(tile_rows, codes);
        const skip = codes == @as(@Vector(tile_rows, u8), @splat(255));
        inline for (0..B) |t| tot[t] = @select(f64, skip, tot[t], mx.addScaledSum(V8, tot[t], gsum[t], mult));
    }
    inline for (0..B) |t| totals[t0 + t] = tot[t];
}

/// Rows r0 … r0+7 against every token: y[t][r] for those rows. The tokens run in the fewest
/// tiles, of sizes as equal as they can be (T = 5 as 3 + 2, not 4 + 1).
pub fn rowBlock(packed_w: [*]const u8, scales: [*]const u8, rows: usize, cols: usize, x64: [*]const f64, y: [*]f32, r0: usize, tokens: usize) void {
    std.debug.assert(tokens <= max_tokens);
    const groups = cols / mx.group;
    var panel: Panel = undefined;
    var totals: [max_tokens]V8 = undefined;
    @memset(totals[0..tokens], @splat(0));
    const tiles = (tokens + max_tile_tokens - 1) / max_tile_tokens;
    var g0: usize = 0;
    while (g0 < groups) : (g0 += panel_groups) {
        const kg = @min(panel_groups, groups - g0);
        decode(packed_w, scales, cols, r0, g0, kg, &panel);
        const xg = x64 + g0 * mx.group;
        var t: usize = 0;
        for (0..tiles) |k| {
            const n = (tokens - t) / (tiles - k) + @intFromBool((tokens - t) % (tiles - k) != 0);
            switch (n) {
                inline 1...max_tile_tokens => |B| tile(B, &panel, kg, xg, cols, t, &totals),
                else => unreachable,
            }
            t += n;
        }
    }
    for (0..tokens) |t| {
        const out: @Vector(tile_rows, f32) = @floatCast(totals[t]);
        y[t * rows + r0 ..][0..tile_rows].* = out;
    }
}


