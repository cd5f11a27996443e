/**
 * A checkpoint file read through libk3's O_DIRECT reader. Reads are widened to aligned
 * windows in native scratch memory; callers get a view of exactly the bytes they asked for.
 */
import { K3Error, ExitCode } from "../errors.ts";
import { native } from "./library.ts";
import { NativeBuffer } from "./memory.ts";
import { NativeStatus } from "./symbols.ts";
import { constants as os } from "node:os";

/** Called once per process, the first time a filesystem refuses O_DIRECT. */
let onBufferedFallback: (path: string) => void = () => {};
let fallbackReported = false;

export function setBufferedFallbackReporter(report: (path: string) => void): void {
  onBufferedFallback = report;
}

function errnoName(errno: number): string {
  const entry = Object.entries(os.errno).find(([, value]) => value === errno);
  return entry ? entry[0] : `errno ${errno}`;
}

export function describeStatus(status: number, path: string): string {
  switch (status) {
    case NativeStatus.shortRead:
      return `${path}: file ends before the requested bytes (truncated?)`;
    case NativeStatus.capacity:
      return `${path}: read buffer too small for the request`;
    case NativeStatus.badArgument:
      return `${path}: invalid read request`;
    default:
      return `${path}: read failed (${errnoName(-status)})`;
  }
}

export class DirectFile {
  readonly path: string;
  #fd: number;
  readonly #direct = new Uint32Array(1);
  readonly #payload = new BigUint64Array(1);
  #scratch: NativeBuffer | null = null;

  constructor(path: string) {
    this.path = path;
    const fd = native().k3_file_open(Buffer.from(`${path}\0`), this.#direct);
    if (fd < 0) {
      throw new K3Error(ExitCode.runtime, `${path}: cannot open (${errnoName(-fd)})`);
    }
    this.#fd = fd;
    this.#noteFallback();
  }

  /** True while reads bypass the page cache. */
  get direct(): boolean {
    return this.#direct[0] === 1;
  }

  /**
   * Reads [offset, offset + length) and returns a view of the payload. The view lives in this
   * file's scratch buffer: it is valid until the next read or close.
   */
  read(offset: number, length: number): Uint8Array {
    const lib = native();
    const capacity = Number(lib.k3_read_capacity(length));
    if (!this.#scratch || this.#scratch.bytes < capacity) {
      this.#scratch?.free();
      this.#scratch = NativeBuffer.allocate(capacity, `reading ${this.path}`);
    }
    const status = lib.k3_file_read(
      this.#fd, this.#direct, offset, length, this.#scratch.ptr, this.#scratch.bytes, this.#payload,
    );
    this.#noteFallback();
    if (status !== NativeStatus.ok) throw new K3Error(ExitCode.runtime, describeStatus(status, this.path));
    return this.#scratch.u8(Number(this.#payload[0]), length);
  }

  close(): void {
    if (this.#fd >= 0) native().k3_file_close(this.#fd);
    this.#fd = -1;
    this.#scratch?.free();
    this.#scratch = null;
  }

  #noteFallback(): void {
    if (this.#direct[0] === 0 && !fallbackReported) {
      fallbackReported = true;
      onBufferedFallback(this.path);
    }
  }
}
