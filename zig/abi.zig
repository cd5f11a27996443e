//! The exported C ABI of libk3: the only file with `export fn`.
//!
//! Every function here is thin: it checks its arguments and calls into zig/io or zig/kernels.
//! src/native/abi.ts mirrors this file one to one (functions and shared constants);
//! test/unit/abi.test.ts compares the two, so change both together.
//!
//! Conventions:
//! - Status codes are i32: 0 is success, a negative value is an error. Values in
//!   -1 .. -4095 are a negated errno from the OS; the named codes (status.zig) are k3's own.
//! - Buffers are passed as (pointer, byte length). Large buffers are allocated here with
//!   `k3_alloc` (aligned for O_DIRECT) and freed with `k3_free`.
const std = @import("std");
const aligned_read = @import("io/aligned_read.zig");
const reader_pool = @import("io/reader_pool.zig");
const signals = @import("signals.zig");
const status = @import("status.zig");
const platform = @import("platform");
const trunk_code = @import("codec/bf16_planes.zig");

pub const abi_version: u32 = 10;

pub const Status = status.Status;
const code = status.code;

export fn k3_abi_version() u32 {
    return abi_version;
}

/// Allocation alignment: enough for O_DIRECT and for any SIMD load.
export fn k3_alloc_alignment() u64 {
    return aligned_read.alignment;
}

/// `k3_alloc` flags: zero-fill the memory (state that must start at zero); advise transparent
/// huge pages for large buffers (weights, slots, arenas), which cuts page faults on first touch.
pub const alloc_zero: u32 = 1;
pub const alloc_huge: u32 = 2;
/// Buffers at least this large are 2 MB-aligned when huge pages are asked for.
const huge_page_bytes: u64 = 2 * 1024 * 1024;

/// `k3_alloc_alignment()`-aligned native memory (2 MB-aligned for large buffers with
/// `alloc_huge`), zero-filled only with `alloc_zero`; null on failure.
export fn k3_alloc(bytes: u64, flags: u32) ?[*]u8 {
    if (bytes == 0) return null;
    const huge = flags & alloc_huge != 0 and bytes >= huge_page_bytes;
    const alignment: u64 = if (huge) huge_page_bytes else aligned_read.alignment;
    const ptr = platform.alignedAlloc(alignment, bytes) orelse return null;
    const out: [*]u8 = @ptrCast(ptr);
    if (huge and comptime @import("builtin").os.tag == .linux) _ = std.c.madvise(@alignCast(ptr), bytes / huge_page_bytes * huge_page_bytes, std.c.MADV.HUGEPAGE);
    if (flags & alloc_zero != 0) @memset(out[0..bytes], 0);
    return out;
}

export fn k3_free(ptr: ?[*]u8) void {
    if (ptr) |p| platform.alignedFree(p);
}

/// Buffer capacity needed to read `len` bytes at an arbitrary offset with `k3_file_read`.
export fn k3_read_capacity(len: u64) u64 {
    return aligned_read.capacityFor(len);
}

/// Opens `path` read-only. Returns the descriptor (>= 0) or a negated errno.
/// `direct_out` is set to 1 when O_DIRECT is in use, 0 when the filesystem refused it.
export fn k3_file_open(path: [*:0]const u8, direct_out: *u32) i32 {
    var errno: c_int = 0;
    const file = aligned_read.File.open(path, &errno) orelse return -errno;
    direct_out.* = @intFromBool(file.direct);
    return file.fd;
}

export fn k3_file_close(fd: i32) void {
    if (fd >= 0) platform.close(fd);
}

/// Reads [offset, offset + len) of `fd` into `buf` (capacity `cap` bytes, aligned by
/// `k3_alloc`). On success returns 0 and sets `payload_out` to the payload's offset in `buf`.
/// `direct_io` is in/out: pass what `k3_file_open` said; it comes back 0 if this read had to
/// fall back to buffered I/O (the caller then says so once and keeps passing 0).
export fn k3_file_read(fd: i32, direct_io: *u32, offset: u64, len: u64, buf: ?[*]u8, cap: u64, payload_out: *u64) i32 {
    const dst = buf orelse return code(.bad_argument);
    if (fd < 0 or len == 0) return code(.bad_argument);
    var file = aligned_read.File{ .fd = fd, .direct = direct_io.* != 0 };
    const payload = file.read(offset, len, dst[0..cap]) catch |err| return switch (err) {
        error.Io => -file.last_errno,
        error.Short => code(.short_read),
        error.Capacity => code(.capacity),
    };
    direct_io.* = @intFromBool(file.direct);
    payload_out.* = payload;
    return code(.ok);
}

