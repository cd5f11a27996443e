//! The routed-expert part of the Stable LatentMoE block (model.md §6.11 step 3) in one call:
//! for each token, for each selected expert in top-k order,
//!     g = W1_e z,  u = W3_e z          (I each, MXFP4; w1 = gate, w3 = up)
//!     t = SiTU-GLU(g, u)               (I)
//!     d = W2_e t                       (Λ, MXFP4; w2 = down)
//!     acc_i ← acc_i + f32(w_j · d_i)   f32, acc from +0, j in top-k (selection) order
//! Each matrix product is `matvec_mxfp4.matmul` with T = 1 (threads split its rows), so the
//! result is bit-identical to calling the kernels one by one. Which experts, where their bytes
//! live and what to do with a missing one is the caller's business (TypeScript policy); this
//! kernel only multiplies. The RMSNorm of the aggregate and W↑ are separate kernels.
const std = @import("std");
const common = @import("common.zig");
const mx = @import("matvec_mxfp4.zig");
const situ = @import("situ.zig");
const pool = @import("pool");

pub const Error = common.Error;

/// Addresses of one expert's six tensors (as in the checkpoint: packed bytes and E8M0 scales).
pub const ExpertPtrs = extern struct {
    w1_packed: [*]const u8,
    w1_scale: [*]const u8,
    w3_packed: [*]const u8,
    w3_scale: [*]const u8,
    w2_packed: [*]const u8,
    w2_scale: [*]const u8,
};

pub const Params = extern struct {
    tokens: usize,
    k: usize,
    /// Λ, the latent width (input of w1/w3, output of w2); a multiple of 32.
    lam: usize,
    /// I, the expert intermediate width; a multiple of 32.
    inter: usize,
    beta1: f32,
    beta2: f32,
};

/// z: [T][Λ]; experts: [T][k] pointer sets; weights: [T][k]; acc: [T][Λ] (overwritten).
/// Returns the number of 255 scale bytes met (each such group contributed zero).
pub fn routed(z: [*]const f32, experts: [*]const ExpertPtrs, weights: [*]const f32, acc: [*]f32, p: Params) Error!u64 {
    if (p.tokens == 0 or p.k == 0 or p.lam == 0 or p.inter == 0) return error.BadArgument;
    if (p.lam % mx.group != 0 or p.inter % mx.group != 0) return error.BadArgument;
    const floats = try common.mulSize(3 * p.inter + p.lam, 1);
    pool.reserveScratch(try common.mulSize(floats, @sizeOf(f32))) catch return error.OutOfMemory;
    const raw = pool.scratchFor(0);
    std.debug.assert(raw.len >= floats * @sizeOf(f32));
    const buf: [*]f32 = @ptrCast(@alignCast(raw.ptr));
    const g = buf;
    const u = buf + p.inter;
    const t = buf + 2 * p.inter;
    const d = buf + 3 * p.inter;
    var bad: u64 = 0;
    for (0..p.tokens) |tok| {
        const zt = z + tok * p.lam;
        const at = acc + tok * p.lam;
        @memset(at[0..p.lam], 0);
        for (0..p.k) |j| {
            const e = experts[tok * p.k + j];
            bad += try mx.matmul(e.w1_packed, e.w1_scale, p.inter, p.lam, zt, g, 1);
            bad += try mx.matmul(e.w3_packed, e.w3_scale, p.inter, p.lam, zt, u, 1);
            try situ.situGlu(g, u, t, p.inter, p.beta1, p.beta2);
            bad += try mx.matmul(e.w2_packed, e.w2_scale, p.lam, p.inter, t, d, 1);
            try situ.elementwise(.axpy, at, d, at, p.lam, weights[tok * p.k + j], 0);
        }
    }
    return bad;
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "routed experts == the kernels called one by one" {
    var prng = std.Random.DefaultPrng.init(41);
    const rnd = prng.random();
    const alloc = testing.allocator;
    const lam = 64;
    const inter = 96;
    const n_exp = 3;
    const T = 2;
    const k = 2;
    var mats: [n_exp][6][]u8 = undefined;
    for (0..n_exp) |e| {
        const dims = [_][2]usize{ .{ inter, lam }, .{ inter, lam }, .{ lam, inter } };
        for (0..3) |m| {
            const rows = dims[m][0];
            const cols = dims[m][1];
            mats[e][2 * m] = try alloc.alloc(u8, rows * cols / 2);
            mats[e][2 * m + 1] = try alloc.alloc(u8, rows * cols / 32);
            for (mats[e][2 * m]) |*b| b.* = rnd.int(u8);
            for (mats[e][2 * m + 1]) |*s| s.* = rnd.intRangeAtMost(u8, 122, 128);
        }
    }
    defer for (0..n_exp) |e| for (0..6) |m| alloc.free(mats[e][m]);
    var z: [T * lam]f32 = undefined;
    for (&z) |*v| v.* = rnd.floatNorm(f32);
    const sel = [_]usize{ 2, 0, 1, 2 };
    const wts = [_]f32{ 0.7, 0.3, 0.6, 0.4 };
    var ptrs: [T * k]ExpertPtrs = undefined;
    for (sel, 0..) |e, i| ptrs[i] = .{ .w1_packed = mats[e][0].ptr, .w1_scale = mats[e][1].ptr, .w3_packed = mats[e][2].ptr, .w3_scale = mats[e][3].ptr, .w2_packed = mats[e][4].ptr, .w2_scale = mats[e][5].ptr };
    var acc: [T * lam]f32 = undefined;
    _ = try routed(&z, &ptrs, &wts, &acc, .{ .tokens = T, .k = k, .lam = lam, .inter = inter, .beta1 = 4, .beta2 = 25 });
    for (0..T) |tok| {
        var want = [_]f32{0} ** lam;
        for (0..k) |j| {
            const e = sel[tok * k + j];
            var g: [inter]f32 = undefined;
            var u: [inter]f32 = undefined;
            var h: [inter]f32 = undefined;
            var d: [lam]f32 = undefined;
            _ = try mx.matmul(mats[e][0].ptr, mats[e][1].ptr, inter, lam, z[tok * lam ..].ptr, &g, 1);
            _ = try mx.matmul(mats[e][2].ptr, mats[e][3].ptr, inter, lam, z[tok * lam ..].ptr, &u, 1);
            try situ.situGlu(&g, &u, &h, inter, 4, 25);
            _ = try mx.matmul(mats[e][4].ptr, mats[e][5].ptr, lam, inter, &h, &d, 1);
            for (0..lam) |i| want[i] = want[i] + wts[tok * k + j] * d[i];
        }
        try testing.expectEqualSlices(u32, @ptrCast(&want), @ptrCast(acc[tok * lam ..][0..lam]));
    }
}
