//! The AVX-512 variant (x86-64-v4: AVX512F, BW, CD, DQ, VL): zig/kernels/ compiled for that CPU
//! as an object of its own (build.zig) and linked into libk3. Its kernels see the library's
//! pool through zig/isa/pool_proxy.zig. The only symbol it defines is its table, hidden: the
//! library reaches it from zig/isa/dispatch.zig and nothing outside libk3 can.
//!
//! Where the kernels have AVX-512 code of their own, they select it at compile time from the
//! target's features (see `wide` in matvec_bf16.zig and matvec_mxfp4.zig); everywhere else this
//! is the portable code with AVX-512 encodings. AVX512-BF16 and AVX512-VNNI are not used: their
//! dot products accumulate in f32 or integers with their own pairing, so no use of them gives
//! the f64 lane sums of model.md §8.3.
const kernels = @import("kernels");

comptime {
    @export(&kernels.table, .{ .name = "k3_kernels_x86_64_v4", .visibility = .hidden });
}
