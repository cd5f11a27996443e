//! The compressed trunk's code (runtime.md §4, README "Compressed trunk"): a layer's bytes cut
//! into independent blocks of `block_bytes`, each stored either as it is (`raw`) or, for bf16
//! words, split into what does and does not compress:
//!
//!   sign and mantissa   one byte per word, stored raw (they are close to uniform);
//!   exponent            k bit planes per group of 64 words (k = 1..4, chosen per block), each
//!                       word's code c = exponent − base; c = 2^k − 1 is an escape and that
//!                       word's exponent follows in the escape bytes, in word order.
//!
//! A trained matrix's exponents fall in a narrow window (about 2.6 bits of entropy), so most
//! blocks pick k = 3 and store a word in about 11 bits. Planes decode with a few vector ops per
//! 64 words (no bit-serial state), so a core decodes many GB/s; and blocks are independent, so
//! the pool splits a layer by blocks and the bytes come out the same for any thread count.
//!
//! A layer's stored bytes: the block table, `entry_bytes` per block (the block's offset from the
//! start of the layer's stored bytes u64, its stored length u32, a 32-bit checksum of its stored
//! bytes u32, all little-endian), then the blocks back to back. A block: an 8-byte header (kind
//! u8, k u8, base u8, 0 u8, escape count u32) and its payload: `raw` the decoded bytes; `planes`
//! n sign-mantissa bytes, 8·k·⌈n/64⌉ plane bytes (group-major, plane j holds bit j of the codes),
//! then the escape bytes. Nothing in stored bytes is trusted: every offset and length is checked
//! before it is used, so hostile bytes give `Damaged` naming the block, never a read out of bounds.
const std = @import("std");
const builtin = @import("builtin");
const pool = @import("pool");

comptime {
    // Words are stored and decoded as the little-endian bf16 the checkpoint holds.
    std.debug.assert(builtin.cpu.arch.endian() == .little);
}

pub const entry_bytes: usize = 16;
pub const header_bytes: usize = 8;
/// Words a plane covers.
pub const group: usize = 64;
pub const max_planes: u8 = 4;
/// The block sizes a trunk may declare: whole groups of words, and bounded so a block decodes
/// in a core's L2 cache.
pub const min_block_bytes: u32 = 128;
pub const max_block_bytes: u32 = 16777216;

pub const Kind = enum(u8) { raw = 0, planes = 1 };

pub const Error = error{ BadArgument, Damaged, OutOfMemory };

/// Blocks of a layer of `payload` decoded bytes.
pub fn blockCount(payload: u64, block_bytes: u32) u64 {
    return (payload + block_bytes - 1) / block_bytes;
}

/// Worst-case stored bytes of a layer of `payload` bytes (every block raw).
pub fn bound(payload: u64, block_bytes: u32) u64 {
    return payload + blockCount(payload, block_bytes) * (entry_bytes + header_bytes);
}

/// The checksum of a block's stored bytes, seeded with the layer and the block's index, so a
/// block moved to another place fails as a changed one does.
pub fn checksum(bytes: []const u8, layer: u32, block: u64) u32 {
    const seed = (@as(u64, layer) << 40) ^ block;
    return @truncate(std.hash.Wyhash.hash(seed, bytes));
}

inline fn exponentOf(word: u16) u8 {
    return @truncate(word >> 7);
}

inline fn signMantissa(word: u16) u8 {
    return @truncate(((word >> 8) & 0x80) | (word & 0x7f));
}

inline fn wordOf(sm: u8, exponent: u8) u16 {
    return (@as(u16, sm & 0x80) << 8) | (@as(u16, exponent) << 7) | (sm & 0x7f);
}

/// What a block is stored as: the smallest of raw and every (k, base).
const Choice = struct { kind: Kind, k: u8 = 0, base: u8 = 0, escapes: u32 = 0, stored: usize };

fn planeBytes(n: usize, k: u8) usize {
    return 8 * @as(usize, k) * ((n + group - 1) / group);
}

