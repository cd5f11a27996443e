//! Linear maps straight from MXFP4 (routed experts, model.md §5): y[t][r] = Σ_c W[r][c]·x[t][c]
//! with W never dequantised as a whole.
//!
//! Layout (§5.3): packed U8 [rows][cols/2], byte b of a row holds element 2b in the LOW nibble
//! and 2b+1 in the HIGH nibble; scales U8 [rows][cols/32], byte g scales elements 32g … 32g+31
//! by 2^(s−127). E2M1 code: bit 3 sign, bits 2-1 exponent, bit 0 mantissa (§5.1).
//!
//! Canonical order (§8.3), identical on every path:
//!   * per group of 32: every product E2M1·x is exact in f64; 8 f64 lanes, lane l receiving
//!     elements l, l+8, l+16, l+24 of the group in that order (starting at +0);
//!     b = (l0+l4, l1+l5, l2+l6, l3+l7), group sum = (b0+b1) + (b2+b3);
//!   * the group sum is multiplied by 2^(s−127) (exact in f64) and added to the row total,
//!     groups in increasing order, in f64; one rounding to f32 at the end;
//!   * a scale byte of 255 (NaN under OCP MX) makes its group contribute nothing, and is counted
//!     (once per matrix element group per call, not per token) for the caller to report.
//! The SIMD path multiplies doubled codes (integers 0 … ±12) and halves the scale instead
//! (2^(s−128)): every intermediate is then exactly twice the canonical one, so after the
//! power-of-two scale the bits are identical (no f64 overflow or underflow is reachable from
//! f32 activations). Threads split output rows, never the reduction.
//!
//! How tokens share the decode (only the sharing differs; each token's arithmetic is the
//! one-token sequence above, so y[t][r] has the bits of a T = 1 call whatever T):
//!   * on AVX-512, one or two tokens: each token on its own through the one-token kernel
//!     (`dotRowsWide`), a pair of rows at a time, the pair's bytes still in L1 for the second;
//!   * on AVX-512, from 3 tokens up to 64 unless a multiple of 8 (`rowLanes`): blocks of eight
//!     rows decoded a few groups at a time with the rows as the lanes, every token a broadcast
//!     (mxfp4_row_lanes.zig), so no lane is padding;
//!   * otherwise fewer than `panel_min_tokens` tokens: each 4-group block of a row is decoded
//!     in registers once for up to `block_tokens` tokens;
//!   * more: a block of `panel_rows` rows is decoded `panel_groups` groups at a time into an
//!     f64 panel (in cache), once for up to `panel_tokens` tokens. On x86-64 the tokens are
//!     the lanes (`laneTile`: activations transposed once per call; on AVX-512 4 rows × 8
//!     tokens, or 4 tokens for a short last block, on AVX2 the same as two 4-wide vectors; each canonical
//!     lane chain a vector of tokens, run a pair at a time, so the lane tree, the scale and the
//!     total are vertical). Elsewhere (arm64) register tiles of
//!     `pair_tile` rows × tokens run over it, one (row, token) per f64 lane of the group sums:
//!     the per-group lane tree of every pair of the tile is one transpose-and-add tree, and the
//!     totals of the pairs are added lane by lane (rows and tokens past whole tiles run one
//!     row × up to four tokens, each pair's tree on its own). Decoding (nibble split, table lookup, two conversions
//!     per quad) costs more than the multiply-adds it feeds, so it is amortised over the most
//!     tokens.
const std = @import("std");
const builtin = @import("builtin");
const common = @import("common.zig");
const matvec = @import("matvec_bf16.zig");
const pool = @import("pool");
const row_lanes = @import("mxfp4_row_lanes.zig");

pub const Error = common.Error;

/// Elements per scale (the MXFP4 group size; §5.2).
pub const group = 32;

/// E2M1 code → value (code 8 is −0).
pub const e2m1 = [16]f64{ 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0 };

/// E2M1 code → twice its value, as i8 (what the SIMD path multiplies). −0 becomes 0: the
/// product with a finite x is then +0 instead of ±0, which cannot change a sum that starts at +0.
const e2m1_doubled = [16]i8{ 0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12 };

/// 2^(s−127) exactly (s = 0 … 254).
pub fn scaleMultiplier(s: u8) f64 {
    std.debug.assert(s != 255);
    return @bitCast(@as(u64, @as(u64, s) + (1023 - 127)) << 52);
}

/// 2^(s−128) exactly (s = 0 … 254): the scale for doubled codes.
inline fn halfScale(s: u8) f64 {
    return @bitCast(@as(u64, @as(u64, s) + (1023 - 128)) << 52);
}

/// Decodes one row exactly: out[c] = E2M1(code) × 2^(s−127), rounded to f32 (exact for every
/// scale byte up to 252; larger ones overflow to ±inf as the true values do). A group with
/// scale byte 255 decodes to zeros carrying the code's sign. Returns the number of such groups.
pub fn decodeRow(packed_row: []const u8, scales_row: []const u8, out: []f32) usize {
    std.debug.assert(out.len == packed_row.len * 2 and out.len == scales_row.len * group);
    var bad: usize = 0;
    for (scales_row, 0..) |s, g| {
        if (s == 255) bad += 1;
        const m: f64 = if (s == 255) 0.0 else scaleMultiplier(s);
        for (0..group) |k| {
            const c = g * group + k;
            const byte = packed_row[c / 2];
            const code = if (c % 2 == 0) byte & 0x0F else byte >> 4;
            out[c] = @floatCast(e2m1[code] * m);
        }
    }
    return bad;
}

/// The scalar reference for one row and one token: plain loops, true E2M1 values, separate
/// multiply and add, the canonical order.
/// `decodeRow` for the ABI (table.zig `mxfp4_decode_row`): `cols` a positive multiple of the
/// group; returns the 255-scale count.
pub fn decodeRowChecked(packed_row: [*]const u8, scales_row: [*]const u8, cols: usize, out: [*]f32) Error!u64 {
    if (cols == 0 or cols % group != 0) return error.BadArgument;
    return decodeRow(packed_row[0 .. cols / 2], scales_row[0 .. cols / group], out[0..cols]);
}

pub fn dotScalar(packed_row: []const u8, scales_row: []const u8, x: []const f32, bad: *usize) f32 {
    var total: f64 = 0;
    for (scales_row, 0..) |s, g| {
        if (s == 255) {
            bad.* += 1;
            continue;
        }
        var l = [_]f64{0} ** 8;
        for (0..group) |k| {
            const c = g * group + k;
            const byte = packed_row[c / 2];
            const code = if (c % 2 == 0) byte & 0x0F else byte >> 4;
            l[k % 8] = l[k % 8] + e2m1[code] * @as(f64, x[c]);
        }
        const b = [4]f64{ l[0] + l[4], l[1] + l[5], l[2] + l[6], l[3] + l[7] };
        const gsum = (b[0] + b[1]) + (b[2] + b[3]);
        total = total + gsum * scaleMultiplier(s);
    }
    return @floatCast(total);
}

extern fn @"llvm.x86.avx2.pshuf.b"(table: @Vector(32, u8), index: @Vector(32, u8)) @Vector(32, u8);
extern fn @"llvm.aarch64.neon.tbl1.v16i8"(table: @Vector(16, u8), index: @Vector(16, u8)) @Vector(16, u8);

/// The table lookup of `pairWeights`: one vpshufb on x86-64 with AVX2; elsewhere (the arm64 and
/// macOS release builds) the same lookup element by element. Indices are nibbles (< 16), so
/// both read the same table entry and the bits cannot differ.
inline fn lookupNibbles(index: @Vector(32, u8)) @Vector(32, u8) {
    const target = @import("builtin").cpu;
    if (comptime target.arch == .x86_64 and std.Target.x86.featureSetHas(target.features, .avx2)) {
        return @"llvm.x86.avx2.pshuf.b"(lut, index);
    }
    const table: [32]u8 = lut;
    const idx: [32]u8 = index;
    var out: [32]u8 = undefined;
    inline for (0..32) |i| out[i] = table[idx[i]];
    return out;
}

const lut: @Vector(32, u8) = blk: {
    var t: [32]u8 = undefined;
    for (0..32) |i| t[i] = @bitCast(e2m1_doubled[i % 16]);
    break :blk t;
};

