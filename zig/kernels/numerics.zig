//! The one implementation of every transcendental k3 uses: exp, sigmoid, SiLU, tanh, softplus.
//!
//! model.md §8.3: a vectorised exp or tanh that differs from the scalar one in the last bit
//! breaks path bit-identity, so every function here is written once, generic over the vector
//! width N. The scalar path is N = 1 and runs exactly the same sequence of IEEE operations per
//! lane as the vector path (only +, -, *, /, sqrt, conversions, selects and bit manipulation:
//! no fused multiply-add, no approximate reciprocal, no platform libm), so any N gives the
//! same bits as any other N.
//!
//! Accuracy: exp and tanh of an f32 are evaluated in f64 (Cody-Waite reduction, degree-11
//! Taylor polynomial, relative error below 1e-14) and rounded once to f32, so they are
//! correctly rounded except when the exact value lies within ~1e-14 relative of a rounding
//! boundary between two f32 values. Overflow, underflow into subnormals, ±0, ±inf and NaN
//! follow IEEE: exp(-inf) = 0, exp(+inf) = inf, exp(NaN) = NaN, tanh(±0) = ±0.
//!
//! Sigmoid is `1/(1+exp(-x))` evaluated in f32 (§8.3): it overflows safely to 0 for very
//! negative x and saturates to exactly 1 for large x. SiLU is `x·σ(x)` in f32.
const std = @import("std");

fn V(comptime N: comptime_int, comptime T: type) type {
    return @Vector(N, T);
}

fn splat(comptime N: comptime_int, comptime T: type, v: T) V(N, T) {
    return @splat(v);
}

const log2e: f64 = 1.4426950408889634;
// ln 2 split so that k·ln2_hi is exact for |k| < 2^11 (ln2_hi has 32 significant bits).
const ln2_hi: f64 = 6.93147180369123816490e-01;
const ln2_lo: f64 = 1.90821492927058770002e-10;
// Adding then subtracting 1.5·2^52 rounds an f64 of magnitude < 2^51 to the nearest integer
// (ties to even) and leaves that integer in the low mantissa bits.
const round_magic: f64 = 6755399441055744.0;
const round_magic_bits: i64 = @bitCast(round_magic);

/// Inputs are clamped to ±clamp before range reduction: e^±200 is far outside f32 range, so
/// the f32 result is already 0 or inf there, and 2^k stays a normal f64 for |k| ≤ 289.
const clamp: f64 = 200.0;

/// Taylor coefficients 1/n! for n = 2 … 11.
const c2: f64 = 1.0 / 2.0;
const c3: f64 = 1.0 / 6.0;
const c4: f64 = 1.0 / 24.0;
const c5: f64 = 1.0 / 120.0;
const c6: f64 = 1.0 / 720.0;
const c7: f64 = 1.0 / 5040.0;
const c8: f64 = 1.0 / 40320.0;
const c9: f64 = 1.0 / 362880.0;
const c10: f64 = 1.0 / 3628800.0;
const c11: f64 = 1.0 / 39916800.0;

/// (e^r − 1) for |r| ≤ ln2/2 + tiny, without the leading 1 so small r keeps its precision.
inline fn expm1Poly(comptime N: comptime_int, r: V(N, f64)) V(N, f64) {
    const s = splat;
    var p = s(N, f64, c11);
    p = p * r + s(N, f64, c10);
    p = p * r + s(N, f64, c9);
    p = p * r + s(N, f64, c8);
    p = p * r + s(N, f64, c7);
    p = p * r + s(N, f64, c6);
    p = p * r + s(N, f64, c5);
    p = p * r + s(N, f64, c4);
    p = p * r + s(N, f64, c3);
    p = p * r + s(N, f64, c2);
    p = p * r + s(N, f64, 1.0);
    return p * r;
}

fn Reduced(comptime N: comptime_int) type {
    return struct { r: V(N, f64), scale: V(N, f64) };
}

