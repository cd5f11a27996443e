//! The int8 draft container `I8R` (runtime.md 9.3): a matrix W[rows][cols] stored as rows of
//! [f32 scale, little-endian][int8 × cols], `scale_bytes + cols` bytes a row, no padding.
//!
//! What a stored row means, the one definition every path uses: the weight of element i is
//!   w_i = f32(scale · q_i)        (one f32 rounding; q_i is at most 7 bits, so the f64
//!                                  product is exact and rounding it is the f32 product)
//! `dequant` writes exactly these f32 weights. `matmul` computes y[t][o] = Σ_i w_i·x[t][i] in
//! the canonical order of matvec_bf16.zig (f64 products, 16 lanes, the fixed lane tree, the
//! sequential tail, one rounding to f32), so it gives the bits of the f32 matmul on the
//! dequantised rows, whatever the path, the thread count or T. Threads split output rows.
//!
//! Quantisation (`quantize`, from bf16): per row absmax a over the widened weights, scale =
//! f32(a / 127) (division in f64), q_i = round-half-to-even(w_i / scale) in f64, clipped to
//! [−127, 127] (it never leaves that range: |w_i| ≤ a ≤ 127·scale·(1 + 2^−24)). An all-zero
//! row has scale 0 and q = 0. Non-finite weights are counted (the caller refuses them) and
//! stored as 0.
const std = @import("std");
const common = @import("common.zig");
const pool = @import("pool");

pub const Error = common.Error;

/// Bytes of the f32 scale at the start of every row.
pub const scale_bytes = 4;
/// Lanes of the canonical accumulation: the bf16 kernel's, whose order this one follows.
const lanes = @import("matvec_bf16.zig").lanes;
/// Rows computed together for one token (they share the activation loads).
const block_rows = 3;
/// Tokens sharing each dequantised weight on the multi-token path.
const tile_tokens = 3;

pub fn rowBytes(cols: usize) usize {
    return scale_bytes + cols;
}

inline fn rowScale(row: [*]const u8) f32 {
    return @bitCast(std.mem.readInt(u32, row[0..4], .little));
}

inline fn rowValues(row: [*]const u8) [*]const i8 {
    return @ptrCast(row + scale_bytes);
}

inline fn weight(scale: f32, q: i8) f32 {
    return scale * @as(f32, @floatFromInt(q));
}

/// The scalar reference: dequantise each weight, then the canonical order as plain loops.
fn dotScalar(row: [*]const u8, x: [*]const f32, n: usize) f32 {
    const scale = rowScale(row);
    const q = rowValues(row);
    const body = n - n % lanes;
    var a = [_]f64{0} ** lanes;
    var i: usize = 0;
    while (i < body) : (i += 1) a[i % lanes] = a[i % lanes] + @as(f64, weight(scale, q[i])) * @as(f64, x[i]);
    var c: [4]f64 = undefined;
    for (0..4) |m| c[m] = (a[m] + a[m + 4]) + (a[m + 8] + a[m + 12]);
    var acc = (c[0] + c[1]) + (c[2] + c[3]);
    while (i < n) : (i += 1) acc = acc + @as(f64, weight(scale, q[i])) * @as(f64, x[i]);
    return @floatCast(acc);
}

const V4 = @Vector(4, f64);
const F4 = @Vector(4, f32);

/// Sixteen weights dequantised (f32 products, as `weight`) and widened: elements 0-3, 4-7,
/// 8-11, 12-15 in four f64 vectors, the canonical lane partition.
inline fn dequant16(q: [*]const i8, scale: f32) [4]V4 {
    const v: @Vector(16, i8) = q[0..16].*;
    const f: @Vector(16, f32) = @floatFromInt(v);
    const d = f * @as(@Vector(16, f32), @splat(scale));
    var out: [4]V4 = undefined;
    inline for (0..4) |k| {
        const part: F4 = @shuffle(f32, d, undefined, [4]i32{ 4 * k, 4 * k + 1, 4 * k + 2, 4 * k + 3 });
        out[k] = @floatCast(part);
    }
    return out;
}

