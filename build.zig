//! Builds libk3, the native half of k3: every numeric kernel and the O_DIRECT reader.
//! The default target is x86-64-v3 (AVX2 + FMA); `-Dcpu=` overrides for experiments, and
//! `-Dtarget=` cross-compiles (tools/release.ts builds aarch64-linux-gnu and aarch64-macos).
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
    const optimize = b.standardOptimizeOption(.{});

    // link_libc: threads started inside the Bun process must be pthreads.
    const root = b.createModule(.{
        .root_source_file = b.path("zig/abi.zig"),
        .target = target,
        .optimize = optimize,
        .link_libc = true,
    });
    const lib = b.addLibrary(.{ .name = "k3", .linkage = .dynamic, .root_module = root });
    b.installArtifact(lib);

    const unit_tests = b.addTest(.{ .root_module = root });
    const run_unit_tests = b.addRunArtifact(unit_tests);
    b.step("test", "Run the Zig unit tests").dependOn(&run_unit_tests.step);
}