/// Starts the background I/O threads (0 = the default count); returns how many run.
/// Idempotent: the first call decides the count.
export fn k3_io_init(threads: u32) i32 {
    const n = reader_pool.init(threads) catch return code(.out_of_memory);
    return @intCast(n);
}

/// Queues a background read with the semantics of `k3_file_read`. Returns a job handle (>= 0)
/// or a negative status (-10005: the job table is full). `buf` must stay untouched until
/// `k3_io_wait` returns for the handle.
export fn k3_io_submit(fd: i32, direct_io: u32, offset: u64, len: u64, buf: ?[*]u8, cap: u64) i32 {
    return reader_pool.submit(fd, direct_io != 0, offset, len, buf orelse return code(.bad_argument), cap);
}

/// Waits for a background read. Returns its status (0, a negated errno, or a k3 status) and
/// sets the payload offset in the buffer, the device time in nanoseconds, and whether the file
/// still reads with O_DIRECT (0 after a fallback).
export fn k3_io_wait(handle: i32, payload_out: *u64, nanos_out: *u64, direct_out: *u32) i32 {
    const result = reader_pool.wait(handle) orelse return code(.bad_argument);
    payload_out.* = result.payload;
    nanos_out.* = result.nanos;
    direct_out.* = @intFromBool(result.still_direct);
    return result.status;
}

/// 1 once a background read has finished (collect it with `k3_io_wait`), else 0.
export fn k3_io_done(handle: i32) u32 {
    return @intFromBool(reader_pool.isDone(handle));
}

/// From now on SIGINT and SIGTERM only record themselves (zig/signals.zig): the caller polls
/// `k3_signal_pending` and stops its work. A second signal ends the process. Returns 0.
export fn k3_signals_watch() i32 {
    signals.watch();
    return 0;
}

/// The signal that arrived since `k3_signals_watch` (SIGINT 2, SIGTERM 15), or 0.
export fn k3_signal_pending() i32 {
    return signals.pendingSignal();
}

/// The compressed trunk's code (zig/codec/bf16_planes.zig has the format): worst-case stored
/// bytes of a layer of `payload` bytes in blocks of `block_bytes`; 0 for a bad argument.
export fn k3_trunk_code_bound(payload: u64, block_bytes: u32) u64 {
    if (payload == 0 or block_bytes < trunk_code.min_block_bytes or block_bytes > trunk_code.max_block_bytes) return 0;
    return trunk_code.bound(payload, block_bytes);
}

/// Codes layer `layer`'s `len` payload bytes at `src` into `dst` (capacity `cap`, at least
/// `k3_trunk_code_bound`): its block table, then its blocks. Sets `stored_out` to the stored
/// length. Runs on the compute pool; the bytes do not depend on the thread count.
export fn k3_trunk_encode(src: ?[*]const u8, len: u64, block_bytes: u32, layer: u32, dst: ?[*]u8, cap: u64, stored_out: *u64) i32 {
    const s = src orelse return code(.bad_argument);
    const d = dst orelse return code(.bad_argument);
    const stored = trunk_code.encode(std.heap.c_allocator, s[0..len], block_bytes, layer, d[0..cap]) catch |err| return switch (err) {
        error.OutOfMemory => code(.out_of_memory),
        error.BadArgument, error.Damaged => code(.bad_argument),
    };
    stored_out.* = stored;
    return code(.ok);
}