/// Doubled E2M1 values of 32 codes (each < 16): one table permute per 16 codes, the vector
/// byte lookup of the target (vpshufb on x86-64, tbl on aarch64).
inline fn lookupDoubled(codes: @Vector(32, u8)) @Vector(32, i8) {
    return @bitCast(switch (builtin.cpu.arch) {
        .x86_64 => @"llvm.x86.avx2.pshuf.b"(lut, codes),
        .aarch64 => blk: {
            const t: @Vector(16, u8) = @shuffle(u8, lut, undefined, octets(0, 16));
            const lo = @"llvm.aarch64.neon.tbl1.v16i8"(t, @shuffle(u8, codes, undefined, octets(0, 16)));
            const hi = @"llvm.aarch64.neon.tbl1.v16i8"(t, @shuffle(u8, codes, undefined, octets(16, 16)));
            break :blk @shuffle(u8, lo, hi, join16());
        },
        else => @compileError("no vector byte lookup for this architecture"),
    });
}

fn octets(comptime first: i32, comptime n: usize) [n]i32 {
    var m: [n]i32 = undefined;
    for (0..n) |j| m[j] = first + @as(i32, @intCast(j));
    return m;
}

fn join16() [32]i32 {
    var m: [32]i32 = undefined;
    for (0..16) |j| {
        m[j] = @intCast(j);
        m[16 + j] = ~@as(i32, @intCast(j));
    }
    return m;
}

const V4 = @Vector(4, f64);
const mask_lo: @Vector(32, u8) = @splat(0x0F);

/// Two consecutive groups (32 packed bytes) as doubled code values in f64, element order:
/// out[g][k] holds elements 4k … 4k+3 of group g (k = 0 … 7). One 256-bit load, one nibble
/// split, one interleave per 128-bit half (low nibble = even element) and one table lookup
/// per 32 elements.
inline fn pairWeights(bytes: *const [32]u8) [2][8]V4 {
    const b: @Vector(32, u8) = bytes.*;
    const lo = b & mask_lo;
    const hi = (b >> @as(@Vector(32, u3), @splat(4))) & mask_lo;
    // Per 128-bit half (vpunpcklbw / vpunpckhbw): n0 = {g0 elements 0-15 | g1 elements 0-15},
    // n1 = {g0 elements 16-31 | g1 elements 16-31}.
    const n0 = @shuffle(u8, lo, hi, interleave(0));
    const n1 = @shuffle(u8, lo, hi, interleave(8));
    const v0 = lookupDoubled(n0);
    const v1 = lookupDoubled(n1);
    var out: [2][8]V4 = undefined;
    inline for (0..2) |g| {
        inline for (0..2) |k| {
            // eight codes -> eight i32 (one vpmovsxbd) -> two f64 quads (two vcvtdq2pd)
            const a: @Vector(8, i32) = @as(@Vector(8, i8), @shuffle(i8, v0, undefined, octet(16 * g + 8 * k)));
            const c: @Vector(8, i32) = @as(@Vector(8, i8), @shuffle(i8, v1, undefined, octet(16 * g + 8 * k)));
            out[g][2 * k] = @floatFromInt(@as(@Vector(4, i32), @shuffle(i32, a, undefined, [4]i32{ 0, 1, 2, 3 })));
            out[g][2 * k + 1] = @floatFromInt(@as(@Vector(4, i32), @shuffle(i32, a, undefined, [4]i32{ 4, 5, 6, 7 })));
            out[g][4 + 2 * k] = @floatFromInt(@as(@Vector(4, i32), @shuffle(i32, c, undefined, [4]i32{ 0, 1, 2, 3 })));
            out[g][4 + 2 * k + 1] = @floatFromInt(@as(@Vector(4, i32), @shuffle(i32, c, undefined, [4]i32{ 4, 5, 6, 7 })));
        }
    }
    return out;
}

fn octet(comptime first: i32) [8]i32 {
    @setEvalBranchQuota(10_000);
    var m: [8]i32 = undefined;
    for (0..8) |j| m[j] = first + @as(i32, @intCast(j));
    return m;
}

/// Byte interleave of lo and hi within each 128-bit half, starting at byte `base` of the half
/// (0: the unpcklbw pattern, 8: unpckhbw).
fn interleave(comptime base: usize) [32]i32 {
    @setEvalBranchQuota(10_000);
    var m: [32]i32 = undefined;
    for (0..2) |half| {
        for (0..8) |j| {
            const src: i32 = @intCast(16 * half + base + j);
            m[16 * half + 2 * j] = src;
            m[16 * half + 2 * j + 1] = ~src;
        }
    }
    return m;
}

/// The canonical group sum (b0+b1)+(b2+b3) of doubled products, lanes reduced to b = l_lo + l_hi.
inline fn groupLanes(w: [8]V4, xg: [*]const f64) V4 {
    var a: V4 = @splat(0);
    var b: V4 = @splat(0);
    inline for (0..4) |k| {
        a = @mulAdd(V4, w[2 * k], xg[8 * k ..][0..4].*, a);
        b = @mulAdd(V4, w[2 * k + 1], xg[8 * k + 4 ..][0..4].*, b);
    }
    return a + b;
}

/// (v₀+v₁)+(v₂+v₃) of four lane-reduced vectors (v = l_lo + l_hi, see `groupLanes`) as one
/// vector: h01 = (v0₀+v0₁, v1₀+v1₁, v0₂+v0₃, v1₂+v1₃), h23 likewise, then the halves added.
inline fn groupSums4(v: [4]V4) V4 {
    const h01 = @shuffle(f64, v[0], v[1], [4]i32{ 0, ~@as(i32, 0), 2, ~@as(i32, 2) }) + @shuffle(f64, v[0], v[1], [4]i32{ 1, ~@as(i32, 1), 3, ~@as(i32, 3) });
    const h23 = @shuffle(f64, v[2], v[3], [4]i32{ 0, ~@as(i32, 0), 2, ~@as(i32, 2) }) + @shuffle(f64, v[2], v[3], [4]i32{ 1, ~@as(i32, 1), 3, ~@as(i32, 3) });
    return @shuffle(f64, h01, h23, [4]i32{ 0, 1, ~@as(i32, 0), ~@as(i32, 1) }) + @shuffle(f64, h01, h23, [4]i32{ 2, 3, ~@as(i32, 2), ~@as(i32, 3) });
}

/// 2^(s−128) for N scale bytes (`halfScale` lane by lane; a 255 byte gives a value the
/// caller must not use).
pub inline fn halfScales(comptime N: usize, codes: @Vector(N, u8)) @Vector(N, f64) {
    const wide: @Vector(N, u64) = codes;
    return @bitCast((wide + @as(@Vector(N, u64), @splat(1023 - 128))) << @as(@Vector(N, u6), @splat(52)));
}

/// total + gsum · m, m a group's `halfScale`, as one fused multiply-add. The product is exact:
/// gsum is 0 or between 2^−149 (a subnormal f32 activation times a doubled code of 1) and
/// about 2^137 (32 × 12 × the largest f32) in magnitude, and m a power of two from 2^−128 to
/// 2^126, so it stays normal in f64. The fused operation then rounds once, where the separate
/// multiply and add would have rounded the exact product again: the same bits, one operation
/// instead of two on the multiply-add ports. Measured on the AVX-512 Xeon (2026-12-06, 1
/// thread, 3072 x 3584, alternated pairs, GFLOP/s): lane tiles at T = 32 54.3-55.7 -> 56.4-56.8
/// and T = 64 53.4-53.6 -> 53.4-55.1; row lanes at T = 7 42.6-43.1 -> 43.8-43.9 and T = 13
/// 46.4 -> 47.1-47.4.
pub inline fn addScaledSum(comptime V: type, total: V, gsum: V, m: V) V {
    return @mulAdd(V, gsum, m, total);
}

/// One group on its own (leftover groups, and blocks that contain a 255 scale).
inline fn singleGroup(packed_row: [*]const u8, s: u8, g: usize, x64: [*]const f64, total: *f64) void {
    var pair: [32]u8 = undefined;
    pair[0..16].* = packed_row[g * 16 ..][0..16].*;
    @memset(pair[16..], 0);
    const w = pairWeights(&pair)[0];
    const b = groupLanes(w, x64 + g * group);
    const gsum = (b[0] + b[1]) + (b[2] + b[3]);
    total.* = total.* + gsum * halfScale(s);
}

