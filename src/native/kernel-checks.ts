/**
 * The argument checks of the kernel wrappers: a failed check is a programming error and throws
 * a plain Error naming the call and the argument; a native allocation failure is a K3Error
 * (exit 1).
 */
import type { Pointer } from "bun:ffi";
import { ExitCode, K3Error } from "../errors.ts";
import { Status } from "./abi.ts";
import type { F32Ref } from "./memory.ts";

export const maxU32 = 0xffff_ffff;

export function checkStatus(status: number, what: string): void {
  if (status === Status.ok) return;
  if (status === Status.outOfMemory) throw new K3Error(ExitCode.runtime, `${what}: out of memory for kernel scratch`);
  throw new Error(`${what}: libk3 refused the arguments (status ${status})`);
}

export function dim(value: number, name: string, what: string): number {
  if (!Number.isInteger(value) || value < 1 || value > maxU32) {
    throw new Error(`${what}: ${name} must be a positive 32-bit integer (got ${value})`);
  }
  return value;
}

export function count(value: number, name: string, what: string): number {
  if (!Number.isInteger(value) || value < 0 || value > maxU32) {
    throw new Error(`${what}: ${name} must be a non-negative 32-bit integer (got ${value})`);
  }
  return value;
}

export function aligned(ptr: Pointer, bytes: number, name: string, what: string): void {
  if ((ptr as number) % bytes !== 0) throw new Error(`${what}: ${name} is not ${bytes}-byte aligned`);
}

/** Checks that `ref` holds at least `floats` floats and is 4-byte aligned. */
export function f32(ref: F32Ref, floats: number, name: string, what: string): Pointer {
  if (ref.length < floats) throw new Error(`${what}: ${name} holds ${ref.length} floats, needs ${floats}`);
  aligned(ref.ptr, 4, name, what);
  return ref.ptr;
}

export function finite(value: number, name: string, what: string): number {
  if (!Number.isFinite(value)) throw new Error(`${what}: ${name} must be a finite number (got ${value})`);
  return value;
}