fn choose(block: []const u8) Choice {
    const raw = Choice{ .kind = .raw, .stored = header_bytes + block.len };
    if (block.len % 2 != 0 or block.len == 0) return raw;
    const n = block.len / 2;
    var histogram = [_]u32{0} ** 257;
    for (0..n) |i| histogram[exponentOf(std.mem.readInt(u16, block[2 * i ..][0..2], .little))] += 1;
    // prefix[e] = words with an exponent below e.
    var prefix = [_]u64{0} ** 258;
    for (0..257) |e| prefix[e + 1] = prefix[e] + histogram[e];
    var best = raw;
    var k: u8 = 1;
    while (k <= max_planes) : (k += 1) {
        const window: usize = (@as(usize, 1) << @intCast(k)) - 1;
        var base: usize = 0;
        while (base + window <= 256) : (base += 1) {
            const escapes = n - (prefix[base + window] - prefix[base]);
            const stored = header_bytes + n + planeBytes(n, k) + escapes;
            if (stored < best.stored) best = .{ .kind = .planes, .k = k, .base = @intCast(base), .escapes = @intCast(escapes), .stored = stored };
        }
    }
    return best;
}

fn encodeBlock(block: []const u8, choice: Choice, out: []u8) void {
    out[0] = @intFromEnum(choice.kind);
    out[1] = choice.k;
    out[2] = choice.base;
    out[3] = 0;
    std.mem.writeInt(u32, out[4..8], choice.escapes, .little);
    const body = out[header_bytes..choice.stored];
    if (choice.kind == .raw) {
        @memcpy(body, block);
        return;
    }
    const n = block.len / 2;
    const planes = body[n..][0..planeBytes(n, choice.k)];
    const escape_bytes = body[n + planes.len ..];
    @memset(planes, 0);
    const escape: u8 = @intCast((@as(u16, 1) << @intCast(choice.k)) - 1);
    var escaped: usize = 0;
    for (0..n) |i| {
        const word = std.mem.readInt(u16, block[2 * i ..][0..2], .little);
        body[i] = signMantissa(word);
        const e = exponentOf(word);
        var c: u8 = escape;
        if (e >= choice.base and e - choice.base < escape) {
            c = e - choice.base;
        } else {
            escape_bytes[escaped] = e;
            escaped += 1;
        }
        const g = i / group;
        const lane: u6 = @intCast(i % group);
        for (0..choice.k) |j| {
            if ((c >> @intCast(j)) & 1 != 0) {
                const at = (g * choice.k + j) * 8;
                const plane = std.mem.readInt(u64, planes[at..][0..8], .little) | (@as(u64, 1) << lane);
                std.mem.writeInt(u64, planes[at..][0..8], plane, .little);
            }
        }
    }
    std.debug.assert(escaped == choice.escapes);
}

/// Decodes one `planes` block body into `out` (n words); Damaged when the escape bytes do not
/// match the codes. `vector` false runs the scalar reference (tests compare the two).
fn decodePlanes(body: []const u8, n: usize, k: u8, base: u8, escapes: []const u8, out: []u8, comptime vector: bool) Error!void {
    const sm = body[0..n];
    const planes = body[n..][0..planeBytes(n, k)];
    const escape: u8 = @intCast((@as(u16, 1) << @intCast(k)) - 1);
    var used: usize = 0;
    var i: usize = 0;
    if (vector) {
        const V8 = @Vector(group, u8);
        const V16 = @Vector(group, u16);
        const zero: V8 = @splat(0);
        while (i + group <= n) : (i += group) {
            const g = i / group;
            var c: V8 = zero;
            for (0..k) |j| {
                const bits: @Vector(group, bool) = @bitCast(std.mem.readInt(u64, planes[(g * k + j) * 8 ..][0..8], .little));
                c |= @select(u8, bits, @as(V8, @splat(@as(u8, 1) << @intCast(j))), zero);
            }
            var e: V8 = c +% @as(V8, @splat(base));
            var escaped: u64 = @bitCast(c == @as(V8, @splat(escape)));
            if (escaped != 0) {
                var lanes: [group]u8 = e;
                while (escaped != 0) : (escaped &= escaped - 1) {
                    if (used == escapes.len) return error.Damaged;
                    lanes[@ctz(escaped)] = escapes[used];
                    used += 1;
                }
                e = lanes;
            }
            const s: V8 = sm[i..][0..group].*;
            const wide_s: V16 = s;
            const wide_e: V16 = e;
            const words: V16 = ((wide_s & @as(V16, @splat(0x80))) << @as(@Vector(group, u4), @splat(8))) |
                (wide_e << @as(@Vector(group, u4), @splat(7))) | (wide_s & @as(V16, @splat(0x7f)));
            const dst: *align(1) [group]u16 = @ptrCast(out[2 * i ..][0 .. 2 * group]);
            dst.* = words;
        }
    }
    while (i < n) : (i += 1) {
        const g = i / group;
        const lane: u6 = @intCast(i % group);
        var c: u8 = 0;
        for (0..k) |j| c |= @as(u8, @truncate(std.mem.readInt(u64, planes[(g * k + j) * 8 ..][0..8], .little) >> lane & 1)) << @intCast(j);
        var e = c +% base;
        if (c == escape) {
            if (used == escapes.len) return error.Damaged;
            e = escapes[used];
            used += 1;
        }
        std.mem.writeInt(u16, out[2 * i ..][0..2], wordOf(sm[i], e), .little);
    }
    if (used != escapes.len) return error.Damaged;
}