/// One row against TT tokens at once: each 4-group block of the row is decoded once and used
/// for every token; each token's arithmetic is exactly the single-token sequence.
inline fn dotRowSimd(comptime TT: usize, packed_row: [*]const u8, scales_row: [*]const u8, groups: usize, x64: [TT][*]const f64, bad: *usize) [TT]f32 {
    var total = [_]f64{0} ** TT;
    var g: usize = 0;
    while (g + 4 <= groups) : (g += 4) {
        const sc = scales_row[g..][0..4];
        if (sc[0] == 255 or sc[1] == 255 or sc[2] == 255 or sc[3] == 255) {
            for (g..g + 4) |h| {
                if (scales_row[h] == 255) {
                    bad.* += 1;
                } else {
                    inline for (0..TT) |t| singleGroup(packed_row, scales_row[h], h, x64[t], &total[t]);
                }
            }
            continue;
        }
        const w01 = pairWeights(packed_row[g * 16 ..][0..32]);
        const w23 = pairWeights(packed_row[g * 16 + 32 ..][0..32]);
        const mult = halfScales(4, sc.*);
        inline for (0..TT) |t| {
            const xg = x64[t] + g * group;
            const b0 = groupLanes(w01[0], xg);
            const b1 = groupLanes(w01[1], xg + group);
            const b2 = groupLanes(w23[0], xg + 2 * group);
            const b3 = groupLanes(w23[1], xg + 3 * group);
            const scaled = groupSums4(.{ b0, b1, b2, b3 }) * mult;
            total[t] = total[t] + scaled[0];
            total[t] = total[t] + scaled[1];
            total[t] = total[t] + scaled[2];
            total[t] = total[t] + scaled[3];
        }
    }
    while (g < groups) : (g += 1) {
        if (scales_row[g] == 255) {
            bad.* += 1;
        } else {
            inline for (0..TT) |t| singleGroup(packed_row, scales_row[g], g, x64[t], &total[t]);
        }
    }
    var out: [TT]f32 = undefined;
    inline for (0..TT) |t| out[t] = @floatCast(total[t]);
    return out;
}

// ---------------------------------------------------------------------------------------------
// The AVX-512 few-token path (compiled only where `common.wide`): the 8 canonical lanes of a
// group are the 8 f64 lanes of one register, in element order, so the four multiply-adds of a
// group (elements 0-7, 8-15, 16-23, 24-31) run the canonical chains as they are. Decoding is a
// table lookup straight to f64 with as few shuffles as possible (they are what bounds this
// loop): 8 packed bytes read as one word are broadcast to all lanes, each lane shifts its own
// nibble to the bottom, and `vpermi2pd` picks the E2M1 value from a 16-entry table by the low
// four bits. The group sums (b0+b1)+(b2+b3) of eight groups come out of one transpose-and-add
// tree as one vector, are scaled by 2^(s−127) together and added to the row total one by one
// in group order.

const V8 = @Vector(8, f64);

extern fn @"llvm.x86.avx512.vpermi2var.pd.512"(a: V8, idx: @Vector(8, i64), b: V8) V8;

/// E2M1 codes 0-7 and 8-15 as f64: the two halves of the `vpermi2pd` table.
const e2m1_lo: V8 = e2m1[0..8].*;
const e2m1_hi: V8 = e2m1[8..16].*;

/// The E2M1 values of the 8 codes (nibbles) of `word` starting at nibble `first` (0 or 8):
/// the word is broadcast to every lane, each lane shifts its own nibble to the bottom, and
/// `vpermi2pd` reads the value from the table by the lane's low four bits.
inline fn lookupWord(word: u64, comptime first: u6) V8 {
    const shifts: @Vector(8, u64) = if (first == 0) .{ 0, 4, 8, 12, 16, 20, 24, 28 } else .{ 32, 36, 40, 44, 48, 52, 56, 60 };
    const q: @Vector(8, u64) = @splat(word);
    return @"llvm.x86.avx512.vpermi2var.pd.512"(e2m1_lo, @bitCast(q >> shifts), e2m1_hi);
}

/// The canonical lane accumulators of one group (8 lanes, +0 start, elements in order):
/// elements 0-15 are the nibbles of the group's first 8 bytes read as one little-endian word
/// (low nibble first, so nibble j is element j), elements 16-31 of the next 8 bytes. `xg` is
/// the group's 32 activations, four vectors of 8.
inline fn groupWide(packed_group: [*]const u8, xg: *const [4]V8) V8 {
    const w0 = std.mem.readInt(u64, packed_group[0..8], .little);
    const w1 = std.mem.readInt(u64, packed_group[8..16], .little);
    var acc: V8 = @splat(0);
    acc = @mulAdd(V8, lookupWord(w0, 0), xg[0], acc);
    acc = @mulAdd(V8, lookupWord(w0, 8), xg[1], acc);
    acc = @mulAdd(V8, lookupWord(w1, 0), xg[2], acc);
    acc = @mulAdd(V8, lookupWord(w1, 8), xg[3], acc);
    return acc;
}

inline fn loadGroupX(x64: [*]const f64) [4]V8 {
    return .{ x64[0..8].*, x64[8..16].*, x64[16..24].*, x64[24..32].* };
}

/// (b0+b1)+(b2+b3) of eight groups' lane accumulators, b = (l0+l4, l1+l5, l2+l6, l3+l7), as one
/// vector in group order. Each level adds a lane blend of two vectors to one shuffle of them
/// (x+y and y+x are the same bits, so either operand may come from either vector): seven
/// shuffles for the tree instead of fourteen, the shuffles being what bounds this loop.
inline fn groupSums8(comptime blends: bool, a: [8]V8) V8 {
    // slots in the order the tree's last level leaves them: lanes s0 s1 s4 s5 s2 s3 s6 s7
    const s = [8]V8{ a[0], a[1], a[4], a[5], a[2], a[3], a[6], a[7] };
    const halves = laneMask(blends, 0x0F);
    const evens = laneMask(blends, 0x55);
    const chunks = laneMask(blends, 0x33);
    // [b(p) | b(q)] from the 256-bit halves: p's low half + p's high half, q's high + q's low
    var v: [4]V8 = undefined;
    const pairs = [4][2]usize{ .{ 0, 2 }, .{ 1, 3 }, .{ 4, 6 }, .{ 5, 7 } };
    inline for (0..4) |j| {
        const p = s[pairs[j][0]];
        const q = s[pairs[j][1]];
        v[j] = @select(f64, halves, p, q) + @shuffle(f64, p, q, [8]i32{ 4, 5, 6, 7, ~@as(i32, 0), ~@as(i32, 1), ~@as(i32, 2), ~@as(i32, 3) });
    }
    // (b0+b1, b2+b3) of four slots per vector; per 128-bit chunk: [X01 Y01 | X23 Y23 | ...]
    var w: [2]V8 = undefined;
    inline for (0..2) |j| {
        const p = v[2 * j];
        const q = v[2 * j + 1];
        w[j] = @select(f64, evens, p, q) + @shuffle(f64, p, q, [8]i32{ 1, ~@as(i32, 0), 3, ~@as(i32, 2), 5, ~@as(i32, 4), 7, ~@as(i32, 6) });
    }
    // chunks of w[0]: C0 = (s0, s1).01, C1 = .23, C2 = (s2, s3).01, C3 = .23; w[1] likewise
    return @select(f64, chunks, w[0], w[1]) + @shuffle(f64, w[0], w[1], [8]i32{ 2, 3, ~@as(i32, 0), ~@as(i32, 1), 6, 7, ~@as(i32, 4), ~@as(i32, 5) });
}

/// A lane mask; with `blends` one the compiler cannot see through, so a select stays a blend
/// (vblendmpd, which runs beside the shuffles) instead of being folded into a shuffle of its
/// own. One token is bound by the shuffles and gains from it (2 threads, Zen 4, 3072 x 3584 in
/// cache: 19.7 -> 20.2 G weights/s); two to four tokens measured 10-25% slower with it.
inline fn laneMask(comptime blends: bool, comptime bits: u8) @Vector(8, bool) {
    if (!blends) return @bitCast(bits);
    var m: u8 = bits;
    asm ("" : [m] "+r" (m));
    return @bitCast(m);
}

/// 2^(s−127) for eight scale bytes (none of them 255).
inline fn scales8(s: *const [8]u8) V8 {
    const wide: @Vector(8, u64) = @as(@Vector(8, u8), s.*);
    return @bitCast((wide + @as(@Vector(8, u64), @splat(1023 - 127))) << @as(@Vector(8, u6), @splat(52)));
}

/// One group on its own on the wide path.
inline fn singleGroupWide(packed_row: [*]const u8, s: u8, g: usize, x64: [*]const f64, total: *f64) void {
    const xg = loadGroupX(x64 + g * group);
    const a = groupWide(packed_row + g * 16, &xg);
    const b = @shuffle(f64, a, undefined, [4]i32{ 0, 1, 2, 3 }) + @shuffle(f64, a, undefined, [4]i32{ 4, 5, 6, 7 });
    const gsum = (b[0] + b[1]) + (b[2] + b[3]);
    total.* = total.* + gsum * scaleMultiplier(s);
}

