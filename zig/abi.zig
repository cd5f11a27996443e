//! The exported C ABI of libk3: the only file with `export fn`.
//!
//! Every function here is thin: it checks its arguments and calls into zig/io or zig/kernels.
//! src/native/symbols.ts mirrors this file one to one; change both together.
//!
//! Conventions:
//! - Status codes are i32: 0 is success, a negative value is an error. Values in
//!   -1 .. -4095 are a negated errno from the OS; the named codes below are k3's own.
//! - Buffers are passed as (pointer, byte length). Large buffers are allocated here with
//!   `k3_alloc` (aligned for O_DIRECT) and freed with `k3_free`.
const std = @import("std");
const aligned_read = @import("io/aligned_read.zig");

pub const abi_version: u32 = 1;

pub const Status = enum(i32) {
    ok = 0,
    /// End of file came before the payload was complete.
    short_read = -10001,
    /// A buffer is too small or misaligned for the request.
    capacity = -10002,
    /// An argument is out of range (null pointer, zero size, unknown handle).
    bad_argument = -10003,
    /// An allocation failed.
    out_of_memory = -10004,
};

fn code(status: Status) i32 {
    return @intFromEnum(status);
}

export fn k3_abi_version() u32 {
    return abi_version;
}

/// Allocation alignment: enough for O_DIRECT and for any SIMD load.
export fn k3_alloc_alignment() u64 {
    return aligned_read.alignment;
}

/// Zero-filled, `k3_alloc_alignment()`-aligned native memory; null on failure.
export fn k3_alloc(bytes: u64) ?[*]u8 {
    if (bytes == 0) return null;
    var ptr: ?*anyopaque = null;
    if (std.c.posix_memalign(&ptr, aligned_read.alignment, bytes) != 0) return null;
    const out: [*]u8 = @ptrCast(ptr.?);
    @memset(out[0..bytes], 0);
    return out;
}

export fn k3_free(ptr: ?[*]u8) void {
    if (ptr) |p| std.c.free(p);
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
    if (fd >= 0) _ = std.c.close(fd);
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

test {
    _ = aligned_read;
}