/// y = k·ln2 + r with |r| ≤ ln2/2; returns r and 2^k. Requires finite |y| ≤ clamp.
inline fn reduce(comptime N: comptime_int, y: V(N, f64)) Reduced(N) {
    const s = splat;
    const t = y * s(N, f64, log2e) + s(N, f64, round_magic);
    const kf = t - s(N, f64, round_magic);
    const r = (y - kf * s(N, f64, ln2_hi)) - kf * s(N, f64, ln2_lo);
    const k: V(N, i64) = @as(V(N, i64), @bitCast(t)) - s(N, i64, round_magic_bits);
    const scale_bits = (k + s(N, i64, 1023)) << s(N, u6, 52);
    return .{ .r = r, .scale = @bitCast(scale_bits) };
}

/// e^y in f64 for any f64 lane (NaN propagates, ±inf and huge values saturate through the
/// clamp: the caller rounds to f32, where e^±200 is already 0 or inf).
inline fn expF64(comptime N: comptime_int, y: V(N, f64)) V(N, f64) {
    const s = splat;
    const nan = y != y;
    var yc = @select(f64, y > s(N, f64, clamp), s(N, f64, clamp), y);
    yc = @select(f64, yc < s(N, f64, -clamp), s(N, f64, -clamp), yc);
    yc = @select(f64, nan, s(N, f64, 0.0), yc);
    const red = reduce(N, yc);
    const e = (expm1Poly(N, red.r) + s(N, f64, 1.0)) * red.scale;
    return @select(f64, nan, y, e);
}

/// e^x for f32 lanes.
pub inline fn exp(comptime N: comptime_int, x: V(N, f32)) V(N, f32) {
    const xd: V(N, f64) = @floatCast(x);
    return @floatCast(expF64(N, xd));
}

/// σ(x) = 1/(1+e^−x), every step in f32.
pub inline fn sigmoid(comptime N: comptime_int, x: V(N, f32)) V(N, f32) {
    const one = splat(N, f32, 1.0);
    return one / (one + exp(N, -x));
}

/// SiLU(x) = x·σ(x) in f32.
pub inline fn silu(comptime N: comptime_int, x: V(N, f32)) V(N, f32) {
    return x * sigmoid(N, x);
}

/// tanh(x) for f32 lanes: sign(x)·m/(m+2) with m = e^{2|x|} − 1 in f64; 1 for |x| ≥ 10
/// (tanh(10) = 1 − 4e-9 already rounds to 1 in f32). Odd, so tanh(−0) = −0.
pub inline fn tanh(comptime N: comptime_int, x: V(N, f32)) V(N, f32) {
    const s = splat;
    const xd: V(N, f64) = @floatCast(x);
    const nan = xd != xd;
    const a = @abs(xd);
    const big = a >= s(N, f64, 10.0);
    const y = @select(f64, @select(bool, big, big, nan), s(N, f64, 0.0), a + a);
    // expm1(y) for 0 ≤ y < 20: 2^k·(e^r − 1) + (2^k − 1); exact 0 at y = 0.
    const red = reduce(N, y);
    const m = expm1Poly(N, red.r) * red.scale + (red.scale - s(N, f64, 1.0));
    const t = @select(f64, big, s(N, f64, 1.0), m / (m + s(N, f64, 2.0)));
    const negative = (@as(V(N, u64), @bitCast(xd)) >> s(N, u6, 63)) == s(N, u64, 1);
    const signed = @select(f64, negative, -t, t);
    return @floatCast(@select(f64, nan, xd, signed));
}

/// softplus(x) = ln(1 + e^x), rounded once to f32 from f64 (x itself above 20, where the
/// correction e^-x < 2e-9 is below half an f32 ulp of x). Not used by the K3 forward pass:
/// K3's KDA decay is gmin·σ(·), and the Kimi-Linear form −e^A·softplus(z) is a trap (§6.6).
/// Scalar only; std.math.log1p is Zig's own deterministic implementation.
pub fn softplus(x: f32) f32 {
    const xd: f64 = x;
    if (xd != xd) return x;
    if (xd > 20.0) return x;
    const e = expF64(1, .{xd})[0];
    return @floatCast(std.math.log1p(e));
}

