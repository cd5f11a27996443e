//! Persistent compute threads. One pool per process, driven from one thread at a time (the
//! JavaScript thread); the I/O reader has its own thread and never uses this pool.
//!
//! Invariant: work is split by independent output items only (matrix rows, heads, channels,
//! tokens). Every item is computed start to finish by one thread with the same code whatever
//! the thread count, and nothing is ever reduced across threads, so results are bit-identical
//! for any thread count (model.md §8.4). Which thread takes which chunk is dynamic (an atomic
//! counter), which balances load without touching the arithmetic.
//!
//! Threads are pthreads (the library links libc; see build.zig and DESIGN.md). The calling
//! thread is worker 0 and works too; workers 1 … n−1 spin briefly after a job (kernels come in
//! quick succession during decode) and then sleep on a futex.
//!
//! Sizing: `init(0)` uses the CPUs this process may run on (sched_getaffinity). k3 reads the
//! `K3_THREADS` environment variable in TypeScript (src/native/kernels.ts) and passes it to
//! `k3_pool_init`; a kernel called before any init starts the pool at the default size.
const std = @import("std");
const platform = @import("platform");
const Atomic = std.atomic.Value;
const Futex = std.Thread.Futex;

/// Upper bound on the thread count (a named limit: arrays below are sized by it).
pub const max_threads: u32 = 256;
/// How long an idle worker spins before sleeping, in nanoseconds.
const spin_ns: u64 = 200_000;
/// Alignment of per-worker scratch memory.
pub const scratch_alignment: usize = 64;

/// A parallel job's body. C calling convention: kernel variants compiled for other CPUs
/// (zig/isa/) hand their bodies to this pool through `Api`.
pub const TaskFn = *const fn (ctx: *const anyopaque, begin: usize, end: usize, worker: usize) callconv(.c) void;

const Task = struct {
    run: TaskFn,
    ctx: *const anyopaque,
    items: usize,
    chunk: usize,
};

const Scratch = struct {
    ptr: ?[*]align(scratch_alignment) u8 = null,
    bytes: usize = 0,
};

var threads: u32 = 0; // 0: not started
var workers: [max_threads]std.Thread = undefined;
var scratch: [max_threads]Scratch = [_]Scratch{.{}} ** max_threads;
var shared_scratch: Scratch = .{};
var task: Task = undefined;
var next_item: Atomic(usize) = Atomic(usize).init(0);
var generation: Atomic(u32) = Atomic(u32).init(0);
var sleepers: Atomic(u32) = Atomic(u32).init(0);
var pending: Atomic(u32) = Atomic(u32).init(0);
var done: Atomic(u32) = Atomic(u32).init(0);
var main_waiting: Atomic(u32) = Atomic(u32).init(0);
var shutting_down: Atomic(bool) = Atomic(bool).init(false);
var lock: std.Thread.Mutex = .{};
threadlocal var inside_task: bool = false;
var fine_grain = Atomic(bool).init(false);

/// Test hook: when on, every parallel job is split into one-item chunks whatever its grain,
/// so small test inputs still spread over all threads in an interleaved order.
pub fn setFineGrain(on: bool) void {
    fine_grain.store(on, .seq_cst);
}

/// Where the CPU issues its vector shuffles, blends and conversions (the bf16 widening:
/// vpunpcklwd, vcvtps2pd; the MXFP4 lane trees' blends), which decides how the kernels spend
/// them. `.beside_fma`: on pipes of their own (Zen 4), so widening a weight vector again for
/// every token group is nearly free and a blend beside a shuffle runs in parallel with it.
/// `.on_fma_ports`: on the ports of the multiply-adds (the AVX-512 Xeons), so each such
/// operation costs a multiply-add: the bf16 kernel widens once for many tokens and the MXFP4
/// one-token trees fold their blends into shuffles. A speed choice only: both give the same
/// bits. It lives here, beside the pool, because every kernel variant must see the one
/// setting (`Api`); zig/isa/dispatch.zig sets it from the CPU when the library picks its
/// variant, and tests set it both ways (`k3_vector_ports_select`).
pub const VectorPorts = enum(u32) { beside_fma = 0, on_fma_ports = 1 };

