/**
 * The libk3 ABI as TypeScript sees it, mirroring zig/abi.zig: every `export fn` (same names,
 * same order, same argument order and FFI types) and every constant both sides must agree on.
 * Each constant's comment names the Zig declaration it mirrors ("Mirrors zig/… `name`");
 * test/unit/abi.test.ts reads those names, parses the Zig files and fails on any difference,
 * so a change on one side only cannot pass the tests.
 */
import { FFIType } from "bun:ffi";

const u32 = FFIType.u32;
const u64 = FFIType.u64;
const i32 = FFIType.i32;
const ptr = FFIType.ptr;
const cstring = FFIType.cstring;
const none = FFIType.void;
const f32 = FFIType.f32;

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
  // Kernels (zig/abi.zig, kernels section; contracts documented there).
  k3_pool_init: { args: [u32], returns: i32 },
  k3_pool_threads: { args: [], returns: u32 },
  k3_pool_fine_grain: { args: [u32], returns: none },
  k3_isa_select: { args: [u32], returns: i32 },
  k3_isa_current: { args: [], returns: u32 },
  k3_isa_support: { args: [u32], returns: u32 },
  k3_matmul_bf16: { args: [ptr, u32, u32, ptr, ptr, u32], returns: i32 },
  k3_matmul_f32: { args: [ptr, u32, u32, ptr, ptr, u32], returns: i32 },
  k3_matmul_mxfp4: { args: [ptr, ptr, u32, u32, ptr, ptr, u32, ptr], returns: i32 },
  k3_mxfp4_decode_row: { args: [ptr, ptr, u32, ptr, ptr], returns: i32 },
  k3_rmsnorm: { args: [ptr, ptr, ptr, u32, u32, f32], returns: i32 },
  k3_l2norm: { args: [ptr, ptr, u32, u32], returns: i32 },
  k3_elementwise: { args: [u32, ptr, ptr, ptr, u32, f32, f32], returns: i32 },
  k3_widen_bf16: { args: [ptr, ptr, u32], returns: i32 },
  k3_shortconv: { args: [ptr, ptr, ptr, ptr, u32, u32, u32], returns: i32 },
  k3_kda_decay: { args: [ptr, ptr, ptr, ptr, ptr, u32, u32, u32, f32], returns: i32 },
  k3_kda_recurrence: { args: [ptr, ptr, ptr, ptr, ptr, ptr, ptr, u32, u32, u32, f32], returns: i32 },
  k3_kda_gated_norm: { args: [ptr, ptr, ptr, ptr, u32, u32, u32, f32], returns: i32 },
  k3_mla_latent_attention: { args: [ptr, ptr, u32, ptr, ptr, ptr, u32, u32, u32, u32, u32, u32, u32], returns: i32 },
  k3_attnres: { args: [ptr, u32, ptr, ptr, ptr, u32, u32, f32], returns: i32 },
  k3_router: { args: [ptr, u32, ptr, ptr, u32, u32, u32, u32, u32, f32, ptr, ptr, ptr], returns: i32 },
  k3_moe_routed: { args: [ptr, ptr, ptr, ptr, u32, u32, u32, u32, f32, f32, ptr], returns: i32 },
  k3_matmul_i8r: { args: [ptr, u32, u32, ptr, ptr, u32], returns: i32 },
  k3_dequant_i8r: { args: [ptr, u32, u32, ptr], returns: i32 },
  k3_quantize_i8r: { args: [ptr, u32, u32, ptr, ptr], returns: i32 },
  // Bench and test only: machine probes (zig/abi.zig, last section).
  k3_mem_read_sum: { args: [ptr, u64], returns: u64 },
  k3_build_safe: { args: [], returns: u32 },
  k3_safety_probe: { args: [u32], returns: i32 },
  k3_fma_peak: { args: [u64], returns: u64 },
} as const;

/** Mirrors zig/abi.zig `abi_version`: what `k3_abi_version` must return for this binding. */
export const abiVersion = 10;

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

/** Mirrors zig/kernels/situ.zig `Op`: the operator codes of `k3_elementwise`. */
export const ElementwiseOp = {
  exp: 0,
  sigmoid: 1,
  tanh: 2,
  silu: 3,
  softplus: 4,
  gate: 5,
  add: 6,
  axpy: 7,
  situ: 8,
} as const;

/** Mirrors zig/kernels/router.zig `Dtype`: the `w_dtype` codes of `k3_router`. */
export const RouterDtype = {
  bf16: 0,
  f32: 1,
} as const;

/**
 * Mirrors zig/kernels/moe.zig `ExpertPtrs`: the six addresses of one record of the expert list
 * `k3_moe_routed` takes, in memory order.
 */
export const expertRecordFields = ["w1Packed", "w1Scale", "w3Packed", "w3Scale", "w2Packed", "w2Scale"] as const;

/** Mirrors zig/isa/dispatch.zig `Support`: what `k3_isa_support` answers for a variant. */
export const IsaSupport = {
  absent: 0,
  cpuLacks: 1,
  runnable: 2,
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
