//! The exported C ABI of libk3: the only file with `export fn`, and where the kernels' exports
//! are derived (one per zig/kernels/table.zig `entries` declaration; zig/abi_gen.zig writes
//! their bun:ffi declarations, so nothing mirrors them by hand).
//!
//! Every function here is thin: it checks its arguments and calls into zig/io or zig/kernels.
//! src/native/abi.ts mirrors the rest of this file one to one (functions and shared constants);
//! test/unit/native/abi.test.ts compares the two, so change both together.
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

pub const abi_version: u32 = 12;

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
// Kernels: the compute thread pool, the kernel variants, the kernels (declared once, in
// zig/kernels/table.zig `entries`, where their contracts are), and a few test-only probes.
// Everything above this line is the I/O section.
// =============================================================================================

// `pub` only so Zig-side experiments (e.g. a bench harness built with -M) can reach the kernels.
pub const pool = @import("pool");
pub const kernels = @import("kernels");
pub const dispatch = @import("isa/dispatch.zig");
const kentry = kernels.entry;

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

/// Where the CPU issues its vector shuffles, blends and conversions (`VectorPorts` codes,
/// zig/pool.zig): 0 beside the multiply-adds, 1 on their ports. The library sets it from the
/// CPU when it picks its variant; it changes which kernel paths run, never the bits. Tests
/// and benches set it both ways; `bad_argument` for an unknown code.
export fn k3_vector_ports_select(ports: u32) i32 {
    const w = std.meta.intToEnum(pool.VectorPorts, ports) catch return code(.bad_argument);
    dispatch.selectVectorPorts(w);
    return code(.ok);
}

/// Where the kernels take this CPU's vector operations to issue, now.
export fn k3_vector_ports_current() u32 {
    return @intFromEnum(dispatch.currentVectorPorts());
}

// The kernels themselves: one `k3_<name>` per declaration of zig/kernels/table.zig `entries`,
// derived from its signature (zig/kernels/entry.zig): the arguments as the C ABI carries them,
// null pointers and unknown codes refused, the count (if any) through a last, nullable out
// parameter; then the call through the variant in use.
comptime {
    for (@typeInfo(kernels.entries).@"struct".decls) |d| @export(kernelExport(d.name), .{ .name = "k3_" ++ d.name });
}

fn kernelExport(comptime name: []const u8) *const kentry.CFn(kentry.abiParams(@field(kernels.entries, name)), i32) {
    const f = @field(kernels.entries, name);
    const ps = kentry.params(f);
    return kentry.cFunction(kentry.abiParams(f), i32, struct {
        fn body(args: std.meta.Tuple(kentry.abiParams(f))) i32 {
            var inner: std.meta.Tuple(kentry.tableParams(f)) = undefined;
            inline for (ps, 0..) |T, i| inner[i] = switch (@typeInfo(T)) {
                .pointer => args[i] orelse return code(.bad_argument),
                .@"enum" => std.meta.intToEnum(T, args[i]) catch return code(.bad_argument),
                else => args[i],
            };
            var count: u64 = 0;
            if (comptime kentry.counts(f)) inner[ps.len] = &count;
            const r = @call(.auto, @field(variant(), name), inner);
            if (comptime kentry.counts(f)) {
                if (r == .ok) if (args[ps.len]) |out| {
                    out.* = count;
                };
            }
            return kstatus(r);
        }
    }.body);
}

// ---------------------------------------------------------------------------------------------
// Test only.

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

test {
    _ = aligned_read;
    _ = reader_pool;
    _ = dispatch;
    if (@import("builtin").cpu.arch == .x86_64) _ = @import("isa/cpu_x86.zig");
}
