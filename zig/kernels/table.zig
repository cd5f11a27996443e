//! The kernels module's root: every operator family, and `table`, the entry points of this
//! compilation of them.
//!
//! The kernels are compiled once per variant (zig/isa/dispatch.zig lists them): the library's
//! own compilation for the portable baseline (and the scalar reference, a runtime switch of
//! that compilation), and a separate object per wider ISA (zig/isa/x86_64_v4.zig) built from
//! these same files for another CPU. Each compilation publishes its `table`; zig/abi.zig calls
//! through the table the variant in use points at. Every variant computes the same bits: the
//! summation orders documented in each file are the contract (model.md §8.3); only how fast
//! a variant gets there differs.
//!
//! The table crosses compilations, so it is an extern struct of C-callable functions taking
//! plain pointers and integers (arguments already unwrapped and null-checked by zig/abi.zig)
//! and returning a `Result` code instead of a Zig error.
const std = @import("std");

pub const common = @import("common.zig");
pub const numerics = @import("numerics.zig");
pub const matvec_bf16 = @import("matvec_bf16.zig");
pub const matvec_mxfp4 = @import("matvec_mxfp4.zig");
pub const norm = @import("norm.zig");
pub const situ = @import("situ.zig");
pub const conv = @import("conv.zig");
pub const kda = @import("kda.zig");
pub const mla = @import("mla.zig");
pub const attnres = @import("attnres.zig");
pub const router = @import("router.zig");
pub const moe = @import("moe.zig");
pub const bandwidth = @import("bandwidth.zig");
pub const fma_peak = @import("fma_peak.zig");
pub const matvec_i8r = @import("matvec_i8r.zig");

/// An entry point's outcome (the ABI layer maps it to a status code).
pub const Result = enum(u32) { ok = 0, bad_argument = 1, out_of_memory = 2 };

fn result(r: common.Error!void) Result {
    r catch |err| return switch (err) {
        error.BadArgument => .bad_argument,
        error.OutOfMemory => .out_of_memory,
    };
    return .ok;
}

fn counted(r: common.Error!u64, out: *u64) Result {
    out.* = r catch |err| return result(err);
    return .ok;
}

pub const Table = extern struct {
    /// Selects this compilation's scalar reference (`scalar` ≠ 0) or its SIMD code.
    set_scalar: *const fn (scalar: u32) callconv(.c) void,
    matmul_bf16: *const fn (w: [*]const u16, rows: u32, cols: u32, x: [*]const f32, y: [*]f32, tokens: u32) callconv(.c) Result,
    matmul_f32: *const fn (w: [*]const f32, rows: u32, cols: u32, x: [*]const f32, y: [*]f32, tokens: u32) callconv(.c) Result,
    matmul_mxfp4: *const fn (packed_w: [*]const u8, scales: [*]const u8, rows: u32, cols: u32, x: [*]const f32, y: [*]f32, tokens: u32, bad_scales: *u64) callconv(.c) Result,
    rmsnorm: *const fn (x: [*]const f32, w: ?[*]const f32, y: [*]f32, rows: u32, n: u32, eps: f32) callconv(.c) Result,
    l2norm: *const fn (x: [*]const f32, y: [*]f32, rows: u32, n: u32) callconv(.c) Result,
    elementwise: *const fn (op: situ.Op, x: [*]const f32, g: ?[*]const f32, y: [*]f32, count: u32, a: f32, b: f32) callconv(.c) Result,
    shortconv: *const fn (x: [*]const f32, taps: [*]const f32, hist: ?[*]f32, y: [*]f32, tokens: u32, channels: u32, kc: u32) callconv(.c) Result,
    kda_decay: *const fn (z: [*]const f32, a_log: [*]const f32, dt_bias: [*]const f32, alpha: [*]f32, g_out: ?[*]f32, tokens: u32, heads: u32, head_dim: u32, gmin: f32) callconv(.c) Result,
    kda_recurrence: *const fn (q: [*]const f32, k: [*]const f32, v: [*]const f32, alpha: [*]const f32, beta: [*]const f32, state: [*]f32, o: [*]f32, tokens: u32, heads: u32, head_dim: u32, q_scale: f32) callconv(.c) Result,
    kda_gated_norm: *const fn (o: [*]const f32, w: [*]const f32, gate: [*]const f32, y: [*]f32, tokens: u32, heads: u32, head_dim: u32, eps: f32) callconv(.c) Result,
    mla_attention: *const fn (q: [*]const f32, w: *const anyopaque, w_dtype: mla.Dtype, ckv: [*]const f32, kr: [*]const f32, out: [*]f32, tokens: u32, pos0: u32, shape: *const mla.Shape) callconv(.c) Result,
    attnres: *const fn (sources: [*]const [*]const f32, n: u32, phi: [*]const f32, out: [*]f32, probs: ?[*]f32, tokens: u32, e: u32, eps: f32) callconv(.c) Result,
    router: *const fn (w: *const anyopaque, w_dtype: router.Dtype, bias: [*]const f32, x: [*]const f32, tokens: u32, params: *const router.Params, idx: [*]u32, weights: [*]f32, scores: ?[*]f32) callconv(.c) Result,
    moe_routed: *const fn (z: [*]const f32, experts: [*]const moe.ExpertPtrs, weights: [*]const f32, acc: [*]f32, params: *const moe.Params, bad_scales: *u64) callconv(.c) Result,
    /// The FMA-peak probe at this compilation's widest vectors (`flops` receives the count).
    fma_peak: *const fn (steps: u64, flops: *u64) callconv(.c) Result,
    /// The int8 draft container (matvec_i8r.zig).
    matmul_i8r: *const fn (w: [*]const u8, rows: u32, cols: u32, x: [*]const f32, y: [*]f32, tokens: u32) callconv(.c) Result,
    dequant_i8r: *const fn (src: [*]const u8, rows: u32, cols: u32, dst: [*]f32) callconv(.c) Result,
    quantize_i8r: *const fn (src: [*]const u16, rows: u32, cols: u32, dst: [*]u8, nonfinite: *u64) callconv(.c) Result,
};

