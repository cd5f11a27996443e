//! What the kernels of a variant compilation (x86_64_v4.zig) import as "pool": the subset of
//! zig/pool.zig the kernels use, forwarded to the library's one pool through the hidden
//! `k3_pool_api` table that zig/abi.zig exports. A variant is compiled for another CPU as a
//! separate object, so importing zig/pool.zig itself would give it a second, private pool.
//! Only declarations come from zig/pool.zig ("pool_decls": the Api type, the limits and the
//! `erased` adapter, which touches no pool state); its state and other functions are never
//! referenced here.
const decls = @import("pool_decls");

pub const max_threads = decls.max_threads;
pub const scratch_alignment = decls.scratch_alignment;

extern const k3_pool_api: decls.Api;

pub fn parallelFor(
    items: usize,
    grain: usize,
    ctx: anytype,
    comptime body: fn (@TypeOf(ctx), usize, usize, usize) void,
) void {
    k3_pool_api.parallel_for(items, grain, @ptrCast(ctx), decls.erased(@TypeOf(ctx), body));
}

pub fn reserveScratch(bytes: usize) error{OutOfMemory}!void {
    if (!k3_pool_api.reserve_scratch(bytes)) return error.OutOfMemory;
}

pub fn reserveShared(bytes: usize) error{OutOfMemory}![]align(scratch_alignment) u8 {
    var ptr: [*]align(scratch_alignment) u8 = undefined;
    if (!k3_pool_api.reserve_shared(bytes, &ptr)) return error.OutOfMemory;
    return ptr[0..bytes];
}

pub fn scratchFor(worker: usize) []align(scratch_alignment) u8 {
    var len: usize = 0;
    const ptr = k3_pool_api.scratch_for(worker, &len);
    return ptr[0..len];
}

pub fn threadCount() u32 {
    return k3_pool_api.thread_count();
}

pub const VectorPorts = decls.VectorPorts;

pub fn vectorPorts() VectorPorts {
    return @enumFromInt(k3_pool_api.vector_ports());
}