// Scalar conveniences (N = 1): the same code as every vector width.
pub inline fn expS(x: f32) f32 {
    return exp(1, .{x})[0];
}
pub inline fn sigmoidS(x: f32) f32 {
    return sigmoid(1, .{x})[0];
}
pub inline fn siluS(x: f32) f32 {
    return silu(1, .{x})[0];
}
pub inline fn tanhS(x: f32) f32 {
    return tanh(1, .{x})[0];
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

fn bitsEq(a: f32, b: f32) bool {
    return @as(u32, @bitCast(a)) == @as(u32, @bitCast(b));
}

test "exp, sigmoid, tanh: vector width 8 equals scalar bit for bit" {
    var prng = std.Random.DefaultPrng.init(42);
    const rnd = prng.random();
    var i: usize = 0;
    while (i < 20000) : (i += 8) {
        var x: @Vector(8, f32) = undefined;
        for (0..8) |l| {
            const mag = std.math.pow(f32, 10.0, rnd.float(f32) * 5.0 - 3.0);
            x[l] = if (rnd.boolean()) mag else -mag;
        }
        const e = exp(8, x);
        const s = sigmoid(8, x);
        const t = tanh(8, x);
        for (0..8) |l| {
            try testing.expect(bitsEq(e[l], expS(x[l])));
            try testing.expect(bitsEq(s[l], sigmoidS(x[l])));
            try testing.expect(bitsEq(t[l], tanhS(x[l])));
        }
    }
}

test "exp accuracy against f64 std.math.exp (within one f32 rounding)" {
    var prng = std.Random.DefaultPrng.init(7);
    const rnd = prng.random();
    for (0..100000) |_| {
        const x: f32 = rnd.float(f32) * 200.0 - 100.0;
        const want: f32 = @floatCast(@exp(@as(f64, x)));
        const got = expS(x);
        if (!bitsEq(got, want)) {
            // a disagreement is only allowed as a near-tie: one ulp apart
            const d = @as(i64, @as(u32, @bitCast(got))) - @as(i64, @as(u32, @bitCast(want)));
            try testing.expect(d == 1 or d == -1);
        }
    }
}

test "special values" {
    const inf = std.math.inf(f32);
    try testing.expect(expS(0) == 1.0);
    try testing.expect(expS(-inf) == 0.0);
    try testing.expect(expS(inf) == inf);
    try testing.expect(expS(89.0) == inf);
    try testing.expect(expS(-104.0) == 0.0);
    try testing.expect(expS(-100.0) > 0.0); // subnormal, not flushed
    try testing.expect(std.math.isNan(expS(std.math.nan(f32))));
    try testing.expect(sigmoidS(-200.0) == 0.0);
    try testing.expect(sigmoidS(200.0) == 1.0);
    try testing.expect(sigmoidS(0.0) == 0.5);
    try testing.expect(tanhS(20.0) == 1.0);
    try testing.expect(tanhS(-20.0) == -1.0);
    try testing.expect(bitsEq(tanhS(-0.0), -0.0));
    try testing.expect(tanhS(1e-30) == 1e-30);
    try testing.expect(std.math.isNan(tanhS(std.math.nan(f32))));
    try testing.expect(std.math.isNan(sigmoidS(std.math.nan(f32))));
    try testing.expect(softplus(0.0) == @as(f32, @floatCast(@log(2.0))));
    try testing.expect(softplus(100.0) == 100.0);
}

test "tanh accuracy against f64 std.math.tanh" {
    var prng = std.Random.DefaultPrng.init(9);
    const rnd = prng.random();
    for (0..100000) |_| {
        const mag = std.math.pow(f32, 10.0, rnd.float(f32) * 8.0 - 6.0);
        const x: f32 = if (rnd.boolean()) mag else -mag;
        const want: f32 = @floatCast(std.math.tanh(@as(f64, x)));
        const got = tanhS(x);
        if (!bitsEq(got, want)) {
            const d = @as(i64, @as(u32, @bitCast(got))) - @as(i64, @as(u32, @bitCast(want)));
            try testing.expect(d == 1 or d == -1);
        }
    }
}
