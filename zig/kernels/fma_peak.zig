//! FMA-peak probe for bench/kernels.ts: the compute ceiling the multi-token matmuls are
//! compared with, measured in the same run as them (a shared or throttled machine moves both).
//! Every pool thread runs independent chains of f64 fused multiply-adds, the operation the
//! matmul kernels are built from, at the widest vectors of the compilation (4 lanes; 8 in the
//! AVX-512 variant, where a CPU with two 512-bit FMA units doubles the peak and one that
//! splits 512-bit operations in two does not). Not part of the forward pass.
const std = @import("std");
const common = @import("common.zig");
const pool = @import("pool");

/// Independent accumulator chains: an FMA's latency (4 cycles on current x86-64) times the two
/// FMA pipes needs at least 8 in flight; 12 leaves margin and still fits the 16 registers.
const chains = 12;
/// f64 lanes per FMA: AVX2, or AVX-512.
const width = if (common.wide) 8 else 4;
/// Chunks per thread: the pool hands chunks out dynamically, so a worker that wakes late
/// takes fewer of them instead of leaving one thread's share to run alone at the end.
const chunks_per_thread = 16;
/// Upper bound on chunks (a named limit for the array of results below).
const max_chunks = pool.max_threads * chunks_per_thread;

const V = @Vector(width, f64);

/// `steps` rounds of `chains` FMAs, each chain a ← a·m + c with m just below 1, so the values
/// settle near c/(1−m) and never overflow or become subnormal (which would slow them down).
fn chainSum(steps: u64, seed: usize) f64 {
    const m: V = @splat(1.0 - 0x1p-20);
    const c: V = @splat(0x1p-10);
    var acc: [chains]V = undefined;
    inline for (0..chains) |k| acc[k] = @splat(@floatFromInt(seed + k));
    var i: u64 = 0;
    while (i < steps) : (i += 1) {
        inline for (0..chains) |k| acc[k] = @mulAdd(V, acc[k], m, c);
    }
    var s: V = @splat(0);
    inline for (0..chains) |k| s += acc[k];
    return @reduce(.Add, s);
}

const Job = struct {
    steps: u64,
    out: *[max_chunks]f64,

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        for (begin..end) |chunk| self.out[chunk] = chainSum(self.steps, chunk);
    }
};

var results: [max_chunks]f64 = undefined;

/// Runs, for each pool thread, `steps` rounds of `chains` independent 4-wide f64 FMAs (in
/// `chunks_per_thread` chunks) on all pool threads and returns the f64 floating-point
/// operations done (2 per lane per FMA); time the call to get FLOP/s. `steps` must be a
/// positive multiple of `chunks_per_thread`.
pub fn fmaPeak(steps: u64) common.Error!u64 {
    if (steps == 0 or steps % chunks_per_thread != 0) return error.BadArgument;
    const chunks: usize = @as(usize, pool.threadCount()) * chunks_per_thread;
    const per_chunk = steps / chunks_per_thread;
    const flops_per_chunk = try common.mulSize(per_chunk, chains * width * 2);
    const flops = try common.mulSize(flops_per_chunk, chunks);
    const job = Job{ .steps = per_chunk, .out = &results };
    pool.parallelFor(chunks, 1, &job, Job.run);
    var sum: f64 = 0;
    for (results[0..chunks]) |r| sum += r;
    std.mem.doNotOptimizeAway(sum);
    return flops;
}

test "fmaPeak counts its operations and refuses a step count it cannot split" {
    try pool.init(2);
    defer pool.deinit();
    try std.testing.expectEqual(@as(u64, 2 * chunks_per_thread * 10 * chains * width * 2), try fmaPeak(chunks_per_thread * 10));
    try std.testing.expectError(error.BadArgument, fmaPeak(0));
    try std.testing.expectError(error.BadArgument, fmaPeak(chunks_per_thread + 1));
    // the chains move from their seeds towards c / (1 − m) = 2^10: finite, normal, bounded
    const s = chainSum(1000, 0);
    try std.testing.expect(s > width * (chains * (chains - 1) / 2) and s < chains * width * 1024);
}
