/**
 * The disk measured the way k3 reads experts (runtime.md 11.3): reads of exactly one routed
 * expert (17,547,264 bytes) at random 4096-aligned offsets, through the O_DIRECT reader, with 1,
 * 4 and 16 reads outstanding on the background I/O threads (one thread per outstanding read).
 * `dd` measures one sequential stream at depth 1; the expert path is random reads with up to 16
 * in flight, and on network storage the two differ by a large factor. The gap between depth 1
 * and 16 is what the batch prefetch can turn into speed.
 */
import { DirectFile, readCapacity } from "../native/file.ts";
import { native } from "../native/library.ts";
import { NativeBuffer } from "../native/memory.ts";
import { runtimeError } from "../errors.ts";

/** K3's routed expert: 17,547,264 bytes of MXFP4 (runtime.md 6.1). */
export const expertReadBytes = 17_547_264;
export const defaultReads = 40;
export const defaultDepths: readonly number[] = [1, 4, 16];
/** O_DIRECT offsets and lengths are multiples of this. */
const blockBytes = 4096;

export interface DepthMeasurement {
  depth: number;
  reads: number;
  readBytes: number;
  seconds: number;
  mbPerSecond: number;
}

export interface DeviceMeasurement {
  path: string;
  fileBytes: number;
  readBytes: number;
  /** False when the filesystem refused O_DIRECT: the page cache was measured, not the device. */
  direct: boolean;
  depths: DepthMeasurement[];
}

/** A small seeded generator, so two runs read the same offsets. */
function offsets(count: number, slots: number, seed: number): number[] {
  let x = seed >>> 0 || 1;
  return Array.from({ length: count }, () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return ((x >>> 0) % slots) * blockBytes;
  });
}

/**
 * Starts the I/O threads with enough of them for the deepest queue. The pool's first start
 * decides its size, so this must run before anything else reads.
 */
export function prepareReaders(maxDepth: number): number {
  return native().k3_io_init(maxDepth);
}

export function measureFile(path: string, options: { reads?: number; depths?: readonly number[]; readBytes?: number; seed?: number } = {}): DeviceMeasurement {
  const reads = options.reads ?? defaultReads;
  const depths = options.depths ?? defaultDepths;
  const file = new DirectFile(path);
  try {
    const fileBytes = Bun.file(path).size;
    const readBytes = Math.min(options.readBytes ?? expertReadBytes, Math.floor(fileBytes / blockBytes) * blockBytes);
    if (readBytes < blockBytes) throw runtimeError(`${path}: ${fileBytes} bytes is too small to measure (one read needs ${blockBytes})`);
    const slots = Math.floor((fileBytes - readBytes) / blockBytes) + 1;
    const capacity = readCapacity(readBytes);
    const deepest = Math.max(...depths);
    const buffer = NativeBuffer.allocate(capacity * deepest, `device reads of ${path}`, "read-target");
    try {
      // Touched before any read: into fresh memory the kernel faults the target in page by page,
      // and the deepest queue (the most fresh memory) would measure the faults, not the disk.
      buffer.u8().fill(0);
      const results = depths.map((depth, d) => {
        const at = offsets(reads, slots, (options.seed ?? 1) + 7919 * d);
        const started = performance.now();
        const inFlight: { slot: number; wait: () => unknown }[] = [];
        let next = 0;
        const submit = (slot: number) => {
          const pending = file.submit(at[next++] as number, readBytes, buffer, slot * capacity);
          inFlight.push({ slot, wait: () => pending.wait() });
        };
        for (let slot = 0; slot < Math.min(depth, reads); slot++) submit(slot);
        while (inFlight.length > 0) {
          const oldest = inFlight.shift() as { slot: number; wait: () => unknown };
          oldest.wait();
          if (next < reads) submit(oldest.slot);
        }
        const seconds = (performance.now() - started) / 1000;
        return { depth, reads, readBytes, seconds, mbPerSecond: (reads * readBytes) / 1e6 / seconds };
      });
      return { path, fileBytes, readBytes, direct: file.direct, depths: results };
    } finally {
      buffer.free();
    }
  } finally {
    file.close();
  }
}

export interface SequentialMeasurement {
  chunkBytes: number;
  depth: number;
  bytes: number;
  seconds: number;
  mbPerSecond: number;
  direct: boolean;
}

/**
 * The disk as k3 streams the trunk (DirectFile.readInto): sequential reads of `chunkBytes` with
 * `depth` in flight, over the first `maxBytes` of the file (all of it when smaller).
 */
export function measureSequential(path: string, pattern: { chunkBytes: number; depth: number }, maxBytes: number): SequentialMeasurement {
  const file = new DirectFile(path);
  try {
    const fileBytes = Bun.file(path).size;
    const total = Math.floor(Math.min(fileBytes, maxBytes) / blockBytes) * blockBytes;
    if (total < blockBytes) throw runtimeError(`${path}: ${fileBytes} bytes is too small to measure (one read needs ${blockBytes})`);
    const chunk = Math.min(pattern.chunkBytes, total);
    const capacity = readCapacity(chunk);
    const buffer = NativeBuffer.allocate(capacity * pattern.depth, `sequential reads of ${path}`, "read-target");
    try {
      // Touched once, so the figure is the disk's and not the first faults of fresh memory.
      buffer.u8().fill(0);
      const inFlight: { wait: () => unknown }[] = [];
      const started = performance.now();
      let slot = 0;
      for (let at = 0; at < total; at += chunk) {
        if (inFlight.length === pattern.depth) (inFlight.shift() as { wait: () => unknown }).wait();
        inFlight.push(file.submit(at, Math.min(chunk, total - at), buffer, (slot++ % pattern.depth) * capacity));
      }
      while (inFlight.length > 0) (inFlight.shift() as { wait: () => unknown }).wait();
      const seconds = (performance.now() - started) / 1000;
      return { chunkBytes: chunk, depth: pattern.depth, bytes: total, seconds, mbPerSecond: total / 1e6 / seconds, direct: file.direct };
    } finally {
      buffer.free();
    }
  } finally {
    file.close();
  }
}
