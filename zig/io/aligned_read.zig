//! Positioned reads that bypass the page cache (O_DIRECT) where the filesystem allows it.
//!
//! O_DIRECT needs the file offset, the length and the buffer address to be multiples of
//! `alignment`. Tensors start wherever the previous one ended, so a read of [offset,
//! offset+len) is widened to the enclosing aligned window and the payload lands at
//! `offset - window.lo` inside the caller's aligned buffer. The last window of a file may run
//! past end-of-file: that short read is fine as long as the payload itself was covered.
const std = @import("std");
const builtin = @import("builtin");
const c = std.c;

/// O_DIRECT is Linux's; elsewhere (macOS) files are read through the page cache, with
/// F_NOCACHE asking the kernel not to keep what was read.
const has_direct = builtin.os.tag == .linux;

pub const alignment: u64 = 4096;

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
        var flags: c.O = .{ .ACCMODE = .RDONLY, .CLOEXEC = true };
        if (!has_direct) {
            const fd = c.open(path, flags);
            if (fd < 0) {
                errno_out.* = c._errno().*;
                return null;
            }
            if (builtin.os.tag.isDarwin()) _ = c.fcntl(fd, c.F.NOCACHE, @as(c_int, 1));
            return .{ .fd = fd, .direct = false };
        }
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

    pub fn close(self: *File) void {
        _ = c.close(self.fd);
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
        if (!has_direct) return true;
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
        var done: u64 = 0;
        while (done < dst.len) {
            const n = c.pread(self.fd, dst.ptr + done, dst.len - done, @intCast(offset + done));
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