/// Decodes blocks `first` .. `first + count − 1` of layer `layer` on the compute pool: `table`
/// holds their `count` table entries, `src` (`src_len` bytes) their stored bytes, which start at
/// offset `src_base` of the layer's stored bytes; `dst` (`dst_len` bytes) receives their decoded
/// bytes. `verify` ≠ 0 checks each block's checksum too. Returns `damaged` with the lowest
/// damaged block's index in `damaged_out` when an entry, a header, a length or (verifying) a
/// checksum is wrong: nothing in `src` is trusted.
export fn k3_trunk_decode(table: ?[*]const u8, count: u32, first: u64, layer: u32, src: ?[*]const u8, src_len: u64, src_base: u64, dst: ?[*]u8, dst_len: u64, block_bytes: u32, verify: u32, damaged_out: *u64) i32 {
    const t = table orelse return code(.bad_argument);
    const s = src orelse return code(.bad_argument);
    const d = dst orelse return code(.bad_argument);
    if (count == 0 or dst_len == 0) return code(.bad_argument);
    const run = trunk_code.Blocks{
        .table = t[0 .. @as(usize, count) * trunk_code.entry_bytes], .first = first, .layer = layer, .src = s[0..src_len], .src_base = src_base,
        .dst = d[0..dst_len], .block_bytes = block_bytes, .verify = verify != 0,
    };
    trunk_code.decode(&run, damaged_out) catch |err| return switch (err) {
        error.Damaged => code(.damaged),
        error.BadArgument => code(.bad_argument),
        error.OutOfMemory => code(.out_of_memory),
    };
    return code(.ok);
}

test {
    _ = aligned_read;
    _ = signals;
    _ = trunk_code;
}

// =============================================================================================
// Kernels: numeric operators of the forward pass, the compute thread pool; at the end, the
// bench/test-only machine probes.
// Everything above this line is the I/O section.
//
// Common contract for every kernel export below:
// - Activations are f32 in native memory, row-major; "[T][n]" means T contiguous rows of n.
//   Weights are bf16 bit patterns (u16), f32, or MXFP4 (packed u8 + E8M0 scale u8), always
//   W[out][in]. Dimensions are u32 and must be non-zero; pointers must be non-null unless
//   marked "nullable". Violations return `bad_argument`; scratch growth failure returns
//   `out_of_memory`. Nothing is allocated per call once scratch has reached its high-water mark.
// - One call covers T tokens where the operator allows; per-token arithmetic never depends on
//   T, on the thread count or on the scalar/SIMD path (model.md §8.4). Each kernel's summation
//   order is documented in its zig/kernels/*.zig file.
// - Outputs must not overlap inputs unless "in place allowed" is stated.
// - The pool is driven from one thread (the JavaScript thread); calls do not nest.
// =============================================================================================

// `pub` only so Zig-side experiments (e.g. a bench harness built with -M) can reach the kernels.
pub const pool = @import("pool");
pub const kernels = @import("kernels");
pub const dispatch = @import("isa/dispatch.zig");
const kcommon = kernels.common;
const matvec_mxfp4 = kernels.matvec_mxfp4;
const situ = kernels.situ;
const mla = kernels.mla;
const attnres = kernels.attnres;
const router = kernels.router;
const moe = kernels.moe;

// The one pool, as the kernel variants compiled for other CPUs reach it (zig/isa/pool_proxy.zig):
// a hidden symbol, resolved when libk3 is linked and invisible outside it.
comptime {
    @export(&pool.api, .{ .name = "k3_pool_api", .visibility = .hidden });
}

fn kstatus(result: kernels.Result) i32 {
    return switch (result) {
        .ok => code(.ok),
        .bad_argument => code(.bad_argument),
        .out_of_memory => code(.out_of_memory),
    };
}

/// Maps a count result (MXFP4 bad-scale tallies) to a status and stores the count.
fn kcount(result: kernels.Result, n: u64, out: ?*u64) i32 {
    if (result == .ok) if (out) |o| {
        o.* = n;
    };
    return kstatus(result);
}

/// The variant every kernel below runs (zig/isa/dispatch.zig).
inline fn variant() *const dispatch.Table {
    return dispatch.active();
}

