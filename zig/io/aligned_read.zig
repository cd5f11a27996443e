//! Positioned reads that bypass the page cache (O_DIRECT) where the filesystem allows it.
//!
//! O_DIRECT needs the file offset, the length and the buffer address to be multiples of
//! `alignment`. Tensors start wherever the previous one ended, so a read of [offset,
//! offset+len) is widened to the enclosing aligned window and the payload lands at
//! `offset - window.lo` inside the caller's aligned buffer. The last window of a file may run
//! past end-of-file: that short read is fine as long as the payload itself was covered.
//!
//! macOS has no O_DIRECT: there `fcntl(F_NOCACHE, 1)` keeps the reads out of the unified buffer
//! cache instead, and every pread stays below 2 GiB, which Darwin refuses with EINVAL.
const std = @import("std");
const builtin = @import("builtin");
const c = std.c;
const platform = @import("../platform.zig");

pub const alignment: u64 = 4096;

const is_darwin = builtin.os.tag.isDarwin();
/// The most one pread asks for: Darwin rejects lengths of 2 GiB and more; Linux returns at most
/// 0x7ffff000 bytes anyway. 1 GiB keeps every direct chunk aligned.
pub const max_pread_bytes: u64 = 1 << 30;

pub const Error = error{
    /// The OS refused the read; `errno` is in `last_errno`.
    Io,
    /// End of file came before the payload was complete.
    Short,
    /// The caller's buffer cannot hold the widened window, or is misaligned.
    Capacity,
};

pub const Window = struct {
    lo: u64,
    hi: u64,
    payload_offset: u64,

    pub fn bytes(self: Window) u64 {
        return self.hi - self.lo;
    }
};

/// The aligned window that encloses [offset, offset + len).
pub fn window(offset: u64, len: u64) Window {
    const lo = offset / alignment * alignment;
    const hi = (offset + len + alignment - 1) / alignment * alignment;
    return .{ .lo = lo, .hi = hi, .payload_offset = offset - lo };
}

/// Buffer capacity a caller must provide to read `len` bytes at any offset: len + 2A, rounded.
pub fn capacityFor(len: u64) u64 {
    return (len + 3 * alignment - 1) / alignment * alignment;
}

