//! ShortConv: depthwise causal convolution with the SiLU fused (model.md §6.5), carrying the
//! per-channel history across calls (incremental decode, §9).
//!
//! Layouts (C channels, Kc taps):
//!   x, y     [T][C]        T tokens in order
//!   taps     [C][Kc]       the checkpoint's [C, 1, Kc] tensor (the middle axis is 1)
//!   history  [C][Kc−1]     the previous Kc−1 RAW inputs of each channel, oldest first;
//!                          zeros at sequence start; updated in place
//! Per channel c and token t, all f32 (§6.5 "original order"):
//!   pre = w[Kc−1]·x_t;  then pre = pre + w[j]·h[j] for j = 0 … Kc−2;  y_t = pre·σ(pre)
//!   history ← (h[1], …, h[Kc−2], x_t)
//! Channels are independent: threads split channels; each chunk of channels runs its T tokens
//! in order (pre-activations first, then the SiLU over the chunk, 8 lanes at a time).
//! y may alias x (each x_t[c] is read before y_t[c] is written).
const std = @import("std");
const common = @import("common.zig");
const num = @import("numerics.zig");
const pool = @import("pool");

pub const Error = common.Error;

/// Upper bound on taps (the released model has 4); a named limit.
pub const max_taps = 16;

const Job = struct {
    x: [*]const f32,
    taps: [*]const f32,
    hist: [*]f32,
    y: [*]f32,
    tokens: usize,
    channels: usize,
    kc: usize,
    scalar: bool,

    fn run(self: *const Job, begin: usize, end: usize, worker: usize) void {
        _ = worker;
        const kc = self.kc;
        const hn = kc - 1;
        const C = self.channels;
        for (0..self.tokens) |t| {
            // pre-activations of this token for the chunk's channels (stored in y) ...
            for (begin..end) |c| {
                const w = self.taps[c * kc ..][0..kc];
                const h = self.hist[c * hn ..][0..hn];
                const xt = self.x[t * C + c];
                var pre = w[kc - 1] * xt;
                for (0..hn) |j| pre = pre + w[j] * h[j];
                self.y[t * C + c] = pre;
                if (hn > 0) {
                    std.mem.copyForwards(f32, h[0 .. hn - 1], h[1..hn]);
                    h[hn - 1] = xt;
                }
            }
            // ... then SiLU over them (the same per-element operations at any vector width)
            const row = self.y + t * C;
            var c = begin;
            if (!self.scalar) {
                while (c + 8 <= end) : (c += 8) row[c..][0..8].* = num.silu(8, row[c..][0..8].*);
            }
            while (c < end) : (c += 1) row[c] = num.siluS(row[c]);
        }
    }
};

/// One ShortConv stream (q, k or v of a KDA layer) over T tokens, updating `hist`.
/// `hist` may be null only when kc = 1 (no history).
pub fn shortconv(x: [*]const f32, taps: [*]const f32, hist: ?[*]f32, y: [*]f32, tokens: usize, channels: usize, kc: usize) Error!void {
    if (tokens == 0 or channels == 0 or kc == 0 or kc > max_taps) return error.BadArgument;
    if (kc > 1 and hist == null) return error.BadArgument;
    var none: [1]f32 = undefined;
    const job = Job{ .x = x, .taps = taps, .hist = hist orelse &none, .y = y, .tokens = tokens, .channels = channels, .kc = kc, .scalar = common.path() == .scalar };
    pool.parallelFor(channels, @max(1, 4096 / tokens), &job, Job.run);
}

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

test "shortconv: tap Kc-1 meets the current input; history carries; chunked == whole" {
    const C = 3;
    const kc = 4;
    var taps: [C * kc]f32 = undefined;
    for (&taps, 0..) |*w, i| w.* = @as(f32, @floatFromInt(i)) * 0.1 - 0.5;
    var x: [5 * C]f32 = undefined;
    for (&x, 0..) |*v, i| v.* = @sin(@as(f32, @floatFromInt(i)));
    var hist = [_]f32{0} ** (C * (kc - 1));
    var y: [5 * C]f32 = undefined;
    try shortconv(&x, &taps, &hist, &y, 5, C, kc);
    // reference: convolution over the zero-padded sequence
    for (0..5) |t| {
        for (0..C) |c| {
            var pre = taps[c * kc + kc - 1] * x[t * C + c];
            for (0..kc - 1) |j| {
                // h[j] is the input at time t - (kc-1) + j
                const s = @as(i64, @intCast(t)) - @as(i64, kc - 1) + @as(i64, @intCast(j));
                const hv: f32 = if (s >= 0) x[@as(usize, @intCast(s)) * C + c] else 0;
                pre = pre + taps[c * kc + j] * hv;
            }
            try testing.expectEqual(num.siluS(pre), y[t * C + c]);
        }
    }
    // the same 5 tokens fed 2 + 3 give identical outputs and state
    var hist2 = [_]f32{0} ** (C * (kc - 1));
    var y2: [5 * C]f32 = undefined;
    try shortconv(&x, &taps, &hist2, &y2, 2, C, kc);
    try shortconv(x[2 * C ..].ptr, &taps, &hist2, y2[2 * C ..].ptr, 3, C, kc);
    try testing.expectEqualSlices(u32, @ptrCast(&y), @ptrCast(&y2));
    try testing.expectEqualSlices(u32, @ptrCast(&hist), @ptrCast(&hist2));
    // state holds the last three raw inputs, oldest first
    try testing.expectEqual(x[2 * C + 1], hist[1 * 3 + 0]);
    try testing.expectEqual(x[4 * C + 1], hist[1 * 3 + 2]);
}