/// Starts (or resizes) the compute pool: `threads` workers including the calling thread;
/// 0 means one per CPU this process may run on. k3 passes K3_THREADS here from TypeScript.
/// Results are bit-identical for any count. Without a call, the first kernel starts the pool
/// at the default size.
export fn k3_pool_init(threads: u32) i32 {
    if (threads > pool.max_threads) return code(.bad_argument);
    pool.init(threads) catch |err| return switch (err) {
        error.OutOfMemory => code(.out_of_memory),
        error.SystemResources => code(.out_of_memory),
    };
    return code(.ok);
}

/// Current compute thread count (starting the pool at its default size if needed).
export fn k3_pool_threads() u32 {
    return pool.threadCount();
}

/// Test hook: `on` ≠ 0 splits every parallel job into one-item chunks (whatever its size), so
/// small test inputs exercise every thread; results must not change. Off by default.
export fn k3_pool_fine_grain(on: u32) void {
    pool.setFineGrain(on != 0);
}

/// Kernel variants (`Isa` codes, zig/isa/dispatch.zig): 0 scalar reference, 1 x86-64-v3
/// (AVX2 + FMA, the portable baseline on x86-64), 2 x86-64-v4 (AVX-512), 3 aarch64 NEON.
/// Every variant gives the same bits (model.md §8.3 orders); they differ only in speed.
pub const Isa = dispatch.Isa;

/// Switches every later kernel call to variant `isa` (process-wide; not while a kernel runs).
/// `unsupported` when this library was built without it or this CPU lacks its instructions.
export fn k3_isa_select(isa: u32) i32 {
    const v = std.meta.intToEnum(Isa, isa) catch return code(.bad_argument);
    dispatch.select(v) catch return code(.unsupported);
    return code(.ok);
}

/// The variant the kernels run now (the widest supported one until `k3_isa_select`).
export fn k3_isa_current() u32 {
    return @intFromEnum(dispatch.current());
}

/// Whether variant `isa` can run here (`Support`): 0 not built into this library, 1 built in
/// but this CPU lacks its instructions, 2 runnable. An unknown code answers 0.
export fn k3_isa_support(isa: u32) u32 {
    const v = std.meta.intToEnum(Isa, isa) catch return @intFromEnum(dispatch.Support.absent);
    return @intFromEnum(dispatch.support(v));
}

pub const Support = dispatch.Support;

/// y[T][rows] = x[T][cols] · Wᵀ for bf16 W[rows][cols] (u16 bit patterns). f64 products and
/// 16-lane accumulation, one f32 rounding (matvec_bf16.zig). Bit-identical to k3_matmul_f32
/// on the widened weights, and to T separate calls with T = 1.
export fn k3_matmul_bf16(w: ?[*]const u16, rows: u32, cols: u32, x: ?[*]const f32, y: ?[*]f32, tokens: u32) i32 {
    return kstatus(variant().matmul_bf16(w orelse return code(.bad_argument), rows, cols, x orelse return code(.bad_argument), y orelse return code(.bad_argument), tokens));
}

/// As k3_matmul_bf16 with f32 weights W[rows][cols].
export fn k3_matmul_f32(w: ?[*]const f32, rows: u32, cols: u32, x: ?[*]const f32, y: ?[*]f32, tokens: u32) i32 {
    return kstatus(variant().matmul_f32(w orelse return code(.bad_argument), rows, cols, x orelse return code(.bad_argument), y orelse return code(.bad_argument), tokens));
}

/// y[T][rows] = x[T][cols] · Wᵀ straight from MXFP4: packed [rows][cols/2] (low nibble = even
/// element), scales [rows][cols/32] (2^(s−127)); cols a multiple of 32. Scale byte 255 makes
/// its group contribute zero; `bad_scales_out` (nullable) receives how many such bytes the
/// matrix has (counted once, not per token).
export fn k3_matmul_mxfp4(packed_w: ?[*]const u8, scales: ?[*]const u8, rows: u32, cols: u32, x: ?[*]const f32, y: ?[*]f32, tokens: u32, bad_scales_out: ?*u64) i32 {
    var bad: u64 = 0;
    return kcount(variant().matmul_mxfp4(packed_w orelse return code(.bad_argument), scales orelse return code(.bad_argument), rows, cols, x orelse return code(.bad_argument), y orelse return code(.bad_argument), tokens, &bad), bad, bad_scales_out);
}

