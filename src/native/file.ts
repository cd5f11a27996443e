/**
 * A checkpoint file read through libk3's O_DIRECT reader. Reads are widened to aligned
 * windows in native scratch memory; callers get a view of exactly the bytes they asked for.
 */
import { K3Error, ExitCode } from "../errors.ts";
import { native } from "./library.ts";
import { allocAlignment, NativeBuffer, offsetPointer } from "./memory.ts";
import { Status } from "./abi.ts";
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

/** Bytes a buffer needs to receive `length` bytes read at any offset (the aligned window). */
export function readCapacity(length: number): number {
  return Number(native().k3_read_capacity(length));
}

export function describeStatus(status: number, path: string): string {
  switch (status) {
    case Status.queueFull:
      return `${path}: too many background reads in flight`;
    case Status.shortRead:
      return `${path}: file ends before the requested bytes (truncated?)`;
    case Status.capacity:
      return `${path}: read buffer too small for the request`;
    case Status.badArgument:
      return `${path}: invalid read request`;
    default:
      return `${path}: read failed (${errnoName(-status)})`;
  }
}

/** A background read in flight; `wait` collects it exactly once. */
export class PendingRead {
  readonly #file: DirectFile;
  readonly #handle: number;
  readonly offset: number;
  readonly length: number;
  /** How errors name what was read: the file, or the file and what in it. */
  readonly #label: string;
  #result: { payload: number; seconds: number } | undefined;

  constructor(file: DirectFile, handle: number, offset: number, length: number, label = file.path) {
    this.#file = file;
    this.#handle = handle;
    this.offset = offset;
    this.length = length;
    this.#label = label;
  }

  get done(): boolean {
    return this.#result !== undefined || native().k3_io_done(this.#handle) === 1;
  }

  /**
   * Blocks until the bytes are in the buffer; returns where the payload starts in it and the
   * device seconds the read took. A failed read throws K3Error naming the file.
   */
  wait(): { payload: number; seconds: number } {
    if (this.#result) return this.#result;
    const out = new BigUint64Array(2);
    const direct = new Uint32Array(1);
    const status = native().k3_io_wait(this.#handle, out.subarray(0, 1), out.subarray(1, 2), direct);
    this.#file.noteDirect(direct[0] === 1);
    if (status !== Status.ok) throw new K3Error(ExitCode.runtime, describeStatus(status, this.#label));
    this.#result = { payload: Number(out[0]), seconds: Number(out[1]) / 1e9 };
    return this.#result;
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
    const capacity = readCapacity(length);
    if (!this.#scratch || this.#scratch.bytes < capacity) {
      this.#scratch?.free();
      this.#scratch = NativeBuffer.allocate(capacity, `reading ${this.path}`, "read-target");
    }
    const status = lib.k3_file_read(
      this.#fd, this.#direct, offset, length, this.#scratch.ptr, this.#scratch.bytes, this.#payload,
    );
    this.#noteFallback();
    if (status !== Status.ok) throw new K3Error(ExitCode.runtime, describeStatus(status, this.path));
    return this.#scratch.u8(Number(this.#payload[0]), length);
  }

  /**
   * Starts reading [offset, offset + length) into `buffer` at `bufferOffset` on the background
   * I/O threads. The buffer region must hold `readCapacity(length)` bytes and stay untouched
   * until the read is collected. `label` is how a failure names it (default: the file).
   */
  submit(offset: number, length: number, buffer: NativeBuffer, bufferOffset = 0, label = this.path): PendingRead {
    const capacity = readCapacity(length);
    if (bufferOffset + capacity > buffer.bytes || bufferOffset % allocAlignment() !== 0) {
      throw new Error(`${this.path}: read target too small or misaligned for ${length} bytes`);
    }
    const target = offsetPointer(buffer.ptr, bufferOffset);
    const handle = native().k3_io_submit(this.#fd, this.#direct[0] as number, offset, length, target, capacity);
    if (handle < 0) throw new K3Error(ExitCode.runtime, describeStatus(handle, label));
    return new PendingRead(this, handle, offset, length, label);
  }

  /** Frees the buffer synchronous reads go through (it is as large as the largest read). */
  releaseScratch(): void {
    this.#scratch?.free();
    this.#scratch = null;
  }

  /** Background reads report whether the file still reads with O_DIRECT. */
  noteDirect(direct: boolean): void {
    if (!direct) this.#direct[0] = 0;
    this.#noteFallback();
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