/// R rows against TT tokens on the wide path (R > 1 only with TT = 1: rows then share every
/// activation load, which with one row is what bounds the loop). Each row's and token's
/// arithmetic is the one-row, one-token sequence. `blends`: with one token, keep the lane
/// trees' selects as blends (`laneMask`), for CPUs whose blends issue beside the shuffles.
inline fn dotRowsWide(comptime blends: bool, comptime R: usize, comptime TT: usize, packed_rows: [R][*]const u8, scales_rows: [R][*]const u8, groups: usize, x64: [TT][*]const f64, bad: *usize) [R][TT]f32 {
    var total: [R][TT]f64 = @splat([_]f64{0} ** TT);
    // One token: the scaled group sums of the last eight groups are added to the totals (in
    // group order) a quarter of the way through the next eight, where their inputs are ready,
    // instead of waiting at the end of a block for its lane trees (2 threads, Zen 4, 3072 x 3584
    // in cache: 20.4 -> 22.2 G weights/s; at k = 0, 1, 4, 6: 21.5, 21.5, 21.9, 19.8). With more
    // tokens the per-token blocks already overlap and deferring measured 5% slower. Through
    // memory: one vector store (volatile, so it is not split into lane extractions), then scalar
    // adds with memory operands.
    const deferred = TT == 1;
    var pending: [R][TT][8]f64 align(64) = undefined;
    var is_pending = false;
    var g: usize = 0;
    while (g + 8 <= groups) : (g += 8) {
        var any_bad = false;
        inline for (0..R) |r| {
            const sv: @Vector(8, u8) = scales_rows[r][g..][0..8].*;
            any_bad = any_bad or @reduce(.Or, sv == @as(@Vector(8, u8), @splat(255)));
        }
        if (any_bad) {
            if (is_pending) addPending(R, TT, &pending, &total);
            is_pending = false;
            inline for (0..R) |r| {
                for (g..g + 8) |h| {
                    if (scales_rows[r][h] == 255) {
                        bad.* += 1;
                    } else {
                        inline for (0..TT) |t| singleGroupWide(packed_rows[r], scales_rows[r][h], h, x64[t], &total[r][t]);
                    }
                }
            }
            continue;
        }
        // Eight groups are 128 packed bytes: two lines per row, fetched `prefetch_bytes` ahead
        // into L2 (the rows are read once per call when the expert streams from RAM).
        inline for (0..R) |r| {
            @prefetch(packed_rows[r] + g * 16 + prefetch_bytes, .{ .locality = matvec.prefetch_locality });
            @prefetch(packed_rows[r] + g * 16 + prefetch_bytes + 64, .{ .locality = matvec.prefetch_locality });
        }
        inline for (0..TT) |t| {
            var acc: [R][8]V8 = undefined;
            inline for (0..8) |k| {
                if (deferred and k == 2 and is_pending) addPending(R, TT, &pending, &total);
                const xg = loadGroupX(x64[t] + (g + k) * group);
                inline for (0..R) |r| acc[r][k] = groupWide(packed_rows[r] + (g + k) * 16, &xg);
            }
            inline for (0..R) |r| {
                const sums = groupSums8(deferred and blends, acc[r]) * scales8(scales_rows[r][g..][0..8]);
                if (deferred) {
                    @as(*volatile V8, @ptrCast(&pending[r][t])).* = sums;
                } else {
                    // stored as the compiler likes (lane by lane), read back at once
                    var scaled: [8]f64 align(64) = sums;
                    addScaled(&scaled, &total[r][t]);
                }
            }
        }
        is_pending = deferred;
    }
    if (is_pending) addPending(R, TT, &pending, &total);
    while (g < groups) : (g += 1) {
        inline for (0..R) |r| {
            if (scales_rows[r][g] == 255) {
                bad.* += 1;
            } else {
                inline for (0..TT) |t| singleGroupWide(packed_rows[r], scales_rows[r][g], g, x64[t], &total[r][t]);
            }
        }
    }
    var out: [R][TT]f32 = undefined;
    inline for (0..R) |r| {
        inline for (0..TT) |t| out[r][t] = @floatCast(total[r][t]);
    }
    return out;
}

inline fn addPending(comptime R: usize, comptime TT: usize, pending: *align(64) [R][TT][8]f64, total: *[R][TT]f64) void {
    inline for (0..R) |r| {
        inline for (0..TT) |t| addScaled(&pending[r][t], &total[r][t]);
    }
}

/// total + s[0] + s[1] + … + s[7], in that order, each read from memory.
inline fn addScaled(s: *align(64) [8]f64, total: *f64) void {
    inline for (0..8) |k| total.* = total.* + @as(*volatile f64, &s[k]).*;
}

/// Rows computed together on the wide one-token path.
const wide_rows = 2;

/// Software prefetch distance along a packed row on the wide path, in bytes: about four rows
/// of a released expert ahead. Measured with the expert streamed from RAM (2 threads, Zen 4,
/// 3072 x 3584, G weights/s): 1024 B 15.1, 2048 B 17.2, 4096 B 19.2, 8192 B 19.8, 16384 B 18.4
/// (in cache: 20.4 at every distance).
const prefetch_bytes = 8192;

/// Tokens decoded together per row on the register-decode path (few tokens).
const block_tokens = 4;

/// From this many tokens on, the panel path is faster. Measured on 3072 × 3584, 1 thread, Zen 4
/// (GFLOP/s, register decode vs panel): T = 4: 19.4 vs 19.2, T = 5: 17.4 vs 19.1, T = 8: 19.4
/// vs 24.1, T = 32: 17.6 vs 29.
const panel_min_tokens = 5;
/// Groups per panel column block. On AVX-512 one (32 elements): the panel of a 32-row block is
/// then 8 KB and the block's slice of the transposed activations 2 KB per 8 tokens, 16 KB in
/// all at T = 32, where 4 groups made it 64 KB, over the 48 KB L1 of the AVX-512 Xeons. Measured
/// on one (2026-12-06, 3072 x 3584, 1 thread, paired runs, share of the FMA peak at T = 8 / 16
/// / 32 / 64): 4 groups 40 / 46-47 / 50 / 50-51%, 2 groups 45-46 / - / 52-54 / -, 1 group
/// 49 / 56 / 61 / 59-60%; 2 threads at T = 16 42 -> 53%. On AVX2 four (128 elements), which
/// decode as pairs (`decodePanel`): 1 group measured the same there (T = 32 63-65%), and on
/// Zen 4 (2026-12-01) 4 and 16 groups measured alike at T = 32, 4 faster at T ≤ 16.
const panel_groups = if (common.wide) 1 else 4;
/// How far ahead along a row the panel decode prefetches (into L1): 128 bytes, two panel steps
/// of 4 groups (64 bytes of each row; on AVX-512 a step is one group, 16 bytes, and the
/// prefetch is issued every step, which measured the same as once a line on the Xeon,
/// 2026-12-06). A block's 32 rows are read a step at a time at the row stride, 32 streams the
/// hardware prefetchers do not keep up with when the rows start off a 64-byte line, as the
/// released experts do (safetensors puts a tensor wherever the previous one ended; the K3-width
/// checkpoint's experts start at 8 or 40 mod 64). Measured on Zen 4 with 4-group steps
/// (2026-12-05, 2 threads, the K3-width prefill's 768 expert calls of 7-27 tokens, 3072 x 3584
/// and 3584 x 3072, GFLOP/s at offsets 0 / 8 / 16 mod 64): no prefetch 74 / 52 / 52; 64 B 73 /
/// 71 / 75; 128 B 76 / 72 / 72; 256 B 75 / 71 / 67; 1024 B 68 / 56 / 58. Two prefetches, so the
/// line a misaligned step spills into is fetched too.
const panel_prefetch_bytes = 128;
/// Rows decoded per panel block: the activation slice of a token tile is reused by all of them.
const panel_rows = 32;
/// Tokens one decoded panel serves before the next token block decodes it again.
const panel_tokens = 64;