/// Decodes one MXFP4 row of `cols` elements exactly into out[cols] (E2M1 × 2^(s−127) as f32;
/// a 255 scale decodes to signed zeros and is counted into `bad_scales_out`, nullable).
export fn k3_mxfp4_decode_row(packed_row: ?[*]const u8, scales_row: ?[*]const u8, cols: u32, out: ?[*]f32, bad_scales_out: ?*u64) i32 {
    const p = packed_row orelse return code(.bad_argument);
    const s = scales_row orelse return code(.bad_argument);
    const o = out orelse return code(.bad_argument);
    if (cols == 0 or cols % matvec_mxfp4.group != 0) return code(.bad_argument);
    const bad = matvec_mxfp4.decodeRow(p[0 .. cols / 2], s[0 .. cols / matvec_mxfp4.group], o[0..cols]);
    if (bad_scales_out) |b| b.* = bad;
    return code(.ok);
}

/// RMSNorm of `rows` rows of n: y = f32(f32(w·x)·r), r = f32(1/sqrt(Σx²/n + eps)) with Σ in
/// f64. `w` [n] is nullable (no gain: y = f32(x·r)). In place allowed (y = x).
export fn k3_rmsnorm(x: ?[*]const f32, w: ?[*]const f32, y: ?[*]f32, rows: u32, n: u32, eps: f32) i32 {
    return kstatus(variant().rmsnorm(x orelse return code(.bad_argument), w, y orelse return code(.bad_argument), rows, n, eps));
}

/// L2Norm of `rows` rows of n: y = f32(x·r), r = f32(1/sqrt(Σx² + 1e-6)) (SUM of squares).
/// In place allowed.
export fn k3_l2norm(x: ?[*]const f32, y: ?[*]f32, rows: u32, n: u32) i32 {
    return kstatus(variant().l2norm(x orelse return code(.bad_argument), y orelse return code(.bad_argument), rows, n));
}

/// y[i] = op(x[i], g[i]) for i < count; in place allowed (y = x or y = g). Ops (situ.zig `Op`):
///   0 exp(x)   1 σ(x)   2 tanh(x)   3 x·σ(x)   4 ln(1+e^x)   (g unused, nullable)
///   5 x·σ(g)   (gate; KDA's gate after o_norm is k3_kda_gated_norm, MLA's gate is this)
///   6 x + g    7 x + f32(a·g)    8 SiTU-GLU(gate = x, up = g) with β1 = a, β2 = b
/// Unused scalars a, b are ignored.
export fn k3_elementwise(op: u32, x: ?[*]const f32, g: ?[*]const f32, y: ?[*]f32, count: u32, a: f32, b: f32) i32 {
    const o = std.meta.intToEnum(situ.Op, op) catch return code(.bad_argument);
    return kstatus(variant().elementwise(o, x orelse return code(.bad_argument), g, y orelse return code(.bad_argument), count, a, b));
}

/// dst[i] = f32(src[i]) for bf16 bit patterns (exact 16-bit shift). Embedding rows, vectors.
export fn k3_widen_bf16(src: ?[*]const u16, dst: ?[*]f32, count: u32) i32 {
    if (count == 0) return code(.bad_argument);
    kcommon.widenBf16(src orelse return code(.bad_argument), dst orelse return code(.bad_argument), count);
    return code(.ok);
}

/// Depthwise causal ShortConv with SiLU over T tokens of `channels` channels: x, y [T][C];
/// taps [C][kc] (the [C, 1, kc] tensor); hist [C][kc−1] previous raw inputs, oldest first,
/// updated in place (nullable only when kc = 1). In place allowed (y = x). kc ≤ 16.
export fn k3_shortconv(x: ?[*]const f32, taps: ?[*]const f32, hist: ?[*]f32, y: ?[*]f32, tokens: u32, channels: u32, kc: u32) i32 {
    return kstatus(variant().shortconv(x orelse return code(.bad_argument), taps orelse return code(.bad_argument), hist, y orelse return code(.bad_argument), tokens, channels, kc));
}