var vector_ports_setting = Atomic(u32).init(@intFromEnum(VectorPorts.beside_fma));

pub fn setVectorPorts(w: VectorPorts) void {
    vector_ports_setting.store(@intFromEnum(w), .seq_cst);
}

pub fn vectorPorts() VectorPorts {
    return @enumFromInt(vector_ports_setting.load(.monotonic));
}

pub const InitError = error{ SystemResources, OutOfMemory };

/// CPUs this process may run on; at least 1.
pub fn defaultThreads() u32 {
    const n = std.Thread.getCpuCount() catch 1;
    return @intCast(@max(1, @min(n, max_threads)));
}

/// Starts (or restarts with a different size) the pool. `count` 0 means `defaultThreads()`.
pub fn init(count: u32) InitError!void {
    lock.lock();
    defer lock.unlock();
    try initLocked(count);
}

fn initLocked(count: u32) InitError!void {
    const want = if (count == 0) defaultThreads() else @min(count, max_threads);
    if (want == threads) return;
    stopLocked();
    shutting_down.store(false, .seq_cst);
    var started: u32 = 1;
    errdefer {
        threads = started;
        stopLocked();
    }
    const gen = generation.load(.seq_cst);
    while (started < want) : (started += 1) {
        workers[started] = std.Thread.spawn(.{ .stack_size = 1 << 20 }, workerMain, .{ started, gen }) catch
            return error.SystemResources;
    }
    threads = want;
}

fn stopLocked() void {
    if (threads > 1) {
        shutting_down.store(true, .seq_cst);
        _ = generation.fetchAdd(1, .seq_cst);
        Futex.wake(&generation, std.math.maxInt(u32));
        for (workers[1..threads]) |w| w.join();
    }
    threads = 0;
}

/// Stops the workers and frees scratch memory (tests; the process normally never calls it).
pub fn deinit() void {
    lock.lock();
    defer lock.unlock();
    stopLocked();
    for (&scratch) |*s| {
        if (s.ptr) |p| platform.alignedFree(p);
        s.* = .{};
    }
    if (shared_scratch.ptr) |p| platform.alignedFree(p);
    shared_scratch = .{};
}

/// Current thread count (starting the pool at its default size if needed).
pub fn threadCount() u32 {
    lock.lock();
    defer lock.unlock();
    if (threads == 0) initLocked(0) catch return 1;
    return threads;
}

/// Makes every worker's scratch at least `bytes` long. Call before `parallelFor`; inside a
/// task, `scratchFor(worker)` then returns that memory. Scratch only grows (amortised: no
/// allocation once the largest request has been seen).
pub fn reserveScratch(bytes: usize) error{OutOfMemory}!void {
    lock.lock();
    defer lock.unlock();
    if (threads == 0) initLocked(0) catch {};
    const n = @max(threads, 1);
    for (scratch[0..n]) |*s| try grow(s, bytes);
}

fn grow(s: *Scratch, bytes: usize) error{OutOfMemory}!void {
    if (s.bytes >= bytes) return;
    const grown = @max(bytes, s.bytes * 2);
    const raw = platform.alignedAlloc(scratch_alignment, grown) orelse return error.OutOfMemory;
    if (s.ptr) |p| platform.alignedFree(p);
    s.* = .{ .ptr = @ptrCast(@alignCast(raw)), .bytes = grown };
}

/// One buffer shared by all workers for the duration of one kernel: the calling thread fills
/// it before `parallelFor` (e.g. activations widened to f64) and the tasks only read it.
/// Kernels run one at a time (the pool is driven from one thread), so it is never contended.
pub fn reserveShared(bytes: usize) error{OutOfMemory}![]align(scratch_alignment) u8 {
    try grow(&shared_scratch, bytes);
    return shared_scratch.ptr.?[0..bytes];
}