/// Register tile of the panel path where there are no lane tiles (arm64): rows × tokens = one
/// (row, token) pair per lane of a 4-wide f64 vector.
const pair_tile: struct { rows: usize, tokens: usize } = .{ .rows = 1, .tokens = 4 };
const PairVec = V4;
/// Rows of the panel tile with tokens as lanes (at most four vectors live per row, see
/// `laneTile`). Measured on Zen 4, 3072 × 3584: AVX-512 (2026-12-03, 1 thread, GFLOP/s at
/// T = 8 / 16 / 32) 2 rows 26.9 / 29.8 / 32.0, 3 rows 30.7 / 34.5 / 36.5, 4 rows 29.6 / 36.7 /
/// 41.5, 5 rows 27.0 / 31.8 / 35.9, 6 rows 26.7 / 31.1 / 33.8; eight chains live per row at 3
/// rows (before) 23.2 / 28.0 / 34.7; two token blocks per tile (3 rows) 21-23. AVX2, eight
/// tokens as two 4-wide vectors so that each broadcast weight feeds two multiply-adds
/// (2026-12-06, 2 threads, share of the FMA peak at T = 8 / 16 / 32): 1 row 43 / 48 / 48%,
/// 2 rows 50 / 58 / 59%, 3 rows 52 / 61 / 63%, 4 rows 54 / 62 / 65%, 5 rows 52 / 60 / 63%;
/// with four tokens a vector (before) 4 rows 43 / 50 / 52%. The registers hold fewer rows'
/// live vectors than that and the compiler spills, but each activation load serves more rows.
/// On the AVX-512 Xeon (2026-12-06, 1 thread, GFLOP/s at T = 32) each broadcast weight feeding
/// two blocks of 8 tokens, for half the broadcast loads, was slower: 3 rows 53.5-53.9 and 2 rows
/// 53.4, against 55.9-57.0 (bench/probes/lane-tile.zig alone: 3 rows 76-77% of the FMA peak,
/// 4 rows of one block 74%).
const lane_tile_rows = 4;
/// Token counts that run as row-lane tiles (mxfp4_row_lanes.zig; AVX-512 only), rows past
/// whole tiles as single rows: from three tokens up, except whole blocks of lane tiles, which pad
/// no lane and were as fast or faster. Measured on Zen 4 (2026-12-06, 1 thread, 3072 x 3584,
/// share of the FMA peak, lane tiles or register decode -> row lanes): T = 2 28-32 -> 34-35%
/// (and 37.5% as two one-token passes, which it now runs), 4 37 -> 52%, 5 43 -> 57%, 8 68-69 ->
/// 66-67%, 9 50 -> 68-69%, 12 66 -> 73%, 13 63 -> 74-75%, 16 77-78 -> 77-78%, 20 72 -> 80%,
/// 24 81 -> 81-82%, 32 83-84 -> 82-83%, 33 73 -> 82%, 40 83 -> 82%, 64 86 -> 83%.
inline fn rowLanes(tokens: usize) bool {
    return common.wide and tokens >= 3 and tokens <= row_lanes.max_tokens and tokens % 8 != 0;
}

/// Tokens as lanes on x86-64 (`laneTile`'s `inOrder` is x86 inline assembly).
const lane_tiles = common.wide or builtin.cpu.arch == .x86_64;

/// The row's bytes `panel_prefetch_bytes` past group g0 into L1 (both lines of a step that
/// starts off a line, see `panel_prefetch_bytes`).
inline fn prefetchPanelAhead(packed_row: [*]const u8, g0: usize) void {
    @prefetch(packed_row + g0 * 16 + panel_prefetch_bytes, .{ .locality = 3 });
    @prefetch(packed_row + g0 * 16 + panel_prefetch_bytes + 63, .{ .locality = 3 });
}

/// Doubled codes of groups [g0, g0 + kg) of one row as f64, eight quads per group in element
/// order (as `pairWeights`). Groups with a 255 scale are decoded too; the tiles skip them.
fn decodePanel(packed_row: [*]const u8, g0: usize, kg: usize, out: *[panel_groups][8]V4) void {
    prefetchPanelAhead(packed_row, g0);
    var j: usize = 0;
    while (j + 2 <= kg) : (j += 2) {
        const w = pairWeights(packed_row[(g0 + j) * 16 ..][0..32]);
        out[j] = w[0];
        out[j + 1] = w[1];
    }
    if (j < kg) {
        var pair: [32]u8 = undefined;
        pair[0..16].* = packed_row[(g0 + j) * 16 ..][0..16].*;
        @memset(pair[16..], 0);
        out[j] = pairWeights(&pair)[0];
    }
}

/// The doubled E2M1 values as f64, code 8 being +0 as the integer lookup of `pairWeights` gives
/// it: the two halves of the `vpermi2pd` table of `decodePanelWide`.
pub const doubled_lo: V8 = doubledHalf(0);
pub const doubled_hi: V8 = doubledHalf(8);

fn doubledHalf(comptime first: usize) V8 {
    var t: [8]f64 = undefined;
    for (0..8) |i| t[i] = @floatFromInt(e2m1_doubled[first + i]);
    return t;
}

/// Where element c (< 32) of a group sits in a panel group decoded by `decodePanelWide`: each
/// half (16 elements, 8 bytes) holds its even elements (low nibbles), then its odd ones (high
/// nibbles). The lane tile reads the panel by comptime element index, so the order costs nothing.
fn panelSlot(comptime c: usize) usize {
    if (!common.wide) return c;
    const r = c % 16;
    return 16 * (c / 16) + 8 * (r % 2) + r / 2;
}

/// `decodePanel` on AVX-512, in `panelSlot` order: eight bytes zero-extended to eight lanes
/// index `vpermi2pd` directly (it reads the low four bits, the low nibble) and again shifted
/// right by four (the high nibble): four permutes and no integer-to-float conversion per group,
/// where the pair decode spends eight conversions and eight 256-bit stores.
fn decodePanelWide(packed_row: [*]const u8, g0: usize, kg: usize, out: *align(64) [panel_groups][8]V4) void {
    prefetchPanelAhead(packed_row, g0);
    for (0..kg) |j| {
        const dst: *align(64) [4]V8 = @ptrCast(&out[j]);
        inline for (0..2) |h| {
            const bytes: @Vector(8, u8) = packed_row[(g0 + j) * 16 + 8 * h ..][0..8].*;
            const index: @Vector(8, u64) = bytes;
            dst[2 * h] = @"llvm.x86.avx512.vpermi2var.pd.512"(doubled_lo, @bitCast(index), doubled_hi);
            dst[2 * h + 1] = @"llvm.x86.avx512.vpermi2var.pd.512"(doubled_lo, @bitCast(index >> @as(@Vector(8, u6), @splat(4))), doubled_hi);
        }
    }
}

/// One decoded row panel (kg groups; `scales` and `x64` start at its first group) against R
/// tokens; each group's sum is the canonical one and goes into total[t] in group order.
inline fn panelTokens(comptime R: usize, panel: *const [panel_groups][8]V4, scales: [*]const u8, kg: usize, x64: [R][*]const f64, total: *[R]f64) void {
    var tot = total.*;
    for (0..kg) |j| {
        const s = scales[j];
        if (s == 255) continue;
        var a: [R]V4 = @splat(@splat(0));
        var b: [R]V4 = @splat(@splat(0));
        inline for (0..4) |q| {
            const w_lo = panel[j][2 * q];
            const w_hi = panel[j][2 * q + 1];
            inline for (0..R) |t| {
                const xg = x64[t] + j * group + 8 * q;
                a[t] = @mulAdd(V4, w_lo, xg[0..4].*, a[t]);
                b[t] = @mulAdd(V4, w_hi, xg[4..8].*, b[t]);
            }
        }
        const m = halfScale(s);
        inline for (0..R) |t| {
            const v = a[t] + b[t];
            const gsum = (v[0] + v[1]) + (v[2] + v[3]);
            tot[t] = tot[t] + gsum * m;
        }
    }
    total.* = tot;
}

/// Canonical lane chain l of one group for B rows and the first L tokens of a block of 8:
/// elements l, l+8, l+16, l+24 in order from +0, each a broadcast decoded weight (`ws[b]`, the
/// row's 32 f64) times the tokens' activations of that element (`xj`, 8 f64 per element).
inline fn laneChain(comptime B: usize, comptime L: usize, comptime l: usize, ws: [B][*]const f64, xj: [*]const f64) [B]@Vector(L, f64) {
    const V = @Vector(L, f64);
    var acc: [B]V = @splat(@splat(0));
    // the first chain of each pair starts after the pair before it is done (see `inOrder`)
    if (l < 4) {
        inline for (0..B) |b| acc[b] = inOrder(V, acc[b]);
    }
    inline for (0..4) |m| {
        const c = l + 8 * m;
        const xv: V = xj[c * 8 ..][0..L].*;
        inline for (0..B) |b| acc[b] = @mulAdd(V, @as(V, @splat(ws[b][comptime panelSlot(c)])), xv, acc[b]);
    }
    return acc;
}