/// B rows against R tokens over the body, each weight dequantised once for all R tokens.
inline fn tile(comptime B: usize, comptime R: usize, rows: [B][*]const u8, x64: [R][*]const f64, body: usize) [B][R][4]V4 {
    const zero4 = [4]V4{ @splat(0), @splat(0), @splat(0), @splat(0) };
    var acc: [B][R][4]V4 = @splat(@splat(zero4));
    var scales: [B]f32 = undefined;
    inline for (0..B) |b| scales[b] = rowScale(rows[b]);
    var i: usize = 0;
    while (i < body) : (i += lanes) {
        inline for (0..B) |b| {
            const wv = dequant16(rowValues(rows[b]) + i, scales[b]);
            inline for (0..R) |t| {
                // exact products in f64, so the fused form has the bits of multiply-then-add
                inline for (0..4) |k| acc[b][t][k] = @mulAdd(V4, wv[k], x64[t][i + 4 * k ..][0..4].*, acc[b][t][k]);
            }
        }
    }
    return acc;
}

/// The lane tree, the sequential tail and the one rounding of one (row, token).
inline fn finish(acc: [4]V4, row: [*]const u8, x64: [*]const f64, body: usize, n: usize) f32 {
    const c = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    var s = (c[0] + c[1]) + (c[2] + c[3]);
    const scale = rowScale(row);
    const q = rowValues(row);
    var j = body;
    while (j < n) : (j += 1) s = @mulAdd(f64, weight(scale, q[j]), x64[j], s);
    return @floatCast(s);
}

const Job = struct {
    w: [*]const u8,
    rows: usize,
    cols: usize,
    x: [*]const f32,
    x64: [*]const f64,
    y: [*]f32,
    tokens: usize,
    scalar: bool,

    fn row(self: *const Job, o: usize) [*]const u8 {
        return self.w + o * rowBytes(self.cols);
    }

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const n = self.cols;
        if (self.scalar) {
            for (begin..end) |o| {
                for (0..self.tokens) |t| self.y[t * self.rows + o] = dotScalar(self.row(o), self.x + t * n, n);
            }
            return;
        }
        const body = n - n % lanes;
        if (self.tokens == 1) {
            var o = begin;
            while (o + block_rows <= end) : (o += block_rows) {
                var rs: [block_rows][*]const u8 = undefined;
                inline for (0..block_rows) |b| rs[b] = self.row(o + b);
                const acc = tile(block_rows, 1, rs, .{self.x64}, body);
                inline for (0..block_rows) |b| self.y[o + b] = finish(acc[b][0], rs[b], self.x64, body, n);
            }
            while (o < end) : (o += 1) {
                const acc = tile(1, 1, .{self.row(o)}, .{self.x64}, body);
                self.y[o] = finish(acc[0][0], self.row(o), self.x64, body, n);
            }
            return;
        }
        for (begin..end) |o| {
            var t: usize = 0;
            while (self.tokens - t >= tile_tokens) : (t += tile_tokens) self.tokenGroup(tile_tokens, o, t, body);
            while (self.tokens - t >= 2) : (t += 2) self.tokenGroup(2, o, t, body);
            if (t < self.tokens) self.tokenGroup(1, o, t, body);
        }
    }

    fn tokenGroup(self: *const Job, comptime R: usize, o: usize, t0: usize, body: usize) void {
        const n = self.cols;
        var xs: [R][*]const f64 = undefined;
        inline for (0..R) |t| xs[t] = self.x64 + (t0 + t) * n;
        const acc = tile(1, R, .{self.row(o)}, xs, body);
        inline for (0..R) |t| self.y[(t0 + t) * self.rows + o] = finish(acc[0][t], self.row(o), xs[t], body, n);
    }
};

/// Rows per parallel chunk: at least ~64K multiply-adds so a chunk outweighs its dispatch.
fn grainRows(cols: usize, tokens: usize) usize {
    return @max(1, (64 * 1024) / @max(1, cols * tokens));
}

