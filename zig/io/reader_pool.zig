//! Background reads: a small pool of I/O threads serving positioned reads from a fixed table
//! of jobs, so the disk sees several requests at once (a layer's top-k experts) and reads
//! overlap compute (the next trunk layer). Reads go through `aligned_read`, O_DIRECT where the
//! filesystem allows it.
//!
//! Policy (what to read, when, into which buffer) is the caller's; this file only moves bytes.
//! A job's destination must stay valid and untouched until `wait` returns for it.
const std = @import("std");
const aligned_read = @import("aligned_read.zig");
const Status = @import("../status.zig").Status;

/// Jobs that can be outstanding at once (a named limit: the job table is sized by it).
pub const max_jobs: u32 = 256;
/// I/O threads; more than the cores because they mostly wait on the device.
pub const max_threads: u32 = 32;
pub const default_threads: u32 = 8;

const State = enum(u8) { free, queued, running, done };

const Job = struct {
    state: State = .free,
    fd: i32 = -1,
    direct: bool = false,
    offset: u64 = 0,
    len: u64 = 0,
    buf: [*]u8 = undefined,
    cap: u64 = 0,
    /// Results, valid once `state == .done`.
    status: i32 = 0,
    payload: u64 = 0,
    nanos: u64 = 0,
    still_direct: bool = false,
    /// Submission order, so workers serve jobs first come, first served.
    ticket: u64 = 0,
};

var mutex: std.Thread.Mutex = .{};
var work_ready: std.Thread.Condition = .{};
var job_done: std.Thread.Condition = .{};
var jobs: [max_jobs]Job = [_]Job{.{}} ** max_jobs;
var workers: [max_threads]std.Thread = undefined;
var worker_count: u32 = 0;
var next_ticket: u64 = 0;
var stopping = false;

/// Starts the I/O threads (idempotent). `count` 0 means `default_threads`.
pub fn init(count: u32) error{SystemResources}!u32 {
    mutex.lock();
    defer mutex.unlock();
    if (worker_count > 0) return worker_count;
    const want = if (count == 0) default_threads else @min(count, max_threads);
    stopping = false;
    while (worker_count < want) : (worker_count += 1) {
        workers[worker_count] = std.Thread.spawn(.{ .stack_size = 256 * 1024 }, workerMain, .{}) catch {
            if (worker_count == 0) return error.SystemResources;
            break;
        };
    }
    return worker_count;
}

/// Queues a read of [offset, offset + len) of `fd` into `buf` (capacity `cap`). Returns the job
/// handle (>= 0) or a negative Status.
pub fn submit(fd: i32, direct: bool, offset: u64, len: u64, buf: [*]u8, cap: u64) i32 {
    if (fd < 0 or len == 0) return @intFromEnum(Status.bad_argument);
    if (init(0)) |_| {} else |_| return @intFromEnum(Status.bad_argument);
    return enqueue(fd, direct, offset, len, buf, cap);
}

/// `submit` without starting the I/O threads.
fn enqueue(fd: i32, direct: bool, offset: u64, len: u64, buf: [*]u8, cap: u64) i32 {
    mutex.lock();
    defer mutex.unlock();
    for (&jobs, 0..) |*job, i| {
        if (job.state != .free) continue;
        job.* = .{
            .state = .queued, .fd = fd, .direct = direct, .offset = offset, .len = len, .buf = buf, .cap = cap,
            .ticket = next_ticket,
        };
        next_ticket += 1;
        work_ready.signal();
        return @intCast(i);
    }
    return @intFromEnum(Status.queue_full);
}

pub const Result = struct {
    status: i32,
    payload: u64,
    nanos: u64,
    still_direct: bool,
};

/// Blocks until job `handle` is done, frees its entry and returns its result. A job no I/O
/// thread has taken yet is read by the caller itself: it would only wait for one to wake (on a
/// small read from the page cache, that hand-off took longer than the read), and the bytes are
/// the same whoever reads them.
pub fn wait(handle: i32) ?Result {
    if (handle < 0 or handle >= max_jobs) return null;
    const job = &jobs[@intCast(handle)];
    mutex.lock();
    defer mutex.unlock();
    if (job.state == .free) return null;
    if (job.state == .queued) {
        job.state = .running;
        run(job);
    }
    while (job.state != .done) job_done.wait(&mutex);
    const result = Result{ .status = job.status, .payload = job.payload, .nanos = job.nanos, .still_direct = job.still_direct };
    job.state = .free;
    return result;
}

/// True once job `handle` has finished (it still has to be collected with `wait`).
pub fn isDone(handle: i32) bool {
    if (handle < 0 or handle >= max_jobs) return false;
    mutex.lock();
    defer mutex.unlock();
    return jobs[@intCast(handle)].state == .done;
}