/// Decodes one stored block (`stored`, its whole bytes) into `out` (its decoded bytes).
fn decodeBlock(stored: []const u8, out: []u8, comptime vector: bool) Error!void {
    if (stored.len < header_bytes or stored[3] != 0) return error.Damaged;
    const kind = std.meta.intToEnum(Kind, stored[0]) catch return error.Damaged;
    const k = stored[1];
    const base = stored[2];
    const escapes = std.mem.readInt(u32, stored[4..8], .little);
    const body = stored[header_bytes..];
    switch (kind) {
        .raw => {
            if (k != 0 or base != 0 or escapes != 0 or body.len != out.len) return error.Damaged;
            @memcpy(out, body);
        },
        .planes => {
            if (k == 0 or k > max_planes or out.len % 2 != 0) return error.Damaged;
            const n = out.len / 2;
            if (body.len != n + planeBytes(n, k) + @as(usize, escapes)) return error.Damaged;
            try decodePlanes(body, n, k, base, body[n + planeBytes(n, k) ..], out, vector);
        },
    }
}

const Entry = struct { offset: u64, length: u32, sum: u32 };

fn entryAt(table: []const u8, i: usize) Entry {
    const at = table[i * entry_bytes ..][0..entry_bytes];
    return .{ .offset = std.mem.readInt(u64, at[0..8], .little), .length = std.mem.readInt(u32, at[8..12], .little), .sum = std.mem.readInt(u32, at[12..16], .little) };
}

/// A run of blocks to decode: their table entries, their stored bytes (starting at the layer
/// offset `src_base`), and where their decoded bytes go.
pub const Blocks = struct {
    /// Table entries of blocks first .. first + count − 1.
    table: []const u8,
    first: u64,
    layer: u32,
    src: []const u8,
    src_base: u64,
    /// The decoded bytes of the run: every block `block_bytes` but a layer's last, which ends `dst`.
    dst: []u8,
    block_bytes: u32,
    verify: bool,
};

/// Checks block `i` of the run (its entry against its neighbour and the bounds) and returns its
/// stored bytes; Damaged otherwise.
fn storedOf(run: *const Blocks, i: usize) Error![]const u8 {
    const entry = entryAt(run.table, i);
    const expected = if (i == 0) run.src_base else blk: {
        const previous = entryAt(run.table, i - 1);
        break :blk previous.offset + previous.length;
    };
    if (entry.offset != expected) return error.Damaged;
    const start = entry.offset - run.src_base;
    if (start > run.src.len or entry.length > run.src.len - start) return error.Damaged;
    const stored = run.src[start..][0..entry.length];
    if (run.verify and checksum(stored, run.layer, run.first + i) != entry.sum) return error.Damaged;
    return stored;
}

fn outOf(run: *const Blocks, i: usize) []u8 {
    const at = i * run.block_bytes;
    return run.dst[at..@min(run.dst.len, at + run.block_bytes)];
}

const DecodeJob = struct {
    run: *const Blocks,
    /// The lowest damaged block of the run, or maxInt.
    damaged: *std.atomic.Value(u64),
};