pub const File = struct {
    fd: c_int,
    /// False when the filesystem refused O_DIRECT and reads go through the page cache.
    direct: bool,
    last_errno: c_int = 0,

    /// Opens read-only, asking for O_DIRECT first and falling back to buffered reads where the
    /// filesystem refuses it (tmpfs answers EINVAL). Returns the positive errno on failure.
    pub fn open(path: [*:0]const u8, errno_out: *c_int) ?File {
        if (is_darwin) return openNoCache(path, errno_out);
        if (platform.is_windows) return openWindows(path, errno_out);
        var flags: c.O = .{ .ACCMODE = .RDONLY, .CLOEXEC = true };
        flags.DIRECT = true;
        const direct_fd = c.open(path, flags);
        if (direct_fd >= 0) return .{ .fd = direct_fd, .direct = true };
        const direct_errno = c._errno().*;
        if (direct_errno != @intFromEnum(c.E.INVAL)) {
            errno_out.* = direct_errno;
            return null;
        }
        flags.DIRECT = false;
        const fd = c.open(path, flags);
        if (fd < 0) {
            errno_out.* = c._errno().*;
            return null;
        }
        return .{ .fd = fd, .direct = false };
    }

    /// macOS: a plain open, then F_NOCACHE; a filesystem that refuses it reads buffered.
    fn openNoCache(path: [*:0]const u8, errno_out: *c_int) ?File {
        const fd = c.open(path, .{ .ACCMODE = .RDONLY, .CLOEXEC = true });
        if (fd < 0) {
            errno_out.* = c._errno().*;
            return null;
        }
        return .{ .fd = fd, .direct = c.fcntl(fd, c.F.NOCACHE, @as(c_int, 1)) == 0 };
    }

    /// Windows: buffered reads only (no O_DIRECT through the C runtime's descriptors).
    fn openWindows(path: [*:0]const u8, errno_out: *c_int) ?File {
        const fd = platform.openReadWindows(path);
        if (fd < 0) {
            errno_out.* = platform.lastErrno();
            return null;
        }
        return .{ .fd = fd, .direct = false };
    }

    pub fn close(self: *File) void {
        platform.close(self.fd);
        self.fd = -1;
    }

    /// Reads [offset, offset + len) into `buf` and returns where the payload starts in it.
    /// With O_DIRECT `buf` must be `alignment`-aligned with room for `capacityFor(len)`.
    pub fn read(self: *File, offset: u64, len: u64, buf: []u8) Error!u64 {
        if (self.direct) {
            if (self.readDirect(offset, len, buf)) |payload| {
                return payload;
            } else |err| {
                // Some filesystems accept O_DIRECT at open and refuse it at read time.
                if (err != Error.Io or self.last_errno != @intFromEnum(c.E.INVAL)) return err;
                self.direct = false;
                _ = self.dropDirectFlag();
            }
        }
        try self.readBuffered(offset, len, buf);
        return 0;
    }

    fn dropDirectFlag(self: *File) bool {
        if (platform.is_windows) return true;
        if (is_darwin) return c.fcntl(self.fd, c.F.NOCACHE, @as(c_int, 0)) == 0;
        const current = c.fcntl(self.fd, c.F.GETFL);
        if (current < 0) return false;
        var flags: c.O = @bitCast(@as(u32, @intCast(current)));
        flags.DIRECT = false;
        return c.fcntl(self.fd, c.F.SETFL, @as(u32, @bitCast(flags))) == 0;
    }

    fn readDirect(self: *File, offset: u64, len: u64, buf: []u8) Error!u64 {
        const w = window(offset, len);
        if (@intFromPtr(buf.ptr) % alignment != 0 or buf.len < w.bytes()) return Error.Capacity;
        const covered = try self.preadAll(buf[0..w.bytes()], w.lo, true);
        if (covered < w.payload_offset + len) return Error.Short;
        return w.payload_offset;
    }

    fn readBuffered(self: *File, offset: u64, len: u64, buf: []u8) Error!void {
        if (buf.len < len) return Error.Capacity;
        const covered = try self.preadAll(buf[0..len], offset, false);
        if (covered < len) return Error.Short;
    }

    /// Fills `dst` from `offset` until it is full or the file ends; returns the bytes read.
    fn preadAll(self: *File, dst: []u8, offset: u64, direct: bool) Error!u64 {
        return self.preadChunked(dst, offset, direct, max_pread_bytes);
    }

    /// `preadAll` asking for at most `chunk` bytes per call (a multiple of `alignment`).
    fn preadChunked(self: *File, dst: []u8, offset: u64, direct: bool, chunk: u64) Error!u64 {
        var done: u64 = 0;
        while (done < dst.len) {
            const want = @min(dst.len - done, chunk);
            if (platform.is_windows) {
                const got = platform.preadWindows(self.fd, dst[done..][0..want], offset + done) orelse {
                    self.last_errno = 5; // EIO: ReadFile's own error is not an errno
                    return Error.Io;
                };
                if (got == 0) break;
                done += got;
                continue;
            }
            const n = c.pread(self.fd, dst.ptr + done, want, @intCast(offset + done));
            if (n < 0) {
                const errno = c._errno().*;
                if (errno == @intFromEnum(c.E.INTR)) continue;
                self.last_errno = errno;
                return Error.Io;
            }
            if (n == 0) break;
            done += @intCast(n);
            // A direct read only returns a partial block at end of file.
            if (direct and done % alignment != 0) break;
        }
        return done;
    }
};

test "window widens to the enclosing aligned range" {
    const w = window(5000, 100);
    try std.testing.expectEqual(@as(u64, 4096), w.lo);
    try std.testing.expectEqual(@as(u64, 8192), w.hi);
    try std.testing.expectEqual(@as(u64, 904), w.payload_offset);
    const straddle = window(4000, 200);
    try std.testing.expectEqual(@as(u64, 0), straddle.lo);
    try std.testing.expectEqual(@as(u64, 8192), straddle.hi);
    try std.testing.expect(capacityFor(200) >= straddle.bytes());
}

test "a read larger than one pread chunk arrives whole" {
    const path = "/tmp/k3-aligned-read-chunk-test.bin";
    var data: [5 * 4096 + 300]u8 = undefined;
    for (&data, 0..) |*b, i| b.* = @truncate(i * 13 + 1);
    {
        const f = try std.fs.createFileAbsolute(path, .{});
        defer f.close();
        try f.writeAll(&data);
    }
    defer std.fs.deleteFileAbsolute(path) catch {};
    var errno: c_int = 0;
    var file = File.open(path, &errno) orelse return error.OpenFailed;
    defer file.close();
    const buf = try std.heap.page_allocator.alignedAlloc(u8, alignment, capacityFor(data.len));
    defer std.heap.page_allocator.free(buf);
    // Whole blocks, so the read is valid with O_DIRECT too; the last one ends at end of file.
    const got = try file.preadChunked(buf[0 .. 6 * alignment], 0, file.direct, alignment);
    try std.testing.expectEqual(@as(u64, data.len), got);
    try std.testing.expectEqualSlices(u8, &data, buf[0..data.len]);
}