/// The scratch memory of `worker` (valid inside a task after `reserveScratch`).
pub fn scratchFor(worker: usize) []align(scratch_alignment) u8 {
    const s = scratch[worker];
    return s.ptr.?[0..s.bytes];
}

/// `body` behind the untyped `TaskFn` signature the pool runs (also used by
/// zig/isa/pool_proxy.zig, whose variants reach this pool through `Api`).
pub fn erased(comptime Ctx: type, comptime body: fn (Ctx, usize, usize, usize) void) TaskFn {
    return struct {
        fn run(raw: *const anyopaque, begin: usize, end: usize, worker: usize) callconv(.c) void {
            body(@as(Ctx, @ptrCast(@alignCast(raw))), begin, end, worker);
        }
    }.run;
}

/// Runs `body(ctx, begin, end, worker)` over [0, items) in chunks of at least `grain` items,
/// on all threads, and returns when every item is done. Small jobs (fewer than two grains)
/// and nested calls run inline on the calling thread.
pub fn parallelFor(
    items: usize,
    grain: usize,
    ctx: anytype,
    comptime body: fn (@TypeOf(ctx), usize, usize, usize) void,
) void {
    parallelForRaw(items, grain, @ptrCast(ctx), erased(@TypeOf(ctx), body));
}

/// `parallelFor` with a type-erased body (what `Api.parallel_for` forwards to).
pub fn parallelForRaw(items: usize, grain: usize, ctx: *const anyopaque, run: TaskFn) void {
    if (items == 0) return;
    const fine = fine_grain.load(.monotonic);
    const g: usize = if (fine) 1 else @max(grain, 1);
    if (inside_task or items < 2 * g) {
        run(ctx, 0, items, 0);
        return;
    }
    lock.lock();
    defer lock.unlock();
    if (threads == 0) initLocked(0) catch {};
    if (threads <= 1) {
        run(ctx, 0, items, 0);
        return;
    }
    // About four chunks per thread, never below the grain.
    const chunk: usize = if (fine) 1 else @max(g, (items + threads * 4 - 1) / (threads * 4));
    task = .{ .run = run, .ctx = ctx, .items = items, .chunk = chunk };
    next_item.store(0, .seq_cst);
    pending.store(threads - 1, .seq_cst);
    done.store(0, .seq_cst);
    _ = generation.fetchAdd(1, .seq_cst);
    if (sleepers.load(.seq_cst) > 0) Futex.wake(&generation, std.math.maxInt(u32));
    runChunks(0);
    waitDone();
}

fn runChunks(worker: usize) void {
    inside_task = true;
    defer inside_task = false;
    const t = task;
    while (true) {
        const begin = next_item.fetchAdd(t.chunk, .acq_rel);
        if (begin >= t.items) break;
        t.run(t.ctx, begin, @min(begin + t.chunk, t.items), worker);
    }
}

/// Spins, then sleeps on the futex, while `word` holds `value`: a short wait costs no system
/// call and a long one no CPU. `asleep` counts the threads sleeping on `word`, so whoever
/// changes it calls Futex.wake only when one is.
fn waitWhile(word: *const Atomic(u32), value: u32, asleep: *Atomic(u32)) void {
    var timer = std.time.Timer.start() catch null;
    var spins: u32 = 0;
    while (word.load(.seq_cst) == value) {
        spins +%= 1;
        if (spins % 64 != 0) {
            std.atomic.spinLoopHint();
            continue;
        }
        const elapsed = if (timer) |*tm| tm.read() else spin_ns;
        if (elapsed >= spin_ns) {
            _ = asleep.fetchAdd(1, .seq_cst);
            Futex.wait(word, value);
            _ = asleep.fetchSub(1, .seq_cst);
        }
    }
}

fn waitDone() void {
    waitWhile(&done, 0, &main_waiting);
}

