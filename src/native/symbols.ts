/**
 * The libk3 symbol table: mirrors zig/abi.zig one to one (same names, same order of
 * arguments). Change both files together.
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
  // Kernels (zig/abi.zig, kernels section; contracts documented there).
  k3_pool_init: { args: [u32], returns: i32 },
  k3_pool_threads: { args: [], returns: u32 },
  k3_pool_fine_grain: { args: [u32], returns: none },
  k3_kernel_path: { args: [u32], returns: i32 },
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
  k3_mla_attention: { args: [ptr, ptr, ptr, ptr, u32, u32, u32, u32, u32, u32], returns: i32 },
  k3_attnres: { args: [ptr, u32, ptr, ptr, ptr, u32, u32, f32], returns: i32 },
  k3_router: { args: [ptr, u32, ptr, ptr, u32, u32, u32, u32, u32, f32, ptr, ptr, ptr], returns: i32 },
  k3_moe_routed: { args: [ptr, ptr, ptr, ptr, u32, u32, u32, u32, f32, f32, ptr], returns: i32 },
  k3_mem_read_sum: { args: [ptr, u64], returns: u64 },
} as const;

/** The ABI version this binding was written against (zig/abi.zig `abi_version`). */
export const expectedAbiVersion = 4;

/** k3's own status codes (zig/abi.zig `Status`); -1 .. -4095 are negated errno values. */
export const NativeStatus = {
  ok: 0,
  shortRead: -10001,
  capacity: -10002,
  badArgument: -10003,
  outOfMemory: -10004,
  queueFull: -10005,
} as const;
