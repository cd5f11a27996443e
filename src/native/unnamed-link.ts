/**
 * linkat(2) from libc for src/fs.ts's unnamed staged writes (O_TMPFILE): the one call that gives
 * such a file a name, which Node's fs lacks (link(2) on /proc/self/fd/N fails with EXDEV). It
 * lives here because bun:ffi stays in src/native; library.ts hands it to fs.ts when libk3 loads.
 */
import { dlopen, FFIType, ptr } from "bun:ffi";

const atFdCwd = -100;
const atSymlinkFollow = 0x400;

type Linkat = (fd: number, path: string) => boolean;
let linkat: Linkat | null | undefined;

/** Links the open unnamed file `fd` at `path`; false when it could not (no glibc, no /proc, EEXIST, ...). */
export function linkUnnamed(fd: number, path: string): boolean {
  if (linkat === undefined) {
    linkat = null;
    if (process.platform === "linux") {
      try {
        const libc = dlopen("libc.so.6", { linkat: { args: [FFIType.i32, FFIType.ptr, FFIType.i32, FFIType.ptr, FFIType.i32], returns: FFIType.i32 } });
        const text = (value: string) => ptr(Buffer.from(`${value}\0`));
        linkat = (from, to) => libc.symbols.linkat(atFdCwd, text(`/proc/self/fd/${from}`), atFdCwd, text(to), atSymlinkFollow) === 0;
      } catch {
        // No glibc (musl, another OS): staged writes fall back to copying.
      }
    }
  }
  return linkat !== null && linkat(fd, path);
}
