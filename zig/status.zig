//! k3's own status codes, shared by the exported ABI (abi.zig) and the background reader
//! (io/reader_pool.zig), which hands them back through `k3_io_wait`.
//!
//! Status codes are i32: 0 is success, a negative value is an error. Values in -1 .. -4095 are
//! a negated errno from the OS; the named codes below are k3's own, outside that range.

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
    /// The background reader's job table is full.
    queue_full = -10005,
    /// The kernel variant asked for is not in this library or not supported by this CPU.
    unsupported = -10006,
    /// Stored bytes of a compressed trunk are damaged (a block's entry, header or checksum).
    damaged = -10007,
};

pub fn code(status: Status) i32 {
    return @intFromEnum(status);
}