inline fn addRows(comptime B: usize, comptime L: usize, p: [B]@Vector(L, f64), q: [B]@Vector(L, f64)) [B]@Vector(L, f64) {
    var r: [B]@Vector(L, f64) = undefined;
    inline for (0..B) |b| r[b] = inOrder(@Vector(L, f64), p[b] + q[b]);
    return r;
}

/// `v` through an empty volatile asm statement. The compiler keeps volatile asm statements in
/// program order, so a lane chain whose zero start passed through one cannot be scheduled ahead
/// of the pair sums that passed through earlier ones: the lane tile runs its chains a pair at a
/// time as written, within the 32 registers. Left to itself, LLVM interleaved the chains of a
/// group and spilled (55 stack accesses per 128 multiply-adds at 4 rows); pinned, 3072 x 3584
/// at T = 32 went from 71% to 80% of the FMA peak on 1 thread (68% -> 75-78% on 2), T = 64 from
/// 75% to 84%, T = 8 from 56% to 62%. The value and so the bits are unchanged. An 8-wide
/// vector on AVX2 (two registers) passes through as its two halves.
pub inline fn inOrder(comptime V: type, v: V) V {
    if (!common.wide and @typeInfo(V).vector.len == 8) {
        const lo: V4 = inOrder(V4, @shuffle(f64, v, undefined, [4]i32{ 0, 1, 2, 3 }));
        const hi: V4 = inOrder(V4, @shuffle(f64, v, undefined, [4]i32{ 4, 5, 6, 7 }));
        return @shuffle(f64, lo, hi, [8]i32{ 0, 1, 2, 3, ~@as(i32, 0), ~@as(i32, 1), ~@as(i32, 2), ~@as(i32, 3) });
    }
    return asm volatile ("" : [out] "=v" (-> V) : [in] "0" (v));
}

fn countBad(scales_row: []const u8) usize {
    var n: usize = 0;
    for (scales_row) |s| n += @intFromBool(s == 255);
    return n;
}

fn rowTokens(comptime TT: usize, self: *const Job, r: usize, t0: usize, prow: [*]const u8, srow: [*]const u8, groups: usize) usize {
    var xs: [TT][*]const f64 = undefined;
    inline for (0..TT) |t| xs[t] = self.x64 + (t0 + t) * self.cols;
    var bad: usize = 0;
    const out = if (common.wide) dotRowsWide(true, 1, TT, .{prow}, .{srow}, groups, xs, &bad)[0] else dotRowSimd(TT, prow, srow, groups, xs, &bad);
    inline for (0..TT) |t| self.y[(t0 + t) * self.rows + r] = out[t];
    return bad;
}

