//! Builds libk3, the native half of k3: every numeric kernel and the O_DIRECT reader.
//!
//! The library's own compilation is the portable baseline: x86-64-v3 (AVX2 + FMA) by default,
//! the aarch64 baseline with `-Dtarget=aarch64-linux` or `aarch64-macos` (tools/release.ts
//! cross-compiles those); `-Dcpu=` overrides it
//! for experiments. On x86-64 the kernels are compiled a second time for x86-64-v4 (AVX-512) as
//! an object linked into the same library; zig/isa/dispatch.zig picks one when the library
//! loads (zig/isa/ says how a variant is added).
//!
//! Modules: the root (zig/abi.zig, zig/io/, zig/isa/dispatch.zig), "pool" (zig/pool.zig) and
//! "kernels" (zig/kernels/table.zig and its operator files). They are separate so that a
//! variant compilation can take the kernels with a proxy in place of the pool.
//!
//! `-Dsafe=true` builds libk3-safe instead: the same library with Zig's safety checks
//! (ReleaseSafe: bounds, overflow, and the kernels' argument assertions), which the unit tests
//! load so that a broken invariant fails loudly instead of corrupting memory.
const std = @import("std");

pub fn build(b: *std.Build) void {
    const target = b.standardTargetOptions(.{
        .default_target = .{
            .cpu_arch = .x86_64,
            .os_tag = .linux,
            .abi = .gnu,
            .cpu_model = .{ .explicit = &std.Target.x86.cpu.x86_64_v3 },
        },
    });
    const safe = b.option(bool, "safe", "Build libk3-safe (ReleaseSafe) for the unit tests") orelse false;
    const optimize: std.builtin.OptimizeMode = if (safe) .ReleaseSafe else b.standardOptimizeOption(.{});

    const root = libraryModule(b, target, optimize);
    const lib = b.addLibrary(.{ .name = if (safe) "k3-safe" else "k3", .linkage = .dynamic, .root_module = root });
    b.installArtifact(lib);

    // zig-out/abi/kernels.ts: the kernels' bun:ffi declarations, derived from zig/kernels/table.zig
    // by zig/abi_gen.zig run on the build machine (the release builds share it: the ABI is the
    // same on every target). The safe build, run beside this one, leaves it to this one.
    if (!safe) {
        const host = b.graph.host;
        const gen_root = b.createModule(.{ .root_source_file = b.path("zig/abi_gen.zig"), .target = host, .optimize = .Debug });
        gen_root.addImport("kernels", kernelsModule(b, host, .Debug, poolModule(b, host, .Debug, platformModule(b, host, .Debug, false))));
        const gen = b.addRunArtifact(b.addExecutable(.{ .name = "abi-gen", .root_module = gen_root }));
        const generated = gen.addOutputFileArg("kernels.ts");
        b.getInstallStep().dependOn(&b.addInstallFileWithDir(generated, .prefix, "abi/kernels.ts").step);
    }

    // Zig unit tests: the ABI/IO/dispatch root, the kernels (with the real pool), the pool.
    const test_step = b.step("test", "Run the Zig unit tests");
    const pool = poolModule(b, target, optimize, platformModule(b, target, optimize, false));
    const test_roots = [_]*std.Build.Module{ libraryModule(b, target, optimize), kernelsModule(b, target, optimize, pool), poolModule(b, target, optimize, platformModule(b, target, optimize, false)) };
    for (test_roots) |m| test_step.dependOn(&b.addRunArtifact(b.addTest(.{ .root_module = m })).step);
}

/// zig/platform.zig as a module of its own: the root and the pool both use it, and a file may belong to one module only.
fn platformModule(b: *std.Build, target: std.Build.ResolvedTarget, optimize: std.builtin.OptimizeMode, pic: bool) *std.Build.Module {
    return b.createModule(.{ .root_source_file = b.path("zig/platform.zig"), .target = target, .optimize = optimize, .link_libc = true, .pic = if (pic) true else null });
}

fn poolModule(b: *std.Build, target: std.Build.ResolvedTarget, optimize: std.builtin.OptimizeMode, platform: *std.Build.Module) *std.Build.Module {
    // link_libc: threads started inside the Bun process must be pthreads.
    const m = b.createModule(.{ .root_source_file = b.path("zig/pool.zig"), .target = target, .optimize = optimize, .link_libc = true });
    m.addImport("platform", platform);
    return m;
}

fn kernelsModule(b: *std.Build, target: std.Build.ResolvedTarget, optimize: std.builtin.OptimizeMode, pool: *std.Build.Module) *std.Build.Module {
    const m = b.createModule(.{ .root_source_file = b.path("zig/kernels/table.zig"), .target = target, .optimize = optimize, .link_libc = true });
    m.addImport("pool", pool);
    return m;
}

/// The root module of libk3 with its kernel variants linked in.
fn libraryModule(b: *std.Build, target: std.Build.ResolvedTarget, optimize: std.builtin.OptimizeMode) *std.Build.Module {
    const platform = platformModule(b, target, optimize, false);
    const pool = poolModule(b, target, optimize, platform);
    const root = b.createModule(.{ .root_source_file = b.path("zig/abi.zig"), .target = target, .optimize = optimize, .link_libc = true });
    root.addImport("platform", platform);
    root.addImport("pool", pool);
    root.addImport("kernels", kernelsModule(b, target, optimize, pool));
    if (target.result.cpu.arch == .x86_64) root.addObject(variantObject(b, target, optimize, "x86_64_v4", &std.Target.x86.cpu.x86_64_v4));
    return root;
}

/// zig/kernels/ compiled for another CPU model of the target's architecture, reaching the
/// library's pool through zig/isa/pool_proxy.zig; its root zig/isa/<name>.zig exports its table.
fn variantObject(b: *std.Build, target: std.Build.ResolvedTarget, optimize: std.builtin.OptimizeMode, comptime name: []const u8, model: *const std.Target.Cpu.Model) *std.Build.Step.Compile {
    const t = b.resolveTargetQuery(.{
        .cpu_arch = target.result.cpu.arch,
        .os_tag = target.result.os.tag,
        .abi = target.result.abi,
        .cpu_model = .{ .explicit = model },
    });
    const decls = b.createModule(.{ .root_source_file = b.path("zig/pool.zig"), .target = t, .optimize = optimize, .pic = true });
    decls.addImport("platform", platformModule(b, t, optimize, true));
    const proxy = b.createModule(.{ .root_source_file = b.path("zig/isa/pool_proxy.zig"), .target = t, .optimize = optimize, .pic = true });
    proxy.addImport("pool_decls", decls);
    const kernels = b.createModule(.{ .root_source_file = b.path("zig/kernels/table.zig"), .target = t, .optimize = optimize, .pic = true });
    kernels.addImport("pool", proxy);
    const root = b.createModule(.{ .root_source_file = b.path("zig/isa/" ++ name ++ ".zig"), .target = t, .optimize = optimize, .pic = true });
    root.addImport("kernels", kernels);
    return b.addObject(.{ .name = "k3-" ++ name, .root_module = root });
}