/// This compilation's entry points.
pub const table = Table{
    .set_scalar = struct {
        fn f(scalar: u32) callconv(.c) void {
            common.setPath(if (scalar != 0) .scalar else .simd);
        }
    }.f,
    .matmul_bf16 = struct {
        fn f(w: [*]const u16, rows: u32, cols: u32, x: [*]const f32, y: [*]f32, tokens: u32) callconv(.c) Result {
            return result(matvec_bf16.matmul(u16, w, rows, cols, x, y, tokens));
        }
    }.f,
    .matmul_f32 = struct {
        fn f(w: [*]const f32, rows: u32, cols: u32, x: [*]const f32, y: [*]f32, tokens: u32) callconv(.c) Result {
            return result(matvec_bf16.matmul(f32, w, rows, cols, x, y, tokens));
        }
    }.f,
    .matmul_mxfp4 = struct {
        fn f(packed_w: [*]const u8, scales: [*]const u8, rows: u32, cols: u32, x: [*]const f32, y: [*]f32, tokens: u32, bad_scales: *u64) callconv(.c) Result {
            return counted(matvec_mxfp4.matmul(packed_w, scales, rows, cols, x, y, tokens), bad_scales);
        }
    }.f,
    .rmsnorm = struct {
        fn f(x: [*]const f32, w: ?[*]const f32, y: [*]f32, rows: u32, n: u32, eps: f32) callconv(.c) Result {
            return result(norm.rmsnorm(x, w, y, rows, n, eps));
        }
    }.f,
    .l2norm = struct {
        fn f(x: [*]const f32, y: [*]f32, rows: u32, n: u32) callconv(.c) Result {
            return result(norm.l2norm(x, y, rows, n));
        }
    }.f,
    .elementwise = struct {
        fn f(op: situ.Op, x: [*]const f32, g: ?[*]const f32, y: [*]f32, count: u32, a: f32, b: f32) callconv(.c) Result {
            return result(situ.elementwise(op, x, g, y, count, a, b));
        }
    }.f,
    .shortconv = struct {
        fn f(x: [*]const f32, taps: [*]const f32, hist: ?[*]f32, y: [*]f32, tokens: u32, channels: u32, kc: u32) callconv(.c) Result {
            return result(conv.shortconv(x, taps, hist, y, tokens, channels, kc));
        }
    }.f,
    .kda_decay = struct {
        fn f(z: [*]const f32, a_log: [*]const f32, dt_bias: [*]const f32, alpha: [*]f32, g_out: ?[*]f32, tokens: u32, heads: u32, head_dim: u32, gmin: f32) callconv(.c) Result {
            return result(kda.decay(z, a_log, dt_bias, alpha, g_out, tokens, heads, head_dim, gmin));
        }
    }.f,
    .kda_recurrence = struct {
        fn f(q: [*]const f32, k: [*]const f32, v: [*]const f32, alpha: [*]const f32, beta: [*]const f32, state: [*]f32, o: [*]f32, tokens: u32, heads: u32, head_dim: u32, q_scale: f32) callconv(.c) Result {
            return result(kda.recurrence(q, k, v, alpha, beta, state, o, tokens, heads, head_dim, q_scale));
        }
    }.f,
    .kda_gated_norm = struct {
        fn f(o: [*]const f32, w: [*]const f32, gate: [*]const f32, y: [*]f32, tokens: u32, heads: u32, head_dim: u32, eps: f32) callconv(.c) Result {
            return result(kda.gatedNorm(o, w, gate, y, tokens, heads, head_dim, eps));
        }
    }.f,
    .mla_attention = struct {
        fn f(q: [*]const f32, w: *const anyopaque, w_dtype: mla.Dtype, ckv: [*]const f32, kr: [*]const f32, out: [*]f32, tokens: u32, pos0: u32, shape: *const mla.Shape) callconv(.c) Result {
            return switch (w_dtype) {
                .bf16 => result(mla.attention(u16, q, @ptrCast(@alignCast(w)), ckv, kr, out, tokens, pos0, shape.*)),
                .f32 => result(mla.attention(f32, q, @ptrCast(@alignCast(w)), ckv, kr, out, tokens, pos0, shape.*)),
            };
        }
    }.f,
    .attnres = struct {
        fn f(sources: [*]const [*]const f32, n: u32, phi: [*]const f32, out: [*]f32, probs: ?[*]f32, tokens: u32, e: u32, eps: f32) callconv(.c) Result {
            return result(attnres.aggregate(sources, n, phi, out, probs, tokens, e, eps));
        }
    }.f,
    .router = struct {
        fn f(w: *const anyopaque, w_dtype: router.Dtype, bias: [*]const f32, x: [*]const f32, tokens: u32, params: *const router.Params, idx: [*]u32, weights: [*]f32, scores: ?[*]f32) callconv(.c) Result {
            return switch (w_dtype) {
                .bf16 => result(router.route(u16, @ptrCast(@alignCast(w)), bias, x, tokens, params.*, idx, weights, scores)),
                .f32 => result(router.route(f32, @ptrCast(@alignCast(w)), bias, x, tokens, params.*, idx, weights, scores)),
            };
        }
    }.f,
    .moe_routed = struct {
        fn f(z: [*]const f32, experts: [*]const moe.ExpertPtrs, weights: [*]const f32, acc: [*]f32, params: *const moe.Params, bad_scales: *u64) callconv(.c) Result {
            return counted(moe.routed(z, experts, weights, acc, params.*), bad_scales);
        }
    }.f,
    .fma_peak = struct {
        fn f(steps: u64, flops: *u64) callconv(.c) Result {
            return counted(fma_peak.fmaPeak(steps), flops);
        }
    }.f,
    .matmul_i8r = struct {
        fn f(w: [*]const u8, rows: u32, cols: u32, x: [*]const f32, y: [*]f32, tokens: u32) callconv(.c) Result {
            return result(matvec_i8r.matmul(w, rows, cols, x, y, tokens));
        }
    }.f,
    .dequant_i8r = struct {
        fn f(src: [*]const u8, rows: u32, cols: u32, dst: [*]f32) callconv(.c) Result {
            return result(matvec_i8r.dequant(src, rows, cols, dst));
        }
    }.f,
    .quantize_i8r = struct {
        fn f(src: [*]const u16, rows: u32, cols: u32, dst: [*]u8, nonfinite: *u64) callconv(.c) Result {
            return counted(matvec_i8r.quantize(src, rows, cols, dst), nonfinite);
        }
    }.f,
};

test {
    _ = numerics;
    _ = matvec_bf16;
    _ = matvec_mxfp4;
    _ = norm;
    _ = situ;
    _ = conv;
    _ = kda;
    _ = mla;
    _ = attnres;
    _ = router;
    _ = moe;
    _ = bandwidth;
    _ = fma_peak;
    _ = matvec_i8r;
}