fn decodeRange(job: *const DecodeJob, begin: usize, end: usize, _: usize) void {
    for (begin..end) |i| {
        const stored = storedOf(job.run, i) catch {
            _ = job.damaged.fetchMin(i, .monotonic);
            continue;
        };
        decodeBlock(stored, outOf(job.run, i), true) catch {
            _ = job.damaged.fetchMin(i, .monotonic);
        };
    }
}

/// Decodes a run of blocks on the pool; on Damaged, `damaged_out` is the lowest damaged block's
/// index in the layer.
pub fn decode(run: *const Blocks, damaged_out: *u64) Error!void {
    const count = run.table.len / entry_bytes;
    if (run.table.len % entry_bytes != 0 or count == 0 or run.block_bytes < min_block_bytes or run.block_bytes > max_block_bytes) return error.BadArgument;
    // Every block but the last fills block_bytes; the last holds the rest.
    if (run.dst.len <= (count - 1) * @as(u64, run.block_bytes) or run.dst.len > count * @as(u64, run.block_bytes)) return error.BadArgument;
    var lowest = std.atomic.Value(u64).init(std.math.maxInt(u64));
    const job = DecodeJob{ .run = run, .damaged = &lowest };
    pool.parallelFor(count, 1, &job, decodeRange);
    const damaged = lowest.load(.monotonic);
    if (damaged != std.math.maxInt(u64)) {
        damaged_out.* = run.first + damaged;
        return error.Damaged;
    }
}

const EncodeJob = struct {
    payload: []const u8,
    block_bytes: u32,
    layer: u32,
    choices: []Choice,
    offsets: []u64,
    out: []u8,
};

fn chooseRange(job: *const EncodeJob, begin: usize, end: usize, _: usize) void {
    for (begin..end) |i| job.choices[i] = choose(blockOf(job.payload, job.block_bytes, i));
}

fn blockOf(payload: []const u8, block_bytes: u32, i: usize) []const u8 {
    const at = i * block_bytes;
    return payload[at..@min(payload.len, at + block_bytes)];
}

fn encodeRange(job: *const EncodeJob, begin: usize, end: usize, _: usize) void {
    for (begin..end) |i| {
        const stored = job.out[job.offsets[i]..][0..job.choices[i].stored];
        encodeBlock(blockOf(job.payload, job.block_bytes, i), job.choices[i], stored);
        const entry = job.out[i * entry_bytes ..][0..entry_bytes];
        std.mem.writeInt(u64, entry[0..8], job.offsets[i], .little);
        std.mem.writeInt(u32, entry[8..12], @intCast(stored.len), .little);
        std.mem.writeInt(u32, entry[12..16], checksum(stored, job.layer, i), .little);
    }
}

/// Encodes a layer's payload (its table, then its blocks) into `out` (at least `bound` bytes);
/// returns the stored length. Each block independently picks its smallest form.
pub fn encode(allocator: std.mem.Allocator, payload: []const u8, block_bytes: u32, layer: u32, out: []u8) Error!usize {
    if (payload.len == 0 or block_bytes < min_block_bytes or block_bytes > max_block_bytes or block_bytes % (2 * group) != 0) return error.BadArgument;
    if (out.len < bound(payload.len, block_bytes)) return error.BadArgument;
    const count: usize = @intCast(blockCount(payload.len, block_bytes));
    const choices = try allocator.alloc(Choice, count);
    defer allocator.free(choices);
    const offsets = try allocator.alloc(u64, count);
    defer allocator.free(offsets);
    const job = EncodeJob{ .payload = payload, .block_bytes = block_bytes, .layer = layer, .choices = choices, .offsets = offsets, .out = out };
    pool.parallelFor(count, 1, &job, chooseRange);
    var at: u64 = count * entry_bytes;
    for (choices, offsets) |choice, *offset| {
        offset.* = at;
        at += choice.stored;
    }
    pool.parallelFor(count, 1, &job, encodeRange);
    return @intCast(at);
}

// ---------------------------------------------------------------------------------------------

const testing = std.testing;

fn normalBf16(random: std.Random, words: []u16, scale: f32) void {
    for (words) |*w| {
        const x: f32 = random.floatNorm(f32) * scale;
        w.* = @truncate(@as(u32, @bitCast(x)) >> 16);
    }
}

