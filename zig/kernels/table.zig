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
//! plain pointers and integers (arguments already unwrapped and checked by zig/abi.zig) and
//! returning a `Result` code instead of a Zig error. It is derived from `entries`, the one
//! list of kernels, as the exports and the TypeScript declarations are (entry.zig).
const std = @import("std");

pub const common = @import("common.zig");
pub const numerics = @import("numerics.zig");
pub const matvec_bf16 = @import("matvec_bf16.zig");
pub const matvec_mxfp4 = @import("matvec_mxfp4.zig");
pub const norm = @import("norm.zig");
pub const elementwise = @import("elementwise.zig");
pub const conv = @import("conv.zig");
pub const kda = @import("kda.zig");
pub const mla = @import("mla.zig");
pub const attnres = @import("attnres.zig");
pub const router = @import("router.zig");
pub const bandwidth = @import("bandwidth.zig");
pub const fma_peak = @import("fma_peak.zig");
pub const matvec_i8r = @import("matvec_i8r.zig");

pub const entry = @import("entry.zig");
pub const Result = entry.Result;

/// Every kernel libk3 exports, declared once: `k3_<name>` calls the function of the same name
/// here in the variant in use. The signature is the whole declaration (entry.zig has the
/// rules); the comment is the contract. Common to all:
/// - Activations are f32 in native memory, row-major; "[T][n]" means T contiguous rows of n.
///   Weights are bf16 bit patterns (u16), f32, or MXFP4 (packed u8 + E8M0 scale u8), always
///   W[out][in]. Dimensions must be non-zero; pointers must be non-null unless their type is
///   optional. Violations return `bad_argument`; scratch growth failure returns
///   `out_of_memory`. Nothing is allocated per call once scratch has reached its high-water mark.
/// - One call covers T tokens where the operator allows; per-token arithmetic never depends on
///   T, on the thread count or on the scalar/SIMD path (model.md §8.4). Each kernel's summation
///   order is documented in its file.
/// - Outputs must not overlap inputs unless "in place allowed" is stated.
/// - The pool is driven from one thread (the JavaScript thread); calls do not nest.
pub const entries = struct {
    /// y[T][rows] = x[T][cols] · Wᵀ for bf16 W[rows][cols] (u16 bit patterns). f64 products and
    /// 16-lane accumulation, one f32 rounding. Bit-identical to matmul_f32 on the widened
    /// weights, and to T separate calls with T = 1.
    pub const matmul_bf16 = matvec_bf16.matmulBf16;
    /// As matmul_bf16 with f32 weights W[rows][cols].
    pub const matmul_f32 = matvec_bf16.matmulF32;
    /// y[T][rows] = x[T][cols] · Wᵀ straight from MXFP4: packed [rows][cols/2] (low nibble = even
    /// element), scales [rows][cols/32] (2^(s−127)); cols a multiple of 32. Scale byte 255 makes
    /// its group contribute zero; the count is how many such bytes the matrix has (once, not
    /// per token).
    pub const matmul_mxfp4 = matvec_mxfp4.matmul;
    /// Decodes one MXFP4 row of `cols` elements exactly into out[cols] (E2M1 × 2^(s−127) as f32;
    /// a 255 scale decodes to signed zeros and is counted).
    pub const mxfp4_decode_row = matvec_mxfp4.decodeRowChecked;
    /// RMSNorm of `rows` rows of n: y = f32(f32(w·x)·r), r = f32(1/sqrt(Σx²/n + eps)) with Σ in
    /// f64. `w` [n] is nullable (no gain: y = f32(x·r)). In place allowed (y = x).
    pub const rmsnorm = norm.rmsnorm;
    /// L2Norm of `rows` rows of n: y = f32(x·r), r = f32(1/sqrt(Σx² + 1e-6)) (SUM of squares).
    /// In place allowed.
    pub const l2norm = norm.l2norm;
    /// y[i] = op(x[i], g[i]) for i < count; in place allowed (y = x or y = g). The ops and which
    /// take g are elementwise.zig's `Op` and `takesSecond`; unused scalars a, b are ignored.
    pub const elementwise = elementwise_.elementwise;
    /// dst[i] = f32(src[i]) for bf16 bit patterns (exact 16-bit shift). Embedding rows, vectors.
    pub const widen_bf16 = common.widenBf16Checked;
    /// Depthwise causal ShortConv with SiLU over T tokens of `channels` channels: x, y [T][C];
    /// taps [C][kc] (the [C, 1, kc] tensor); hist [C][kc−1] previous raw inputs, oldest first,
    /// updated in place (nullable only when kc = 1). In place allowed (y = x). kc ≤ 16.
    pub const shortconv = conv.shortconv;
    /// KDA decay chain for T tokens: z [T][P] (W_fb·W_fa·x, before dt_bias), a_log [heads] (the
    /// first Hk values of A_log: one per HEAD), dt_bias [P] → alpha [T][P] = exp(gmin·σ(e^A·(z +
    /// dt_bias))) and, if g_out is non-null, the log-decay g [T][P]. P = heads·head_dim,
    /// head-major. In place allowed.
    pub const kda_decay = kda.decay;
    /// KDA delta-rule recurrence for T tokens in order: q, k [T][P] L2-normalised, v [T][P],
    /// alpha [T][P], beta [T][heads] (after σ), state [heads][D][D] (row = key channel) updated
    /// in place, o [T][P] out. q is multiplied by `q_scale` first (pass f32(D^−1/2), or 1 for q
    /// already scaled). Per token: decay, read u from the decayed state, write, output from the
    /// updated state. head_dim ≤ 512.
    pub const kda_recurrence = kda.recurrence;
    /// KDA output: y = RMSNorm per head (gain w [D] shared by all heads, eps) of o, then ⊙
    /// σ(gate); o, gate, y [T][P]. Norm first, then gate. In place allowed.
    pub const kda_gated_norm = kda.gatedNorm;
    /// Gated-MLA attention core (NoPE) over the latent cache, kv_b_proj absorbed (mla.zig has
    /// the canonical order, the layouts and the scratch), T queries at positions pos0 …
    /// pos0+T−1; w_dtype is mla.zig's `Dtype`. Causal. kr is nullable only when dr = 0.
    pub const mla_latent_attention = mla.latentAttention;
    /// Attention-Residuals aggregation for T tokens: `sources` is an array of n addresses, each
    /// of a [T][e] f32 buffer (block list in push order, partial sum last); phi [e] = norm ⊙
    /// proj; out [T][e]; probs [T][n] (nullable) receives the softmax weights. n ≤ 64.
    pub const attnres = attnres_.aggregateList;
    /// MoE router for T tokens: w [experts][e] (router.zig `Dtype`); bias [experts]; x [T][e]
    /// (the full-width normalised hidden). Writes idx [T][k] (selection order: descending
    /// biased score, ties to the lowest index), weights [T][k] (unbiased σ scores, renormalised
    /// if `renormalize` ≠ 0, times rho) and, if non-null, scores [T][experts] (σ of every
    /// logit). k ≤ 256.
    pub const router = router_.routeEntry;
    /// The int8 draft container I8R (matvec_i8r.zig): W[rows][cols] as rows of [f32
    /// scale][int8 × cols], `4 + cols` bytes a row, unaligned. y[T][rows] = x[T][cols] · Wᵀ
    /// with the weights f32(scale·q) in the order of matmul_bf16: bit-identical to matmul_f32
    /// on the dequant_i8r output, and to T separate calls with T = 1.
    pub const matmul_i8r = matvec_i8r.matmul;
    /// dst[rows][cols] = f32(scale·q) of I8R rows: the weights matmul_i8r multiplies by (for
    /// the kernels that read a matrix in bf16 or f32 only: the router, kv_b_proj).
    pub const dequant_i8r = matvec_i8r.dequant;
    /// bf16 W[rows][cols] → I8R rows (rows · (4 + cols) bytes at dst): per-row absmax / 127
    /// scale, round half to even, clipped to [−127, 127]. The count is how many weights were
    /// NaN or infinite (stored as 0; k3 refuses such a tensor).
    pub const quantize_i8r = matvec_i8r.quantize;
    /// Bench and test only, a machine probe: wrapping sum of the bytes/8 u64 words at `ptr`
    /// (8-byte aligned), read once by all pool threads (memory read bandwidth).
    pub const mem_read_sum = bandwidth.readSum;
    /// Bench and test only, a machine probe: on every pool thread, `steps` rounds of 12
    /// independent f64 fused multiply-adds at this variant's widest vectors; the count is the
    /// f64 operations done (time the call for FLOP/s). `steps` a positive multiple of 16.
    pub const fma_peak = fma_peak_.fmaPeak;
};

