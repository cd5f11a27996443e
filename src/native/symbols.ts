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

export const symbols = {
  k3_abi_version: { args: [], returns: u32 },
  k3_alloc_alignment: { args: [], returns: u64 },
  k3_alloc: { args: [u64], returns: ptr },
  k3_free: { args: [ptr], returns: none },
  k3_read_capacity: { args: [u64], returns: u64 },
  k3_file_open: { args: [cstring, ptr], returns: i32 },
  k3_file_close: { args: [i32], returns: none },
  k3_file_read: { args: [i32, ptr, u64, u64, ptr, u64, ptr], returns: i32 },
} as const;

/** The ABI version this binding was written against (zig/abi.zig `abi_version`). */
export const expectedAbiVersion = 1;

/** k3's own status codes (zig/abi.zig `Status`); -1 .. -4095 are negated errno values. */
export const NativeStatus = {
  ok: 0,
  shortRead: -10001,
  capacity: -10002,
  badArgument: -10003,
  outOfMemory: -10004,
} as const;
