//! x86-64 feature levels of the running CPU, from CPUID and XGETBV (whether the OS saves the
//! vector registers a level needs). Read once, when the library picks its kernel variant.
const std = @import("std");

pub const Level = struct {
    /// x86-64-v3: AVX, AVX2, FMA, BMI1, BMI2, F16C, LZCNT, MOVBE, and the OS saving YMM state.
    v3: bool,
    /// x86-64-v4: v3 plus AVX512F, AVX512BW, AVX512CD, AVX512DQ, AVX512VL, and ZMM/mask state.
    v4: bool,
};

const Regs = struct { eax: u32, ebx: u32, ecx: u32, edx: u32 };

fn cpuid(leaf: u32, subleaf: u32) Regs {
    var eax: u32 = undefined;
    var ebx: u32 = undefined;
    var ecx: u32 = undefined;
    var edx: u32 = undefined;
    asm volatile ("cpuid"
        : [eax] "={eax}" (eax),
          [ebx] "={ebx}" (ebx),
          [ecx] "={ecx}" (ecx),
          [edx] "={edx}" (edx),
        : [leaf] "{eax}" (leaf),
          [subleaf] "{ecx}" (subleaf),
    );
    return .{ .eax = eax, .ebx = ebx, .ecx = ecx, .edx = edx };
}

fn xgetbv0() u64 {
    var lo: u32 = undefined;
    var hi: u32 = undefined;
    asm volatile ("xgetbv"
        : [lo] "={eax}" (lo),
          [hi] "={edx}" (hi),
        : [index] "{ecx}" (@as(u32, 0)),
    );
    return (@as(u64, hi) << 32) | lo;
}

inline fn bit(word: u32, comptime n: u5) bool {
    return word & (@as(u32, 1) << n) != 0;
}

pub fn detect() Level {
    const max_leaf = cpuid(0, 0).eax;
    if (max_leaf < 7) return .{ .v3 = false, .v4 = false };
    const l1 = cpuid(1, 0);
    const l7 = cpuid(7, 0);
    const ext_max = cpuid(0x8000_0000, 0).eax;
    const lzcnt = ext_max >= 0x8000_0001 and bit(cpuid(0x8000_0001, 0).ecx, 5);
    const osxsave = bit(l1.ecx, 27);
    const xcr0: u64 = if (osxsave) xgetbv0() else 0;
    const ymm_state = xcr0 & 0x6 == 0x6; // SSE and AVX state
    const zmm_state = xcr0 & 0xE6 == 0xE6; // plus opmask, ZMM0-15 upper halves, ZMM16-31
    const v3 = ymm_state and lzcnt and
        bit(l1.ecx, 12) and // FMA
        bit(l1.ecx, 22) and // MOVBE
        bit(l1.ecx, 28) and // AVX
        bit(l1.ecx, 29) and // F16C
        bit(l7.ebx, 3) and // BMI1
        bit(l7.ebx, 5) and // AVX2
        bit(l7.ebx, 8); // BMI2
    const v4 = v3 and zmm_state and
        bit(l7.ebx, 16) and // AVX512F
        bit(l7.ebx, 17) and // AVX512DQ
        bit(l7.ebx, 28) and // AVX512CD
        bit(l7.ebx, 30) and // AVX512BW
        bit(l7.ebx, 31); // AVX512VL
    return .{ .v3 = v3, .v4 = v4 };
}

/// Whether the CPU is Intel's (vendor "GenuineIntel"): its vector shuffles, blends and
/// conversions issue on the multiply-add ports (zig/pool.zig `VectorPorts`).
pub fn intel() bool {
    const v = cpuid(0, 0);
    return v.ebx == 0x756e_6547 and v.edx == 0x4965_6e69 and v.ecx == 0x6c65_746e; // "Genu" "ineI" "ntel"
}

test "the CPU running the tests has the level the library is built for" {
    const builtin = @import("builtin");
    const level = detect();
    if (std.Target.x86.featureSetHas(builtin.cpu.features, .avx2)) try std.testing.expect(level.v3);
    if (level.v4) try std.testing.expect(level.v3);
}