fn workerMain(id: u32, start_generation: u32) void {
    var seen = start_generation;
    while (true) {
        waitWhile(&generation, seen, &sleepers);
        seen = generation.load(.seq_cst);
        if (shutting_down.load(.seq_cst)) return;
        runChunks(id);
        if (pending.fetchSub(1, .acq_rel) == 1) {
            done.store(1, .seq_cst);
            if (main_waiting.load(.seq_cst) != 0) Futex.wake(&done, 1);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The pool as seen from a kernel variant (zig/isa/): each variant is a separate compilation for
// its own CPU, so it cannot share this file's state; it reaches the one pool through this table
// of C-callable entry points instead (zig/isa/pool_proxy.zig wraps them in this file's API).

pub const Api = extern struct {
    parallel_for: *const fn (items: usize, grain: usize, ctx: *const anyopaque, run: TaskFn) callconv(.c) void,
    /// Returns false when the memory could not be grown.
    reserve_scratch: *const fn (bytes: usize) callconv(.c) bool,
    /// Sets `out` to the shared buffer; returns false when it could not be grown.
    reserve_shared: *const fn (bytes: usize, out: *[*]align(scratch_alignment) u8) callconv(.c) bool,
    /// The worker's scratch; its length goes to `len`.
    scratch_for: *const fn (worker: usize, len: *usize) callconv(.c) [*]align(scratch_alignment) u8,
    thread_count: *const fn () callconv(.c) u32,
    /// The `VectorPorts` code.
    vector_ports: *const fn () callconv(.c) u32,
};

pub const api = Api{
    .parallel_for = struct {
        fn f(items: usize, grain: usize, ctx: *const anyopaque, run: TaskFn) callconv(.c) void {
            parallelForRaw(items, grain, ctx, run);
        }
    }.f,
    .reserve_scratch = struct {
        fn f(bytes: usize) callconv(.c) bool {
            reserveScratch(bytes) catch return false;
            return true;
        }
    }.f,
    .reserve_shared = struct {
        fn f(bytes: usize, out: *[*]align(scratch_alignment) u8) callconv(.c) bool {
            out.* = (reserveShared(bytes) catch return false).ptr;
            return true;
        }
    }.f,
    .scratch_for = struct {
        fn f(worker: usize, len: *usize) callconv(.c) [*]align(scratch_alignment) u8 {
            const s = scratchFor(worker);
            len.* = s.len;
            return s.ptr;
        }
    }.f,
    .thread_count = struct {
        fn f() callconv(.c) u32 {
            return threadCount();
        }
    }.f,
    .vector_ports = struct {
        fn f() callconv(.c) u32 {
            return @intFromEnum(vectorPorts());
        }
    }.f,
};

// ---------------------------------------------------------------------------------------------
// Tests

const testing = std.testing;

const SquareCtx = struct {
    out: []u64,
    hits: []Atomic(u32),
};

fn squareBody(ctx: *const SquareCtx, begin: usize, end: usize, worker: usize) void {
    _ = worker;
    for (begin..end) |i| {
        ctx.out[i] = @as(u64, i) * i;
        _ = ctx.hits[i].fetchAdd(1, .monotonic);
    }
}

test "parallelFor covers every item exactly once at 1, 2, 3 and 7 threads" {
    const n = 100_003;
    const out = try testing.allocator.alloc(u64, n);
    defer testing.allocator.free(out);
    const hits = try testing.allocator.alloc(Atomic(u32), n);
    defer testing.allocator.free(hits);
    for ([_]u32{ 1, 2, 3, 7 }) |t| {
        try init(t);
        try testing.expectEqual(t, threadCount());
        for (hits) |*h| h.* = Atomic(u32).init(0);
        @memset(out, 0);
        for (0..50) |_| {
            for (hits) |*h| h.* = Atomic(u32).init(0);
            parallelFor(n, 1000, &SquareCtx{ .out = out, .hits = hits }, squareBody);
            for (hits) |h| try testing.expectEqual(@as(u32, 1), h.load(.monotonic));
        }
        for (out, 0..) |v, i| try testing.expectEqual(@as(u64, i) * i, v);
    }
    deinit();
}