/// KDA decay chain for T tokens: z [T][P] (W_fb·W_fa·x, before dt_bias), a_log [heads] (the
/// first Hk values of A_log: one per HEAD), dt_bias [P] → alpha [T][P] = exp(gmin·σ(e^A·(z +
/// dt_bias))) and, if g_out is non-null, the log-decay g [T][P]. P = heads·head_dim,
/// head-major. In place allowed.
export fn k3_kda_decay(z: ?[*]const f32, a_log: ?[*]const f32, dt_bias: ?[*]const f32, alpha: ?[*]f32, g_out: ?[*]f32, tokens: u32, heads: u32, head_dim: u32, gmin: f32) i32 {
    return kstatus(variant().kda_decay(z orelse return code(.bad_argument), a_log orelse return code(.bad_argument), dt_bias orelse return code(.bad_argument), alpha orelse return code(.bad_argument), g_out, tokens, heads, head_dim, gmin));
}

/// KDA delta-rule recurrence for T tokens in order: q, k [T][P] L2-normalised, v [T][P],
/// alpha [T][P], beta [T][heads] (after σ), state [heads][D][D] (row = key channel) updated in
/// place, o [T][P] out. q is multiplied by `q_scale` first (pass f32(D^−1/2), or 1 for q
/// already scaled). Per token: decay, read u from the decayed state, write, output from the
/// updated state (kda.zig). head_dim ≤ 512.
export fn k3_kda_recurrence(q: ?[*]const f32, k: ?[*]const f32, v: ?[*]const f32, alpha: ?[*]const f32, beta: ?[*]const f32, state: ?[*]f32, o: ?[*]f32, tokens: u32, heads: u32, head_dim: u32, q_scale: f32) i32 {
    return kstatus(variant().kda_recurrence(q orelse return code(.bad_argument), k orelse return code(.bad_argument), v orelse return code(.bad_argument), alpha orelse return code(.bad_argument), beta orelse return code(.bad_argument), state orelse return code(.bad_argument), o orelse return code(.bad_argument), tokens, heads, head_dim, q_scale));
}

/// KDA output: y = RMSNorm per head (gain w [D] shared by all heads, eps) of o, then ⊙ σ(gate);
/// o, gate, y [T][P]. Norm first, then gate. In place allowed.
export fn k3_kda_gated_norm(o: ?[*]const f32, w: ?[*]const f32, gate: ?[*]const f32, y: ?[*]f32, tokens: u32, heads: u32, head_dim: u32, eps: f32) i32 {
    return kstatus(variant().kda_gated_norm(o orelse return code(.bad_argument), w orelse return code(.bad_argument), gate orelse return code(.bad_argument), y orelse return code(.bad_argument), tokens, heads, head_dim, eps));
}

/// Gated-MLA attention core (NoPE) over the latent cache, kv_b_proj absorbed (mla.zig has the
/// canonical order), T queries at positions pos0 … pos0+T−1:
///   q [T][H][dn+dr] (q_b_proj output); w = kv_b_proj [H·(dn+dv)][rank] as shipped, w_dtype
///   0 = bf16 bits, 1 = f32 (mla.zig `Dtype`), read in place; ckv [pos0+T][rank] (normalised
///   latents) and kr [pos0+T][dr] (shared rope-slot keys, raw) of every position, the new ones
///   already appended; out [T][H][dv]. Causal: query t attends to positions ≤ pos0+t. Scale
///   (dn+dr)^−1/2. kr is nullable only when dr = 0. Scratch (pool-owned, grows to the
///   high-water mark): shared H·(pos0+T) f32 + (8·⌈H/8⌉·(rank+dr) + H·rank) f64, and per
///   thread (H + 32)·rank f64.
export fn k3_mla_latent_attention(q: ?[*]const f32, w: ?*const anyopaque, w_dtype: u32, ckv: ?[*]const f32, kr: ?[*]const f32, out: ?[*]f32, tokens: u32, pos0: u32, heads: u32, dn: u32, dr: u32, dv: u32, rank: u32) i32 {
    if (dr > 0 and kr == null) return code(.bad_argument);
    const qp = q orelse return code(.bad_argument);
    const wp = w orelse return code(.bad_argument);
    const cp = ckv orelse return code(.bad_argument);
    const op = out orelse return code(.bad_argument);
    var none: [1]f32 = undefined;
    const krp = kr orelse &none;
    const shape = mla.Shape{ .heads = heads, .dn = dn, .dr = dr, .dv = dv, .rank = rank };
    const dtype = std.meta.intToEnum(mla.Dtype, w_dtype) catch return code(.bad_argument);
    return kstatus(variant().mla_attention(qp, wp, dtype, cp, krp, op, tokens, pos0, &shape));
}