const Job = struct {
    packed_w: [*]const u8,
    scales: [*]const u8,
    rows: usize,
    cols: usize,
    x: [*]const f32,
    x64: [*]const f64,
    /// The lane-tile panel path only: the activations transposed, [token block of 8][col][8] f64.
    xt: [*]const f64,
    y: [*]f32,
    tokens: usize,
    scalar: bool,
    bad: *std.atomic.Value(u64),

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const n = self.cols;
        const half = n / 2;
        const groups = n / group;
        var bad: usize = 0;
        var first = begin;
        if (!self.scalar and rowLanes(self.tokens)) {
            while (first + row_lanes.tile_rows <= end) : (first += row_lanes.tile_rows) {
                row_lanes.rowBlock(self.packed_w, self.scales, self.rows, self.cols, self.x64, self.y, first, self.tokens);
                for (first..first + row_lanes.tile_rows) |r| bad += countBad(self.scales[r * groups ..][0..groups]);
            }
        } else if (!self.scalar and self.tokens >= panel_min_tokens) {
            for (begin..end) |r| bad += countBad(self.scales[r * groups ..][0..groups]);
            var o = begin;
            while (o < end) {
                const nb = @min(panel_rows, end - o);
                var t: usize = 0;
                while (t < self.tokens) {
                    const tn = @min(panel_tokens, self.tokens - t);
                    self.panelBlock(o, nb, t, tn);
                    t += tn;
                }
                o += nb;
            }
            if (bad != 0) _ = self.bad.fetchAdd(bad, .monotonic);
            return;
        }
        if (common.wide and !self.scalar and self.tokens <= 2) {
            // blends where they issue beside the shuffles (common.VectorPorts); on the
            // multiply-add ports a select folded into its shuffle is one operation fewer
            // (the AVX-512 Xeon, 2026-12-06, 2 threads, 3072 x 3584 streamed, three alternated
            // pairs: 17.9-18.7 -> 19.2-19.8 G weights/s; Zen 4 measured 2.5% slower that way)
            const blends = common.vectorPorts() == .beside_fma;
            while (first + wide_rows <= end) : (first += wide_rows) {
                var prows: [wide_rows][*]const u8 = undefined;
                var srows: [wide_rows][*]const u8 = undefined;
                inline for (0..wide_rows) |k| {
                    prows[k] = self.packed_w + (first + k) * half;
                    srows[k] = self.scales + (first + k) * groups;
                }
                for (0..self.tokens) |t| {
                    var bad_t: usize = 0;
                    const out = if (blends) dotRowsWide(true, wide_rows, 1, prows, srows, groups, .{self.x64 + t * n}, &bad_t) else dotRowsWide(false, wide_rows, 1, prows, srows, groups, .{self.x64 + t * n}, &bad_t);
                    if (t == 0) bad += bad_t;
                    inline for (0..wide_rows) |k| self.y[t * self.rows + first + k] = out[k][0];
                }
            }
        }
        for (first..end) |r| {
            const prow = self.packed_w + r * half;
            const srow = self.scales + r * groups;
            if (self.scalar) {
                for (0..self.tokens) |t| {
                    var bad_row: usize = 0;
                    self.y[t * self.rows + r] = dotScalar(prow[0..half], srow[0..groups], self.x[t * n ..][0..n], &bad_row);
                    if (t == 0) bad += bad_row;
                }
                continue;
            }
            // 255 scales are counted once per row: by the first token block only
            var t: usize = 0;
            while (t + block_tokens <= self.tokens) : (t += block_tokens) {
                const b = rowTokens(block_tokens, self, r, t, prow, srow, groups);
                if (t == 0) bad += b;
            }
            const b = switch (self.tokens - t) {
                0 => 0,
                1 => rowTokens(1, self, r, t, prow, srow, groups),
                2 => rowTokens(2, self, r, t, prow, srow, groups),
                3 => rowTokens(3, self, r, t, prow, srow, groups),
                else => unreachable,
            };
            if (t == 0) bad += b;
        }
        if (bad != 0) _ = self.bad.fetchAdd(bad, .monotonic);
    }

    /// Rows o … o+nb−1 against tokens t0 … t0+tn−1 on the panel path.
    fn panelBlock(self: *const Job, o: usize, nb: usize, t0: usize, tn: usize) void {
        std.debug.assert(nb >= 1 and nb <= panel_rows and tn >= 1 and tn <= panel_tokens and o + nb <= self.rows and t0 + tn <= self.tokens);
        const groups = self.cols / group;
        var panel: [panel_rows][panel_groups][8]V4 align(64) = undefined;
        var totals: [panel_rows][panel_tokens]f64 = undefined;
        for (totals[0..nb]) |*row| @memset(row[0..tn], 0);
        var g0: usize = 0;
        while (g0 < groups) {
            const kg = @min(panel_groups, groups - g0);
            for (0..nb) |b| {
                const row = self.packed_w + (o + b) * (self.cols / 2);
                if (common.wide) decodePanelWide(row, g0, kg, &panel[b]) else decodePanel(row, g0, kg, &panel[b]);
            }
            if (lane_tiles) {
                var b: usize = 0;
                while (b < nb) {
                    switch (@min(lane_tile_rows, nb - b)) {
                        inline 1...lane_tile_rows => |B| {
                            var t: usize = 0;
                            while (t + 4 < tn) : (t += 8) self.laneTile(B, 8, &panel, &totals, o, b, g0, kg, t0 + t, t);
                            // a last block of at most four tokens runs at half width
                            if (t < tn) self.laneTile(B, 4, &panel, &totals, o, b, g0, kg, t0 + t, t);
                            b += B;
                        },
                        else => unreachable,
                    }
                }
                g0 += kg;
                continue;
            }
            const B = pair_tile.rows;
            const R = pair_tile.tokens;
            var b: usize = 0;
            while (b + B <= nb) : (b += B) {
                var t: usize = 0;
                while (t + R <= tn) : (t += R) self.pairTile(&panel, &totals, o, b, g0, kg, t0, t);
                for (b..b + B) |row| self.panelRest(&panel, &totals, o, row, g0, kg, t0, t, tn);
            }
            for (b..nb) |row| self.panelRest(&panel, &totals, o, row, g0, kg, t0, 0, tn);
            g0 += kg;
        }
        for (0..nb) |b| {
            for (0..tn) |t| self.y[(t0 + t) * self.rows + o + b] = @floatCast(totals[b][t]);
        }
    }

    /// Panel rows b0 … b0+B−1 against L tokens from tx (t within the run): a transposed block
    /// of 8 (on AVX2 two 4-wide vectors), or 4 for a last block of at most four (lanes past the
    /// tokens hold zero activations and are never stored). Tokens are the lanes: each canonical lane chain of a group (elements l, l+8,
    /// l+16, l+24) is a vector of L tokens, fed a broadcast decoded weight and the transposed
    /// activations (`xt`), so the lane tree, the scale and the group-ordered total are vertical
    /// operations. The chains run one at a time in the tree's order (0, 4, 1, 5, 2, 6, 3, 7),
    /// each pair folded in as soon as it is done (`inOrder`): a row then holds at most four
    /// vectors of a group instead of eight, and on AVX-512 four rows share each activation
    /// load with no spills.
    inline fn laneTile(self: *const Job, comptime B: usize, comptime L: usize, panel: *const [panel_rows][panel_groups][8]V4, totals: *[panel_rows][panel_tokens]f64, o: usize, b0: usize, g0: usize, kg: usize, tx: usize, t: usize) void {
        @setEvalBranchQuota(10_000);
        const V = @Vector(L, f64);
        const groups = self.cols / group;
        const xt = self.xt + ((tx / 8) * self.cols + g0 * group) * 8 + tx % 8;
        var tot: [B]V = undefined;
        inline for (0..B) |b| tot[b] = totals[b0 + b][t..][0..L].*;
        for (0..kg) |j| {
            var ws: [B][*]const f64 = undefined;
            inline for (0..B) |b| ws[b] = @ptrCast(&panel[b0 + b][j]);
            const xj = xt + j * group * 8;
            const left = addRows(B, L, addRows(B, L, laneChain(B, L, 0, ws, xj), laneChain(B, L, 4, ws, xj)), addRows(B, L, laneChain(B, L, 1, ws, xj), laneChain(B, L, 5, ws, xj)));
            const right = addRows(B, L, addRows(B, L, laneChain(B, L, 2, ws, xj), laneChain(B, L, 6, ws, xj)), addRows(B, L, laneChain(B, L, 3, ws, xj), laneChain(B, L, 7, ws, xj)));
            const gsum = addRows(B, L, left, right);
            inline for (0..B) |b| {
                const s = self.scales[(o + b0 + b) * groups + g0 + j];
                if (s != 255) tot[b] = addScaledSum(V, tot[b], gsum[b], @splat(halfScale(s)));
            }
        }
        inline for (0..B) |b| totals[b0 + b][t..][0..L].* = tot[b];
    }

    /// Panel row `row` against tokens t0+t … t0+tn−1 in tiles of at most four tokens, each
    /// (row, token) group sum reduced on its own.
    fn panelRest(self: *const Job, panel: *const [panel_rows][panel_groups][8]V4, totals: *[panel_rows][panel_tokens]f64, o: usize, row: usize, g0: usize, kg: usize, t0: usize, from: usize, tn: usize) void {
        const groups = self.cols / group;
        var t = from;
        while (t < tn) {
            switch (@min(4, tn - t)) {
                inline 1...4 => |R| {
                    var xs: [R][*]const f64 = undefined;
                    inline for (0..R) |k| xs[k] = self.x64 + (t0 + t + k) * self.cols + g0 * group;
                    panelTokens(R, &panel[row], self.scales + (o + row) * groups + g0, kg, xs, totals[row][t..][0..R]);
                    t += R;
                },
                else => unreachable,
            }
        }
    }

    /// Panel rows b0 … b0+B−1 × tokens t0+t … t0+t+R−1 (`pair_tile`): B·R (row, token) pairs,
    /// one vector lane each for the group sums. Per group, each pair's canonical lane chains run
    /// in registers (a decoded weight vector serving R tokens, an activation vector B rows),
    /// then one transpose-and-add tree gives every pair's (b0+b1)+(b2+b3) at once, scaled and
    /// added to the pairs' totals lane by lane, groups in order: the one-token arithmetic.
    inline fn pairTile(self: *const Job, panel: *const [panel_rows][panel_groups][8]V4, totals: *[panel_rows][panel_tokens]f64, o: usize, b0: usize, g0: usize, kg: usize, t0: usize, t: usize) void {
        const B = pair_tile.rows;
        const R = pair_tile.tokens;
        const P = B * R;
        comptime std.debug.assert(P == 4); // one pair per lane of `groupSums4`
        const groups = self.cols / group;
        var xs: [R][*]const f64 = undefined;
        inline for (0..R) |k| xs[k] = self.x64 + (t0 + t + k) * self.cols + g0 * group;
        var tot: PairVec = undefined;
        inline for (0..P) |p| tot[p] = totals[b0 + p / R][t + p % R];
        for (0..kg) |j| {
            var lo: [P]V4 = @splat(@splat(0));
            var hi: [P]V4 = @splat(@splat(0));
            inline for (0..4) |q| {
                inline for (0..B) |b| {
                    const w_lo = panel[b0 + b][j][2 * q];
                    const w_hi = panel[b0 + b][j][2 * q + 1];
                    inline for (0..R) |r| {
                        const xg = xs[r] + j * group + 8 * q;
                        lo[b * R + r] = @mulAdd(V4, w_lo, xg[0..4].*, lo[b * R + r]);
                        hi[b * R + r] = @mulAdd(V4, w_hi, xg[4..8].*, hi[b * R + r]);
                    }
                }
            }
            var v: [P]V4 = undefined;
            inline for (0..P) |p| v[p] = lo[p] + hi[p];
            const sums = groupSums4(v);
            var codes: @Vector(P, u8) = undefined;
            inline for (0..P) |p| codes[p] = self.scales[(o + b0 + p / R) * groups + g0 + j];
            const mult: PairVec = halfScales(P, codes);
            // a 255 scale adds +0, which leaves a total (never −0) unchanged, as the skipped
            // group of the one-token path does
            const skip = codes == @as(@Vector(P, u8), @splat(255));
            tot = tot + @select(f64, skip, @as(PairVec, @splat(0)), sums * mult);
        }
        inline for (0..P) |p| totals[b0 + p / R][t + p % R] = tot[p];
    }
};

/// x (tokens × cols f32) widened exactly to f64 and transposed into pool shared scratch as
/// [token block of 8][col][8], the lanes of a short last block zero.
fn transposeShared(x: [*]const f32, cols: usize, tokens: usize) Error![*]const f64 {
    const blocks = (tokens + 7) / 8;
    const bytes = try common.mulSize(try common.mulSize(blocks * 8, cols), @sizeOf(f64));
    const buf = pool.reserveShared(bytes) catch return error.OutOfMemory;
    std.debug.assert(buf.len >= bytes);
    const xt: [*]f64 = @ptrCast(buf.ptr);
    for (0..blocks) |k| {
        const out = xt + k * cols * 8;
        for (0..8) |l| {
            const t = k * 8 + l;
            if (t < tokens) {
                for (0..cols) |c| out[c * 8 + l] = x[t * cols + c];
            } else {
                for (0..cols) |c| out[c * 8 + l] = 0;
            }
        }
    }
    return xt;
}

