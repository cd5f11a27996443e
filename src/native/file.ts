/**
 * A checkpoint file read through libk3's O_DIRECT reader. Reads are widened to aligned
 * windows in native scratch memory; callers get a view of exactly the bytes they asked for.
 */
import { K3Error, ExitCode } from "../errors.ts";
import { native } from "./library.ts";
import { allocAlignment, NativeBuffer, offsetPointer, type Pointer } from "./memory.ts";
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

/** `readInto`: bytes per chunk (a multiple of the alignment) and chunks in flight. */
const loadChunkBytes = 64 << 20;
const loadDepth = 4;
/** How k3 reads the trunk and the tables (`readInto`), as `k3 doctor` measures the disk. */
export const trunkReadPattern = { chunkBytes: loadChunkBytes, depth: loadDepth } as const;

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
    return this.#submitAt(offset, length, offsetPointer(buffer.ptr, bufferOffset), capacity, label);
  }

  #submitAt(offset: number, length: number, target: Pointer, capacity: number, label: string): PendingRead {
    const handle = native().k3_io_submit(this.#fd, this.#direct[0] as number, offset, length, target, capacity);
    if (handle < 0) throw new K3Error(ExitCode.runtime, describeStatus(handle, label));
    return new PendingRead(this, handle, offset, length, label);
  }

  /**
   * Reads [offset, offset + length) into `buffer` at `bufferOffset` and waits for it, as
   * `submit(...).wait()` does, but as aligned chunks of `loadChunkBytes` with `loadDepth` in
   * flight on the I/O threads. Into freshly allocated memory a single large O_DIRECT read runs
   * far below the disk's speed (the kernel faults the destination in page by page before the
   * transfer; measured 0.3-0.4 GB/s against 2.6 GB/s into memory already touched), while
   * chunks in flight together fault and transfer in parallel (2.5 GB/s): what loading a
   * resident trunk, the pinned prefix and the model tables uses. Returns the payload's offset
   * in the region and the seconds from the first chunk's submission to the last one's end (the
   * chunks overlap, so their device times would add up to more than the read took).
   */
  readInto(offset: number, length: number, buffer: NativeBuffer, bufferOffset = 0, chunkBytes = loadChunkBytes, label = this.path): { payload: number; seconds: number } {
    const A = allocAlignment();
    if (chunkBytes % A !== 0 || chunkBytes <= 0) throw new Error(`readInto: chunk of ${chunkBytes} bytes is not a positive multiple of ${A}`);
    const lo = Math.floor(offset / A) * A;
    const end = offset + length;
    if (end - lo <= chunkBytes) return this.submit(offset, length, buffer, bufferOffset, label).wait();
    if (bufferOffset + readCapacity(length) > buffer.bytes || bufferOffset % A !== 0) {
      throw new Error(`${this.path}: read target too small or misaligned for ${length} bytes`);
    }
    const inFlight: PendingRead[] = [];
    const started = performance.now();
    try {
      for (let at = lo; at < end; at += chunkBytes) {
        if (inFlight.length === loadDepth) (inFlight.shift() as PendingRead).wait();
        // `at` is aligned, so the chunk's window is exactly its bytes rounded up to the alignment
        const n = Math.min(chunkBytes, end - at);
        inFlight.push(this.#submitAt(at, n, offsetPointer(buffer.ptr, bufferOffset + (at - lo)), Math.ceil(n / A) * A, label));
      }
      while (inFlight.length > 0) (inFlight.shift() as PendingRead).wait();
    } finally {
      // A failed chunk: collect the others before the caller may free the buffer.
      for (const read of inFlight) {
        try {
          read.wait();
        } catch {
          // the first failure is the one reported
        }
      }
    }
    return { payload: offset - lo, seconds: (performance.now() - started) / 1000 };
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
