//! Memory read-bandwidth probe for bench/kernels.ts: the reference number the matvec kernels
//! are compared with. Reads every byte of a buffer once (wrapping 64-bit integer sum, so the
//! result is deterministic and the loads cannot be optimised away). Not part of the forward pass.
const std = @import("std");
const common = @import("common.zig");
const pool = @import("pool");

/// Bytes per parallel chunk.
const chunk_bytes: usize = 1 << 20;
/// Upper bound on chunks, hence on the probed buffer (64 GiB); a named limit for the array below.
const max_chunks: usize = 1 << 16;

const Job = struct {
    words: [*]const u64,
    words_total: usize,
    partial: *[max_chunks]u64,

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const per = chunk_bytes / 8;
        for (begin..end) |c| {
            const lo = c * per;
            const hi = @min(lo + per, self.words_total);
            self.partial[c] = sumWords(self.words[lo..hi]);
        }
    }
};

fn sumWords(words: []const u64) u64 {
    const V = @Vector(4, u64);
    var a: [4]V = .{ @splat(0), @splat(0), @splat(0), @splat(0) };
    var i: usize = 0;
    while (i + 16 <= words.len) : (i += 16) {
        inline for (0..4) |k| a[k] +%= @as(V, words[i + 4 * k ..][0..4].*);
    }
    var s: u64 = @reduce(.Add, a[0] +% a[1] +% a[2] +% a[3]);
    while (i < words.len) : (i += 1) s +%= words[i];
    return s;
}

var partial: [max_chunks]u64 = undefined;

/// Wrapping sum of the `bytes / 8` little-endian u64 words at `ptr` (8-byte aligned), read by
/// all pool threads.
pub fn readSum(ptr: [*]const u8, bytes: u64) common.Error!u64 {
    if (bytes < 8 or @intFromPtr(ptr) % 8 != 0) return error.BadArgument;
    const words = bytes / 8;
    const chunks = (words * 8 + chunk_bytes - 1) / chunk_bytes;
    if (chunks > max_chunks) return error.BadArgument;
    const job = Job{ .words = @ptrCast(@alignCast(ptr)), .words_total = words, .partial = &partial };
    pool.parallelFor(chunks, 1, &job, Job.run);
    var s: u64 = 0;
    for (partial[0..chunks]) |p| s +%= p;
    return s;
}

test "readSum" {
    var buf: [1000]u64 = undefined;
    for (&buf, 0..) |*w, i| w.* = i;
    try std.testing.expectEqual(@as(u64, 999 * 1000 / 2), try readSum(@ptrCast(&buf), 8000));
}
