/**
 * The libk3 ABI as TypeScript sees it. The kernels' declarations are not written here: `zig
 * build` derives them from zig/kernels/table.zig `entries` into zig-out/abi/kernels.ts, with the
 * elementwise operator codes. What is written here mirrors zig/abi.zig by hand: every `export
 * fn` of its own (same names, same order, same argument order and FFI types) and every
 * constant both sides must agree on. Each constant's comment names the Zig declaration it
 * mirrors ("Mirrors zig/… `name`"); test/unit/native/abi.test.ts reads those names, parses the Zig
 * files and fails on any difference, so a change on one side only cannot pass the tests.
 */
import { FFIType, type ConvertFns } from "bun:ffi";
import { ElementwiseOp, elementwiseTakesSecond, kernelSymbols } from "../../zig-out/abi/kernels.ts";

export { ElementwiseOp, elementwiseTakesSecond };

const u32 = FFIType.u32;
const u64 = FFIType.u64;
const i32 = FFIType.i32;
const ptr = FFIType.ptr;
const cstring = FFIType.cstring;
const none = FFIType.void;

export const symbols = {
  k3_abi_version: { args: [], returns: u32 },
  k3_alloc_alignment: { args: [], returns: u64 },
  k3_alloc: { args: [u64, u32], returns: ptr },
  k3_free: { args: [ptr], returns: none },
  k3_read_capacity: { args: [u64], returns: u64 },
  k3_file_open: { args: [cstring, ptr], returns: i32 },
  k3_file_close: { args: [i32], returns: none },
  k3_file_read: { args: [i32, ptr, u64, u64, ptr, u64, ptr], returns: i32 },
  k3_io_init: { args: [u32], returns: i32 },
  k3_io_submit: { args: [i32, u32, u64, u64, ptr, u64], returns: i32 },
  k3_io_wait: { args: [i32, ptr, ptr, ptr], returns: i32 },
  k3_io_done: { args: [i32], returns: u32 },
  k3_signals_watch: { args: [], returns: i32 },
  k3_signal_pending: { args: [], returns: i32 },
  k3_trunk_code_bound: { args: [u64, u32], returns: u64 },
  k3_trunk_encode: { args: [ptr, u64, u32, u32, ptr, u64, ptr], returns: i32 },
  k3_trunk_decode: { args: [ptr, u32, u64, u32, ptr, u64, u64, ptr, u64, u32, u32, ptr], returns: i32 },
  // The compute pool and the kernel variants (zig/abi.zig, kernels section).
  k3_pool_init: { args: [u32], returns: i32 },
  k3_pool_threads: { args: [], returns: u32 },
  k3_pool_fine_grain: { args: [u32], returns: none },
  k3_isa_select: { args: [u32], returns: i32 },
  k3_isa_current: { args: [], returns: u32 },
  k3_isa_support: { args: [u32], returns: u32 },
  k3_vector_ports_select: { args: [u32], returns: i32 },
  k3_vector_ports_current: { args: [], returns: u32 },
  // Test only (zig/abi.zig, last section).
  k3_build_safe: { args: [], returns: u32 },
  k3_safety_probe: { args: [u32], returns: i32 },
  // The kernels, in zig/kernels/table.zig's order.
  ...kernelSymbols,
} as const;

/** The loaded library's functions, typed from the declarations above. */
export type Native = ConvertFns<typeof symbols>;

/** Mirrors zig/abi.zig `abi_version`: what `k3_abi_version` must return for this binding. */
export const abiVersion = 12;

/** Mirrors zig/status.zig `Status`: k3's own status codes; -1 .. -4095 are negated errno values. */
export const Status = {
  ok: 0,
  shortRead: -10001,
  capacity: -10002,
  badArgument: -10003,
  outOfMemory: -10004,
  queueFull: -10005,
  unsupported: -10006,
  damaged: -10007,
} as const;

/** Mirrors zig/abi.zig `alloc_zero`: a `k3_alloc` flag, zero-fill the memory. */
export const allocZero = 1;

/** Mirrors zig/abi.zig `alloc_huge`: a `k3_alloc` flag, advise transparent huge pages. */
export const allocHuge = 2;

/**
 * Mirrors zig/isa/dispatch.zig `Isa`: the kernel variants `k3_isa_select` switches between
 * (scalar reference, x86-64-v3, x86-64-v4 / AVX-512, aarch64 NEON).
 */
export const IsaCode = {
  scalar: 0,
  v3: 1,
  v4: 2,
  neon: 3,
} as const;

/** Mirrors zig/kernels/router.zig `Dtype`: the `w_dtype` codes of `k3_router`. */
export const RouterDtype = {
  bf16: 0,
  f32: 1,
} as const;

/** Mirrors zig/isa/dispatch.zig `Support`: what `k3_isa_support` answers for a variant. */
export const IsaSupport = {
  absent: 0,
  cpuLacks: 1,
  runnable: 2,
} as const;

/**
 * Mirrors zig/pool.zig `VectorPorts`: where the CPU issues its vector shuffles, blends and
 * conversions, which `k3_vector_ports_select` sets (the library sets it from the CPU; the bits
 * never change).
 */
export const VectorPortsCode = {
  besideFma: 0,
  onFmaPorts: 1,
} as const;

/** Mirrors zig/pool.zig `max_threads`: the largest compute thread count `k3_pool_init` accepts. */
export const maxThreads = 256;

/** Mirrors zig/kernels/attnres.zig `max_sources`: the most sources one `k3_attnres` call takes. */
export const maxAttnResSources = 64;

/** Mirrors zig/kernels/router.zig `max_k`: the largest top-k of `k3_router`. */
export const maxRouterK = 256;

/** Mirrors zig/kernels/conv.zig `max_taps`: the longest `k3_shortconv` kernel. */
export const maxConvTaps = 16;

/** Mirrors zig/kernels/kda.zig `max_head_dim`: the largest `k3_kda_recurrence` head_dim. */
export const maxKdaHeadDim = 512;

/** Mirrors zig/kernels/mla.zig `Dtype`: the kv_b_proj `w_dtype` codes of `k3_mla_latent_attention`. */
export const MlaWeightDtype = {
  bf16: 0,
  f32: 1,
} as const;

/** Mirrors zig/kernels/matvec_mxfp4.zig `group`: MXFP4 elements sharing one scale byte. */
export const mxfp4Group = 32;

/** Mirrors zig/kernels/matvec_i8r.zig `scale_bytes`: the f32 scale leading every I8R row. */
export const i8rScaleBytes = 4;

/** Mirrors zig/codec/bf16_planes.zig `entry_bytes`: bytes of one entry of a compressed layer's block table. */
export const trunkEntryBytes = 16;

/** Mirrors zig/codec/bf16_planes.zig `header_bytes`: the header every stored block starts with. */
export const trunkHeaderBytes = 8;

/** Mirrors zig/codec/bf16_planes.zig `min_block_bytes`: the smallest block a compressed trunk may declare. */
export const trunkMinBlockBytes = 128;

/** Mirrors zig/codec/bf16_planes.zig `max_block_bytes`: the largest block a compressed trunk may declare. */
export const trunkMaxBlockBytes = 16777216;