/// y[t][o] = Σ_i w_o,i · x[t][i] for t < tokens, W in I8R rows (see the file comment).
pub fn matmul(w: [*]const u8, rows: usize, cols: usize, x: [*]const f32, y: [*]f32, tokens: usize) Error!void {
    if (rows == 0 or cols == 0 or tokens == 0) return error.BadArgument;
    _ = try common.mulSize(rows, rowBytes(cols));
    const count = try common.mulSize(tokens, cols);
    const scalar = common.path() == .scalar;
    var x64: [*]const f64 = undefined;
    if (!scalar) {
        const buf = pool.reserveShared(try common.mulSize(count, @sizeOf(f64))) catch return error.OutOfMemory;
        const wide: [*]f64 = @ptrCast(buf.ptr);
        for (0..count) |i| wide[i] = x[i]; // exact
        x64 = wide;
    }
    const job = Job{ .w = w, .rows = rows, .cols = cols, .x = x, .x64 = x64, .y = y, .tokens = tokens, .scalar = scalar };
    pool.parallelFor(rows, grainRows(cols, tokens), &job, Job.run);
}

/// dst[o][i] = f32(scale_o · q_o,i): the weights `matmul` multiplies by.
pub fn dequant(src: [*]const u8, rows: usize, cols: usize, dst: [*]f32) Error!void {
    if (rows == 0 or cols == 0) return error.BadArgument;
    _ = try common.mulSize(rows, rowBytes(cols));
    for (0..rows) |o| {
        const row = src + o * rowBytes(cols);
        const scale = rowScale(row);
        const q = rowValues(row);
        for (0..cols) |i| dst[o * cols + i] = weight(scale, q[i]);
    }
}

/// 1.5 · 2^52: adding and subtracting it rounds an f64 of magnitude below 2^51 to an integer,
/// ties to even (the default rounding mode; nothing here changes it).
const round_magic: f64 = 6755399441055744.0;

const QuantJob = struct {
    src: [*]const u16,
    cols: usize,
    dst: [*]u8,
    nonfinite: *std.atomic.Value(u64),

    fn run(self: *const QuantJob, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const n = self.cols;
        var bad: u64 = 0;
        for (begin..end) |o| {
            const w = self.src + o * n;
            var absmax: f32 = 0;
            for (0..n) |i| {
                const v = common.bf16ToF32(w[i]);
                if (!std.math.isFinite(v)) {
                    bad += 1;
                    continue;
                }
                absmax = @max(absmax, @abs(v));
            }
            const scale: f32 = @floatCast(@as(f64, absmax) / 127.0);
            const row = self.dst + o * rowBytes(n);
            std.mem.writeInt(u32, row[0..4], @bitCast(scale), .little);
            const q: [*]i8 = @ptrCast(row + scale_bytes);
            for (0..n) |i| {
                const v = common.bf16ToF32(w[i]);
                if (scale == 0 or !std.math.isFinite(v)) {
                    q[i] = 0;
                    continue;
                }
                const r = (@as(f64, v) / @as(f64, scale) + round_magic) - round_magic;
                q[i] = @intFromFloat(std.math.clamp(r, -127.0, 127.0));
            }
        }
        if (bad > 0) _ = self.nonfinite.fetchAdd(bad, .monotonic);
    }
};