const elementwise_ = elementwise;
const attnres_ = attnres;
const router_ = router;
const fma_peak_ = fma_peak;
const decls = @typeInfo(entries).@"struct".decls;

/// One compilation's entry points: a C-callable function per kernel of `entries`, in order.
pub const Table = blk: {
    var fields: [decls.len]std.builtin.Type.StructField = undefined;
    for (decls, 0..) |d, i| {
        const F = *const entry.CFn(entry.tableParams(@field(entries, d.name)), Result);
        fields[i] = .{ .name = d.name, .type = F, .default_value_ptr = null, .is_comptime = false, .alignment = @alignOf(F) };
    }
    break :blk @Type(.{ .@"struct" = .{ .layout = .@"extern", .fields = &fields, .decls = &.{}, .is_tuple = false } });
};

/// This compilation's entry points.
pub const table: Table = blk: {
    var t: Table = undefined;
    for (decls) |d| @field(t, d.name) = entry.tableEntry(@field(entries, d.name));
    break :blk t;
};

test {
    _ = numerics;
    _ = matvec_bf16;
    _ = matvec_mxfp4;
    _ = norm;
    _ = elementwise;
    _ = conv;
    _ = kda;
    _ = mla;
    _ = attnres;
    _ = router;
    _ = entry;
    _ = bandwidth;
    _ = fma_peak;
    _ = matvec_i8r;
}