/// Attention-Residuals aggregation for T tokens: `sources` is an array of n addresses, each of
/// a [T][e] f32 buffer (block list in push order, partial sum last); phi [e] = norm ⊙ proj;
/// out [T][e]; probs [T][n] (nullable) receives the softmax weights. n ≤ 64.
export fn k3_attnres(sources: ?[*]const ?[*]const f32, n: u32, phi: ?[*]const f32, out: ?[*]f32, probs: ?[*]f32, tokens: u32, e: u32, eps: f32) i32 {
    const list = sources orelse return code(.bad_argument);
    if (n == 0 or n > attnres.max_sources) return code(.bad_argument);
    for (list[0..n]) |s| if (s == null) return code(.bad_argument);
    return kstatus(variant().attnres(@ptrCast(list), n, phi orelse return code(.bad_argument), out orelse return code(.bad_argument), probs, tokens, e, eps));
}

/// MoE router for T tokens: w [experts][e] with w_dtype 0 = bf16 bits, 1 = f32; bias [experts];
/// x [T][e] (the full-width normalised hidden). Writes idx [T][k] (u32, selection order:
/// descending biased score, ties to the lowest index), weights [T][k] (unbiased σ scores,
/// renormalised if `renormalize` ≠ 0, times rho) and, if non-null, scores [T][experts] (σ of
/// every logit). k ≤ 256.
export fn k3_router(w: ?*const anyopaque, w_dtype: u32, bias: ?[*]const f32, x: ?[*]const f32, tokens: u32, experts: u32, e: u32, k: u32, renormalize: u32, rho: f32, idx: ?[*]u32, weights: ?[*]f32, scores: ?[*]f32) i32 {
    const wp = w orelse return code(.bad_argument);
    const b = bias orelse return code(.bad_argument);
    const xp = x orelse return code(.bad_argument);
    const ip = idx orelse return code(.bad_argument);
    const wo = weights orelse return code(.bad_argument);
    const params = router.Params{ .experts = experts, .e = e, .k = k, .renormalize = renormalize != 0, .rho = rho };
    const dtype = std.meta.intToEnum(router.Dtype, w_dtype) catch return code(.bad_argument);
    return kstatus(variant().router(wp, dtype, b, xp, tokens, &params, ip, wo, scores));
}

/// Routed experts of a LatentMoE block for T tokens: z [T][lam] (routed_expert_down_proj
/// output); experts: [T][k] records of six addresses (w1 packed, w1 scale, w3 packed,
/// w3 scale, w2 packed, w2 scale; w1 = gate [inter][lam], w3 = up, w2 = down [lam][inter]);
/// weights [T][k] (router weights, same order). acc [T][lam] is overwritten with
/// Σ_j w_j · W2(SiTU(W1 z, W3 z)) accumulated in f32 in top-k order. bad_scales_out nullable.
export fn k3_moe_routed(z: ?[*]const f32, experts: ?[*]const moe.ExpertPtrs, weights: ?[*]const f32, acc: ?[*]f32, tokens: u32, k: u32, lam: u32, inter: u32, beta1: f32, beta2: f32, bad_scales_out: ?*u64) i32 {
    const list = experts orelse return code(.bad_argument);
    const params = moe.Params{ .tokens = tokens, .k = k, .lam = lam, .inter = inter, .beta1 = beta1, .beta2 = beta2 };
    var bad: u64 = 0;
    return kcount(variant().moe_routed(z orelse return code(.bad_argument), list, weights orelse return code(.bad_argument), acc orelse return code(.bad_argument), &params, &bad), bad, bad_scales_out);
}