fn takeOldestQueued() ?*Job {
    var best: ?*Job = null;
    for (&jobs) |*job| {
        if (job.state == .queued and (best == null or job.ticket < best.?.ticket)) best = job;
    }
    return best;
}

fn workerMain() void {
    mutex.lock();
    defer mutex.unlock();
    while (true) {
        while (!stopping and takeOldestQueued() == null) work_ready.wait(&mutex);
        if (stopping) return;
        const job = takeOldestQueued().?;
        job.state = .running;
        run(job);
    }
}

/// Reads `job` (state `.running`, taken by the caller under `mutex`) with the mutex released,
/// then marks it done. Called and returns with `mutex` held.
fn run(job: *Job) void {
    const fd = job.fd;
    const direct = job.direct;
    const offset = job.offset;
    const len = job.len;
    const buf = job.buf;
    const cap = job.cap;
    mutex.unlock();
    var file = aligned_read.File{ .fd = fd, .direct = direct };
    var timer = std.time.Timer.start() catch unreachable;
    var status: i32 = 0;
    var payload: u64 = 0;
    if (file.read(offset, len, buf[0..cap])) |p| {
        payload = p;
    } else |err| {
        status = switch (err) {
            error.Io => -file.last_errno,
            error.Short => @intFromEnum(Status.short_read),
            error.Capacity => @intFromEnum(Status.capacity),
        };
    }
    const nanos = timer.read();
    mutex.lock();
    job.status = status;
    job.payload = payload;
    job.nanos = nanos;
    job.still_direct = file.direct;
    job.state = .done;
    job_done.broadcast();
}

test "reads land in their buffers, several at once" {
    const path = "/tmp/k3-reader-pool-test.bin";
    {
        const f = try std.fs.createFileAbsolute(path, .{});
        defer f.close();
        var data: [3 * 4096 + 100]u8 = undefined;
        for (&data, 0..) |*b, i| b.* = @truncate(i * 7);
        try f.writeAll(&data);
    }
    defer std.fs.deleteFileAbsolute(path) catch {};
    var errno: c_int = 0;
    var file = aligned_read.File.open(path, &errno) orelse return error.OpenFailed;
    defer file.close();
    const cap = aligned_read.capacityFor(300);
    var handles: [4]i32 = undefined;
    var bufs: [4][]align(aligned_read.alignment) u8 = undefined;
    for (&bufs, 0..) |*b, i| {
        b.* = try std.heap.page_allocator.alignedAlloc(u8, aligned_read.alignment, cap);
        handles[i] = submit(file.fd, file.direct, 5000 + i * 1000, 300, b.*.ptr, cap);
        try std.testing.expect(handles[i] >= 0);
    }
    for (handles, 0..) |h, i| {
        const r = wait(h).?;
        try std.testing.expectEqual(@as(i32, 0), r.status);
        const got = bufs[i][r.payload .. r.payload + 300];
        for (got, 0..) |b, j| try std.testing.expectEqual(@as(u8, @truncate((5000 + i * 1000 + j) * 7)), b);
        std.heap.page_allocator.free(bufs[i]);
    }
}

/// Stops and joins the I/O threads (the tests' way to leave jobs queued with nobody to take them).
fn stopWorkers() void {
    mutex.lock();
    stopping = true;
    work_ready.broadcast();
    const count = worker_count;
    mutex.unlock();
    for (workers[0..count]) |worker| worker.join();
    mutex.lock();
    worker_count = 0;
    stopping = false;
    mutex.unlock();
}

test "a job no I/O thread has taken is read by the one who waits for it" {
    const path = "/tmp/k3-reader-pool-inline-test.bin";
    {
        const f = try std.fs.createFileAbsolute(path, .{});
        defer f.close();
        var data: [2 * 4096 + 50]u8 = undefined;
        for (&data, 0..) |*b, i| b.* = @truncate(i * 13 + 1);
        try f.writeAll(&data);
    }
    defer std.fs.deleteFileAbsolute(path) catch {};
    var errno: c_int = 0;
    var file = aligned_read.File.open(path, &errno) orelse return error.OpenFailed;
    defer file.close();
    stopWorkers();
    defer _ = init(0) catch {};
    const cap = aligned_read.capacityFor(500);
    const buf = try std.heap.page_allocator.alignedAlloc(u8, aligned_read.alignment, cap);
    defer std.heap.page_allocator.free(buf);
    const handle = enqueue(file.fd, file.direct, 4000, 500, buf.ptr, cap);
    try std.testing.expect(handle >= 0);
    try std.testing.expectEqual(@as(u32, 0), worker_count); // nobody else could have read it
    const r = wait(handle).?;
    try std.testing.expectEqual(@as(i32, 0), r.status);
    for (buf[r.payload .. r.payload + 500], 0..) |b, j| try std.testing.expectEqual(@as(u8, @truncate((4000 + j) * 13 + 1)), b);
    try std.testing.expect(!isDone(handle)); // collected: its entry is free again
}