/// y[t][r] = Σ_c W[r][c]·x[t][c] for t < tokens, W the rows × cols MXFP4 matrix (cols a
/// multiple of 32). x is tokens × cols, y tokens × rows, contiguous; y must not overlap the
/// inputs. Returns the number of scale bytes equal to 255 in the matrix (each such group
/// contributed zero).
pub fn matmul(packed_w: [*]const u8, scales: [*]const u8, rows: usize, cols: usize, x: [*]const f32, y: [*]f32, tokens: usize) Error!u64 {
    if (rows == 0 or cols == 0 or tokens == 0 or cols % group != 0) return error.BadArgument;
    _ = try common.mulSize(rows, cols);
    const scalar = common.path() == .scalar;
    const lanes_path = lane_tiles and !scalar and tokens >= panel_min_tokens and !rowLanes(tokens);
    const x64: [*]const f64 = if (scalar or lanes_path) undefined else try matvec.widenShared(x, try common.mulSize(tokens, cols));
    const xt: [*]const f64 = if (lanes_path) try transposeShared(x, cols, tokens) else undefined;
    var bad = std.atomic.Value(u64).init(0);
    const job = Job{ .packed_w = packed_w, .scales = scales, .rows = rows, .cols = cols, .x = x, .x64 = x64, .xt = xt, .y = y, .tokens = tokens, .scalar = scalar, .bad = &bad };
    pool.parallelFor(rows, matvec.grainRows(cols, tokens), &job, Job.run);
    return bad.load(.monotonic);
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "worked bytes of model.md §5.4 decode exactly; swapped nibbles do not" {
    // Row 0 of layers.1 experts.0 w1: bytes 0-4 and 63 of group 0-1 (scale 121), 112-113 (scale 120).
    var packed_row = [_]u8{0} ** 128; // 256 columns = 8 groups
    var scales_row = [_]u8{121} ** 8;
    packed_row[0] = 0x16;
    packed_row[1] = 0xB9;
    packed_row[2] = 0xCE;
    packed_row[3] = 0x23;
    packed_row[4] = 0x85;
    packed_row[63] = 0xFA;
    packed_row[112] = 0x4C;
    packed_row[113] = 0xB1;
    scales_row[7] = 120;
    var out: [256]f32 = undefined;
    try testing.expectEqual(@as(usize, 0), decodeRow(&packed_row, &scales_row, &out));
    const want = [_]struct { c: usize, v: f32 }{
        .{ .c = 0, .v = 0.0625 },      .{ .c = 1, .v = 0.0078125 },
        .{ .c = 2, .v = -0.0078125 },  .{ .c = 3, .v = -0.0234375 },
        .{ .c = 4, .v = -0.0625 },     .{ .c = 5, .v = -0.03125 },
        .{ .c = 6, .v = 0.0234375 },   .{ .c = 7, .v = 0.015625 },
        .{ .c = 8, .v = 0.046875 },    .{ .c = 9, .v = -0.0 },
        .{ .c = 126, .v = -0.015625 }, .{ .c = 127, .v = -0.09375 },
        .{ .c = 224, .v = -0.015625 }, .{ .c = 225, .v = 0.015625 },
        .{ .c = 226, .v = 0.00390625 }, .{ .c = 227, .v = -0.01171875 },
    };
    for (want) |e| try testing.expectEqual(@as(u32, @bitCast(e.v)), @as(u32, @bitCast(out[e.c])));
    try testing.expect(std.math.signbit(out[9]));
    // The reversed-nibble reading gives the documented wrong start: 0.0078125, 0.0625, ...
    var swapped: [128]u8 = undefined;
    for (packed_row, 0..) |b, i| swapped[i] = (b << 4) | (b >> 4);
    var wrong: [256]f32 = undefined;
    _ = decodeRow(&swapped, &scales_row, &wrong);
    try testing.expectEqual(@as(f32, 0.0078125), wrong[0]);
    try testing.expectEqual(@as(f32, 0.0625), wrong[1]);
    try testing.expect(wrong[0] != out[0]);
}

test "SIMD equals scalar bit for bit, equals decode-then-dot within one f64 rounding; 255 counted" {
    var prng = std.Random.DefaultPrng.init(5);
    const rnd = prng.random();
    const alloc = testing.allocator;
    const rows = 37;
    const cols = 224; // 7 groups
    const tokens = 6; // one block of four tokens and a remainder of two
    const pk = try alloc.alloc(u8, rows * cols / 2);
    defer alloc.free(pk);
    const sc = try alloc.alloc(u8, rows * cols / group);
    defer alloc.free(sc);
    const x = try alloc.alloc(f32, tokens * cols);
    defer alloc.free(x);
    for (pk) |*b| b.* = rnd.int(u8);
    for (sc) |*s| s.* = rnd.intRangeAtMost(u8, 100, 140);
    sc[5] = 255;
    sc[77] = 255;
    for (x) |*v| v.* = (rnd.float(f32) * 2 - 1) * std.math.pow(f32, 2, @floatFromInt(rnd.intRangeAtMost(i32, -12, 12)));
    var ys: [tokens * rows]f32 = undefined;
    var yr: [tokens * rows]f32 = undefined;
    common.setPath(.simd);
    try testing.expectEqual(@as(u64, 2), try matmul(pk.ptr, sc.ptr, rows, cols, x.ptr, &ys, tokens));
    common.setPath(.scalar);
    try testing.expectEqual(@as(u64, 2), try matmul(pk.ptr, sc.ptr, rows, cols, x.ptr, &yr, tokens));
    common.setPath(.simd);
    try testing.expectEqualSlices(u32, @ptrCast(&ys), @ptrCast(&yr));
    // decode-then-dot (f64 sequential) agrees to f32 rounding except in rare ties
    var row: [cols]f32 = undefined;
    for (0..rows) |r| {
        _ = decodeRow(pk[r * cols / 2 ..][0 .. cols / 2], sc[r * cols / group ..][0 .. cols / group], &row);
        var s: f64 = 0;
        for (0..cols) |c| s += @as(f64, row[c]) * x[c];
        const want: f32 = @floatCast(s);
        try testing.expectApproxEqAbs(want, ys[r], 1e-6 * @max(1.0, @abs(want)));
    }
}

test "every token count and tiling gives the T = 1 bits, the scalar bits and one 255 count" {
    var prng = std.Random.DefaultPrng.init(6);
    const rnd = prng.random();
    const alloc = testing.allocator;
    // rows across the 32-row panel blocks; groups across the 4-group blocks (1, 3, 11, 25)
    const sizes = [_][2]usize{ .{ 3, 32 }, .{ 37, 96 }, .{ 45, 352 }, .{ 70, 800 } };
    const token_counts = [_]usize{ 1, 2, 3, 4, 5, 7, 8, 9, 16, 33, 70 };
    const max_tokens = 70; // more than one 64-token panel block
    for (sizes) |sz| {
        const rows = sz[0];
        const cols = sz[1];
        const groups = cols / group;
        const pk = try alloc.alloc(u8, rows * cols / 2);
        defer alloc.free(pk);
        const sc = try alloc.alloc(u8, rows * groups);
        defer alloc.free(sc);
        const x = try alloc.alloc(f32, max_tokens * cols);
        defer alloc.free(x);
        for (pk) |*b| b.* = rnd.int(u8);
        for (sc) |*s| s.* = rnd.intRangeAtMost(u8, 110, 135);
        sc[rows * groups / 2] = 255;
        sc[rows * groups - 1] = 255;
        for (x) |*v| v.* = (rnd.float(f32) * 2 - 1) * std.math.pow(f32, 2, @floatFromInt(rnd.intRangeAtMost(i32, -12, 12)));
        const want = try alloc.alloc(f32, max_tokens * rows);
        defer alloc.free(want);
        var bad: usize = 0;
        for (0..max_tokens) |t| {
            for (0..rows) |r| want[t * rows + r] = dotScalar(pk[r * cols / 2 ..][0 .. cols / 2], sc[r * groups ..][0..groups], x[t * cols ..][0..cols], &bad);
        }
        const y = try alloc.alloc(f32, max_tokens * rows);
        defer alloc.free(y);
        common.setPath(.simd);
        for (0..max_tokens) |t| {
            try testing.expectEqual(@as(u64, 2), try matmul(pk.ptr, sc.ptr, rows, cols, x.ptr + t * cols, y.ptr, 1));
            try testing.expectEqualSlices(u32, @ptrCast(want[t * rows ..][0..rows]), @ptrCast(y[0..rows]));
        }
        for (token_counts) |tokens| {
            try testing.expectEqual(@as(u64, 2), try matmul(pk.ptr, sc.ptr, rows, cols, x.ptr, y.ptr, tokens));
            try testing.expectEqualSlices(u32, @ptrCast(want[0 .. tokens * rows]), @ptrCast(y[0 .. tokens * rows]));
        }
        for ([_]u32{ 2, 3 }) |threads| {
            try pool.init(threads);
            pool.setFineGrain(true);
            defer pool.setFineGrain(false);
            for ([_]usize{ 1, 3, 9, 70 }) |tokens| {
                try testing.expectEqual(@as(u64, 2), try matmul(pk.ptr, sc.ptr, rows, cols, x.ptr, y.ptr, tokens));
                try testing.expectEqualSlices(u32, @ptrCast(want[0 .. tokens * rows]), @ptrCast(y[0 .. tokens * rows]));
            }
        }
        pool.deinit();
    }
}
