//! The few C library calls whose spelling differs between POSIX and Windows: aligned allocation
//! and file descriptors. Everything else in libk3 is the same on every target.
//!
//! Windows (the untested x64 build): the C runtime's `_aligned_malloc`/`_aligned_free` and its
//! `_open`/`_close` descriptors; positioned reads go to the descriptor's HANDLE with an offset
//! (ReadFile with OVERLAPPED), which, like pread, leaves the file position alone so the I/O
//! threads can share one descriptor. There is no O_DIRECT there: reads are buffered.
const std = @import("std");
const builtin = @import("builtin");

pub const is_windows = builtin.os.tag == .windows;

extern "c" fn _aligned_malloc(size: usize, alignment: usize) ?*anyopaque;
extern "c" fn _aligned_free(ptr: ?*anyopaque) void;
extern "c" fn _open(path: [*:0]const u8, flags: c_int, ...) c_int;
extern "c" fn _close(fd: c_int) c_int;
extern "c" fn _get_osfhandle(fd: c_int) isize;
extern "c" fn _errno() *c_int;

/// `alignment`-aligned memory (a power of two, at least the pointer size); null on failure.
pub fn alignedAlloc(alignment: usize, bytes: usize) ?*anyopaque {
    if (is_windows) return _aligned_malloc(bytes, alignment);
    var ptr: ?*anyopaque = null;
    if (std.c.posix_memalign(&ptr, alignment, bytes) != 0) return null;
    return ptr;
}

/// Frees what `alignedAlloc` returned.
pub fn alignedFree(ptr: ?*anyopaque) void {
    if (is_windows) return _aligned_free(ptr);
    std.c.free(ptr);
}

pub fn close(fd: c_int) void {
    if (is_windows) {
        _ = _close(fd);
    } else {
        _ = std.c.close(fd);
    }
}

/// Windows: opens read-only in binary mode; the descriptor (>= 0) or -1 with the errno set.
pub fn openReadWindows(path: [*:0]const u8) c_int {
    const o_binary: c_int = 0x8000;
    return _open(path, o_binary);
}

pub fn lastErrno() c_int {
    return _errno().*;
}

/// Windows: a positioned read of the descriptor's HANDLE; the bytes read, or null on failure.
pub fn preadWindows(fd: c_int, dst: []u8, offset: u64) ?usize {
    const handle: std.os.windows.HANDLE = @ptrFromInt(@as(usize, @bitCast(_get_osfhandle(fd))));
    return std.os.windows.ReadFile(handle, dst, offset) catch null;
}