fn roundTrip(payload: []const u8, block_bytes: u32) !usize {
    const out = try testing.allocator.alloc(u8, @intCast(bound(payload.len, block_bytes)));
    defer testing.allocator.free(out);
    const stored = try encode(testing.allocator, payload, block_bytes, 7, out);
    const decoded = try testing.allocator.alloc(u8, payload.len);
    defer testing.allocator.free(decoded);
    const count = blockCount(payload.len, block_bytes);
    const run = Blocks{ .table = out[0 .. count * entry_bytes], .first = 0, .layer = 7, .src = out[count * entry_bytes .. stored], .src_base = count * entry_bytes, .dst = decoded, .block_bytes = block_bytes, .verify = true };
    var damaged: u64 = 0;
    try decode(&run, &damaged);
    try testing.expectEqualSlices(u8, payload, decoded);
    return stored;
}

test "normal bf16 round-trips and stores a word in under 12 bits" {
    var prng = std.Random.DefaultPrng.init(1);
    const words = try testing.allocator.alloc(u16, 1 << 16);
    defer testing.allocator.free(words);
    normalBf16(prng.random(), words, 0.02);
    const stored = try roundTrip(std.mem.sliceAsBytes(words), 4096);
    try testing.expect(stored * 8 < words.len * 12);
}

test "odd tails, raw blocks, extreme exponents and every k round-trip" {
    var prng = std.Random.DefaultPrng.init(2);
    const random = prng.random();
    const bytes = try testing.allocator.alloc(u8, 3 * 4096 + 77);
    defer testing.allocator.free(bytes);
    random.bytes(bytes); // uniform words: raw or k = 4 with many escapes
    _ = try roundTrip(bytes, 4096);
    const words = std.mem.bytesAsSlice(u16, bytes[0 .. 3 * 4096]);
    for (words, 0..) |*w, i| w.* = @intCast((i % 3) << 7 | (i & 0x807f)); // three exponents: k = 2
    _ = try roundTrip(bytes, 4096);
    for (words, 0..) |*w, i| w.* = if (i % 97 == 0) 0x7f80 | @as(u16, @intCast(i & 1)) else 0x3f80; // inf/NaN escapes
    _ = try roundTrip(bytes, 4096);
}

test "the vector and scalar decoders agree" {
    var prng = std.Random.DefaultPrng.init(3);
    var words: [1000]u16 = undefined;
    normalBf16(prng.random(), &words, 1.0);
    const block = std.mem.sliceAsBytes(&words);
    const choice = choose(block);
    try testing.expect(choice.kind == .planes);
    var stored: [4000]u8 = undefined;
    encodeBlock(block, choice, &stored);
    var a: [2000]u8 = undefined;
    var b: [2000]u8 = undefined;
    try decodeBlock(stored[0..choice.stored], &a, true);
    try decodeBlock(stored[0..choice.stored], &b, false);
    try testing.expectEqualSlices(u8, block, &a);
    try testing.expectEqualSlices(u8, block, &b);
}

test "every flipped bit of a small layer is refused or decodes to the same bytes" {
    var prng = std.Random.DefaultPrng.init(4);
    var words: [512]u16 = undefined;
    normalBf16(prng.random(), &words, 0.05);
    const payload = std.mem.sliceAsBytes(&words);
    var out: [2048]u8 = undefined;
    const stored = try encode(testing.allocator, payload, 256, 3, &out);
    var decoded: [1024]u8 = undefined;
    const count = blockCount(payload.len, 256);
    for (0..stored * 8) |bit| {
        var copy = out;
        copy[bit / 8] ^= @as(u8, 1) << @intCast(bit % 8);
        const run = Blocks{ .table = copy[0 .. count * entry_bytes], .first = 0, .layer = 3, .src = copy[count * entry_bytes .. stored], .src_base = count * entry_bytes, .dst = &decoded, .block_bytes = 256, .verify = true };
        var damaged: u64 = 99;
        decode(&run, &damaged) catch |err| {
            try testing.expectEqual(error.Damaged, err);
            try testing.expect(damaged < count);
            continue;
        };
        try testing.expectEqualSlices(u8, payload, &decoded);
    }
}