/// bf16 W[rows][cols] → I8R rows at `dst` (rows · rowBytes(cols) bytes). Returns how many
/// weights were not finite (stored as 0; the caller refuses the tensor).
pub fn quantize(src: [*]const u16, rows: usize, cols: usize, dst: [*]u8) Error!u64 {
    if (rows == 0 or cols == 0) return error.BadArgument;
    _ = try common.mulSize(rows, rowBytes(cols));
    var nonfinite = std.atomic.Value(u64).init(0);
    const job = QuantJob{ .src = src, .cols = cols, .dst = dst, .nonfinite = &nonfinite };
    pool.parallelFor(rows, grainRows(cols, 1), &job, QuantJob.run);
    return nonfinite.load(.monotonic);
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn randomRows(alloc: std.mem.Allocator, rnd: std.Random, rows: usize, cols: usize) ![]u8 {
    const src = try alloc.alloc(u16, rows * cols);
    defer alloc.free(src);
    for (src) |*b| {
        const f: f32 = (rnd.float(f32) * 2 - 1) * 0.25;
        b.* = @truncate(@as(u32, @bitCast(f)) >> 16);
    }
    const out = try alloc.alloc(u8, rows * rowBytes(cols));
    try testing.expectEqual(@as(u64, 0), try quantize(src.ptr, rows, cols, out.ptr));
    return out;
}

test "SIMD equals scalar, any T equals T = 1, any thread count" {
    var prng = std.Random.DefaultPrng.init(7);
    const rnd = prng.random();
    const alloc = testing.allocator;
    const sizes = [_][2]usize{ .{ 1, 1 }, .{ 4, 15 }, .{ 5, 16 }, .{ 7, 33 }, .{ 31, 517 } };
    const max_tokens = 7;
    for (sizes) |sz| {
        const rows = sz[0];
        const cols = sz[1];
        const w = try randomRows(alloc, rnd, rows, cols);
        defer alloc.free(w);
        const x = try alloc.alloc(f32, max_tokens * cols);
        defer alloc.free(x);
        for (x) |*v| v.* = (rnd.float(f32) * 2 - 1) * std.math.pow(f32, 2, @floatFromInt(rnd.intRangeAtMost(i32, -20, 20)));
        const want = try alloc.alloc(f32, max_tokens * rows);
        defer alloc.free(want);
        const got = try alloc.alloc(f32, max_tokens * rows);
        defer alloc.free(got);
        for (0..max_tokens) |t| {
            for (0..rows) |o| want[t * rows + o] = dotScalar(w.ptr + o * rowBytes(cols), x.ptr + t * cols, cols);
        }
        for ([_]u32{ 1, 2, 3 }) |threads| {
            try pool.init(threads);
            pool.setFineGrain(threads == 3);
            for (1..max_tokens + 1) |T| {
                try matmul(w.ptr, rows, cols, x.ptr, got.ptr, T);
                try testing.expectEqualSlices(u32, @ptrCast(want[0 .. T * rows]), @ptrCast(got[0 .. T * rows]));
            }
        }
        pool.setFineGrain(false);
    }
    pool.deinit();
}

test "quantize: absmax / 127 scales, ties to even, zero rows, non-finite counted" {
    // 127, 2.5, 1.5, 0.5, −2.5, −127: scale exactly 1, halves go to the even neighbour
    const row = [_]u16{ 0x42fe, 0x4020, 0x3fc0, 0x3f00, 0xc020, 0xc2fe };
    var out: [rowBytes(6)]u8 = undefined;
    try testing.expectEqual(@as(u64, 0), try quantize(&row, 1, 6, &out));
    try testing.expectEqual(@as(f32, 1.0), rowScale(&out));
    const q = rowValues(&out);
    const want = [_]i8{ 127, 2, 2, 0, -2, -127 };
    for (want, 0..) |v, i| try testing.expectEqual(v, q[i]);
    // a scale that is not a power of two: 0.25 and 1.0 → f32(1/127), 0.25·127 → 32 (31.75)
    const row2 = [_]u16{ 0x3e80, 0x3f80 };
    var out2: [rowBytes(2)]u8 = undefined;
    _ = try quantize(&row2, 1, 2, &out2);
    try testing.expectEqual(@as(f32, @floatCast(@as(f64, 1.0) / 127.0)), rowScale(&out2));
    try testing.expectEqual(@as(i8, 32), rowValues(&out2)[0]);
    try testing.expectEqual(@as(i8, 127), rowValues(&out2)[1]);
    const zeros = [_]u16{ 0, 0x8000 };
    var zout: [rowBytes(2)]u8 = undefined;
    _ = try quantize(&zeros, 1, 2, &zout);
    try testing.expectEqual(@as(f32, 0), rowScale(&zout));
    const nan = [_]u16{ 0x7fc0, 0x3f80 };
    var nout: [rowBytes(2)]u8 = undefined;
    try testing.expectEqual(@as(u64, 1), try quantize(&nan, 1, 2, &nout));
}