/// The int8 draft container I8R (zig/kernels/matvec_i8r.zig): W[rows][cols] as rows of
/// [f32 scale][int8 × cols], `4 + cols` bytes a row, unaligned. y[T][rows] = x[T][cols] · Wᵀ with
/// the weights f32(scale·q), in the canonical order of k3_matmul_bf16: bit-identical to
/// k3_matmul_f32 on the k3_dequant_i8r output, and to T separate calls with T = 1.
export fn k3_matmul_i8r(w: ?[*]const u8, rows: u32, cols: u32, x: ?[*]const f32, y: ?[*]f32, tokens: u32) i32 {
    return kstatus(variant().matmul_i8r(w orelse return code(.bad_argument), rows, cols, x orelse return code(.bad_argument), y orelse return code(.bad_argument), tokens));
}

/// dst[rows][cols] = f32(scale·q) of I8R rows: the weights k3_matmul_i8r multiplies by (for
/// the kernels that read a matrix in bf16 or f32 only: the router, kv_b_proj).
export fn k3_dequant_i8r(src: ?[*]const u8, rows: u32, cols: u32, dst: ?[*]f32) i32 {
    return kstatus(variant().dequant_i8r(src orelse return code(.bad_argument), rows, cols, dst orelse return code(.bad_argument)));
}

/// bf16 W[rows][cols] → I8R rows (rows · (4 + cols) bytes at dst): per-row absmax / 127 scale,
/// round half to even, clipped to [−127, 127]. `nonfinite_out` (nullable) receives how many
/// weights were NaN or infinite (stored as 0; k3 refuses such a tensor).
export fn k3_quantize_i8r(src: ?[*]const u16, rows: u32, cols: u32, dst: ?[*]u8, nonfinite_out: ?*u64) i32 {
    var bad: u64 = 0;
    return kcount(variant().quantize_i8r(src orelse return code(.bad_argument), rows, cols, dst orelse return code(.bad_argument), &bad), bad, nonfinite_out);
}

// ---------------------------------------------------------------------------------------------
// Bench and test only: machine probes. They measure the limits bench/kernels.ts reports the
// kernels against (memory read bandwidth, FMA peak); the forward pass never calls them.

/// Bandwidth probe: wrapping sum of the bytes/8 u64 words at `ptr` (8-byte aligned), read
/// once by all pool threads. Returns 0 on a bad argument.
export fn k3_mem_read_sum(ptr: ?[*]const u8, bytes: u64) u64 {
    return kernels.bandwidth.readSum(ptr orelse return 0, bytes) catch 0;
}

/// 1 when this library was built with Zig's safety checks (libk3-safe, `zig build -Dsafe=true`:
/// bounds, overflow and the kernels' assertions), 0 for the shipped ReleaseFast build.
export fn k3_build_safe() u32 {
    return @intFromBool(std.debug.runtime_safety);
}

/// Test only, for proving that a failed check stops the process: asserts `index` < 4, the way
/// the kernels assert their invariants. In libk3-safe a violation panics (the process aborts
/// with the message); the shipped build refuses it with bad_argument before asserting.
export fn k3_safety_probe(index: u32) i32 {
    if (!std.debug.runtime_safety and index >= 4) return code(.bad_argument);
    std.debug.assert(index < 4);
    return code(.ok);
}

/// FMA-peak probe: on every pool thread, `steps` rounds of 12 independent 4-wide f64 fused
/// multiply-adds (fma_peak.zig); returns the f64 operations done (time the call for FLOP/s),
/// or 0 when `steps` is not a positive multiple of 16.
export fn k3_fma_peak(steps: u64) u64 {
    var flops: u64 = 0;
    return if (variant().fma_peak(steps, &flops) == .ok) flops else 0;
}

test {
    _ = aligned_read;
    _ = reader_pool;
    _ = dispatch;
    if (@import("builtin").cpu.arch == .x86_64) _ = @import("isa/cpu_x86.zig");
}
