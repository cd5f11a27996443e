//! Which compilation of the kernels runs: the variants, the CPU check, the one switch.
//!
//! A variant is one compilation of zig/kernels/ for one instruction set, reached through its
//! `Table` (zig/kernels/table.zig). zig/abi.zig calls every kernel through `active()`, so the
//! callers never name a variant. The library's own compilation is the portable baseline
//! (x86-64-v3 on x86-64; the aarch64 baseline, which includes NEON, on aarch64) and also
//! carries the scalar reference (plain loops in the canonical order, selected at run time). A
//! wider variant is a separate object built by build.zig from the same sources for its CPU
//! (x86_64_v4.zig) and linked in; its table is a hidden symbol.
//!
//! The choice is made once, on the first kernel call or `select`: the widest variant this
//! library has and this CPU supports. `select` (K3_ISA, through k3_isa_select) overrides it
//! and refuses a variant the library or the CPU lacks.
//!
//! Adding a variant (say a hand-tuned aarch64 NEON one): a root file beside x86_64_v4.zig that
//! exports the kernels' table under its own name, its object in build.zig for that
//! architecture, its member in `Isa`, and its line in `compiled` and `cpuHas` below.
const std = @import("std");
const builtin = @import("builtin");
const kernels = @import("kernels");
const pool = @import("pool");
const cpu_x86 = @import("cpu_x86.zig");

pub const Table = kernels.Table;

/// Kernel variant codes (k3_isa_select, k3_isa_current; mirrored in src/native/abi.ts).
pub const Isa = enum(u32) { scalar = 0, v3 = 1, v4 = 2, neon = 3 };

/// The variant the library's own compilation is.
pub const baseline: Isa = switch (builtin.cpu.arch) {
    .x86_64 => .v3,
    .aarch64 => .neon,
    else => @compileError("libk3 is built for x86-64 and aarch64"),
};

const x86 = struct {
    extern const k3_kernels_x86_64_v4: Table;
};

/// The table of a variant this library was built with, or null.
fn compiled(isa: Isa) ?*const Table {
    if (isa == .scalar or isa == baseline) return &kernels.table;
    return switch (isa) {
        .v4 => if (builtin.cpu.arch == .x86_64) &x86.k3_kernels_x86_64_v4 else null,
        else => null,
    };
}

var cpu_level: ?cpu_x86.Level = null;

fn cpuHas(isa: Isa) bool {
    return switch (isa) {
        .scalar => true,
        .v3, .v4 => switch (builtin.cpu.arch) {
            .x86_64 => {
                if (cpu_level == null) cpu_level = cpu_x86.detect();
                return if (isa == .v3) cpu_level.?.v3 else cpu_level.?.v4;
            },
            else => false,
        },
        .neon => builtin.cpu.arch == .aarch64,
    };
}

/// Whether a variant can run (codes of k3_isa_support; mirrored in src/native/abi.ts).
pub const Support = enum(u32) { absent = 0, cpu_lacks = 1, runnable = 2 };

pub fn support(isa: Isa) Support {
    if (compiled(isa) == null) return .absent;
    return if (cpuHas(isa)) .runnable else .cpu_lacks;
}

/// Built into this library and runnable on this CPU.
pub fn supported(isa: Isa) bool {
    return support(isa) == .runnable;
}

/// What the library picks by itself: the widest supported variant.
pub fn widest() Isa {
    for ([_]Isa{ .v4, baseline }) |isa| if (supported(isa)) return isa;
    return .scalar;
}

var active_table: ?*const Table = null;
var active_isa: Isa = .scalar;

/// The table every kernel call goes through (chosen on first use).
pub inline fn active() *const Table {
    return active_table orelse choose();
}

fn choose() *const Table {
    select(widest()) catch unreachable;
    return active_table.?;
}

/// Switches every later kernel call to `isa`. Kernels run from one thread and never during a
/// switch (zig/abi.zig's contract), so a plain store is enough.
pub fn select(isa: Isa) error{Unsupported}!void {
    if (!supported(isa)) return error.Unsupported;
    if (!vector_ports_chosen) selectVectorPorts(cpuVectorPorts());
    kernels.common.setPath(if (isa == .scalar) .scalar else .simd);
    active_table = compiled(isa).?;
    active_isa = isa;
}

pub fn current() Isa {
    _ = active();
    return active_isa;
}

var vector_ports_chosen = false;

/// Where this CPU issues its vector shuffles, blends and conversions (zig/pool.zig
/// `VectorPorts`): on the multiply-add ports on Intel's x86-64 CPUs, beside them elsewhere.
fn cpuVectorPorts() pool.VectorPorts {
    if (builtin.cpu.arch == .x86_64 and cpu_x86.intel()) return .on_fma_ports;
    return .beside_fma;
}

/// Sets the ports every later kernel call plans for (a speed choice: the bits do not change);
/// the library sets it from the CPU when it picks its variant, tests both ways.
pub fn selectVectorPorts(w: pool.VectorPorts) void {
    pool.setVectorPorts(w);
    vector_ports_chosen = true;
}

pub fn currentVectorPorts() pool.VectorPorts {
    _ = active();
    return pool.vectorPorts();
}

test "the vector ports follow the CPU until set; setting it survives a variant switch" {
    _ = active();
    try std.testing.expectEqual(cpuVectorPorts(), currentVectorPorts());
    selectVectorPorts(.on_fma_ports);
    try select(baseline);
    try std.testing.expectEqual(pool.VectorPorts.on_fma_ports, currentVectorPorts());
    selectVectorPorts(cpuVectorPorts());
    try select(widest());
}

test "the widest variant is chosen by default; every supported variant can be selected" {
    try std.testing.expect(supported(.scalar));
    try std.testing.expect(supported(baseline));
    try std.testing.expectEqual(widest(), current());
    for (std.enums.values(Isa)) |isa| {
        if (supported(isa)) {
            try select(isa);
            try std.testing.expectEqual(isa, current());
        } else {
            try std.testing.expectError(error.Unsupported, select(isa));
        }
    }
    try select(widest());
}
