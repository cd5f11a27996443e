import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DirectFile, readCapacity, setBufferedFallbackReporter } from "../../../src/native/file.ts";
import { NativeBuffer } from "../../../src/native/memory.ts";
import { tempDir } from "../../support/tmp.ts";

/** A file whose byte i is a function of i, so any misplaced window shows. */
function patternFile(dir: string, bytes: number): { path: string; data: Uint8Array } {
  const data = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i++) data[i] = (i * 131 + (i >> 8) * 7) & 0xff;
  const path = join(dir, "pattern.bin");
  writeFileSync(path, data);
  return { path, data };
}

const fallbacks: string[] = [];
setBufferedFallbackReporter((path) => fallbacks.push(path));

// 3 pages and a bit: lengths and offsets deliberately not multiples of 4096.
const fileBytes = 3 * 4096 + 1234;
const reads: [string, number, number][] = [
  ["unaligned start and length", 5000, 100],
  ["straddling a page boundary", 4000, 200],
  ["aligned start, odd length", 4096, 4097],
  ["from byte 0", 0, 13],
  ["the last byte of the file (tail window past EOF)", fileBytes - 1, 1],
  ["the whole tail, unaligned", 3 * 4096 + 17, 1234 - 17],
  ["the whole file", 0, fileBytes],
];

function exercise(parent: string, expectDirect: boolean) {
  const { path, data } = patternFile(tempDir("read", parent), fileBytes);
  const file = new DirectFile(path);
  try {
    expect(file.direct).toBe(expectDirect);
    for (const [, offset, length] of reads) {
      const got = file.read(offset, length);
      expect(got.length).toBe(length);
      expect(Buffer.from(got).equals(Buffer.from(data.subarray(offset, offset + length)))).toBe(true);
    }
    expect(() => file.read(fileBytes - 10, 11)).toThrow(`${path}: file ends before the requested bytes (truncated?)`);
    expect(() => file.read(fileBytes + 8192, 1)).toThrow(/file ends before the requested bytes/);
  } finally {
    file.close();
  }
}

describe("O_DIRECT reader", () => {
  test("reads exact payloads through aligned windows on a disk filesystem", () => {
    exercise(tempDir("disk", "/var/tmp"), true);
  });

  test.skipIf(!existsSync("/dev/shm"))("reads exact payloads on tmpfs, whichever mode it grants", () => {
    // Kernels before 6.6 refuse O_DIRECT on tmpfs; newer ones allow it. Either way the bytes match.
    const probe = new DirectFile(patternFile(tempDir("probe", "/dev/shm"), 10).path);
    const direct = probe.direct;
    probe.close();
    exercise("/dev/shm", direct);
  });

  test.skipIf(!existsSync("/proc/cpuinfo"))("falls back to buffered reads where O_DIRECT is refused, and says so once", () => {
    // procfs answers O_DIRECT with EINVAL, like the filesystems the fallback exists for.
    const before = fallbacks.length;
    const expected = readFileSync("/proc/cpuinfo");
    for (let round = 0; round < 2; round++) {
      const file = new DirectFile("/proc/cpuinfo");
      expect(file.direct).toBe(false);
      expect(Buffer.from(file.read(10, 50)).equals(expected.subarray(10, 60))).toBe(true);
      file.close();
    }
    expect(fallbacks.length).toBe(1);
    expect(fallbacks.length - before).toBeLessThanOrEqual(1);
  });

  test("readInto: a read in chunks with several in flight lands every byte where one read would", () => {
    const bytes = 40 * 4096 + 777;
    const { path, data } = patternFile(tempDir("chunks", "/var/tmp"), bytes);
    const file = new DirectFile(path);
    const buffer = NativeBuffer.allocate(readCapacity(bytes) + 8192, "chunked read test", "read-target");
    try {
      // unaligned starts and ends; chunks of one and three pages (more chunks than in flight),
      // a read shorter than a chunk, and a region at an offset into the buffer
      const cases: [number, number, number, number][] = [[5000, 30_000, 4096, 0], [0, bytes, 3 * 4096, 0], [123, bytes - 123, 4096, 8192], [4096, 100, 3 * 4096, 0]];
      for (const [offset, length, chunk, at] of cases) {
        buffer.u8().fill(0);
        const { payload } = file.readInto(offset, length, buffer, at, chunk);
        const got = buffer.u8(at + payload, length);
        expect(`${offset}+${length}/${chunk}: ${Buffer.from(got).equals(Buffer.from(data.subarray(offset, offset + length)))}`).toBe(`${offset}+${length}/${chunk}: true`);
      }
      // a buffer of exactly readCapacity(length), as the loaders allocate, with an unaligned start
      for (const [offset, length] of [[4095, bytes - 4095 - 1], [1, 20 * 4096], [4096 * 3 + 5, 17 * 4096 + 11]] as const) {
        const exact = NativeBuffer.allocate(readCapacity(length), "exact chunked read test", "read-target");
        try {
          const { payload } = file.readInto(offset, length, exact, 0, 4096);
          expect(Buffer.from(exact.u8(payload, length)).equals(Buffer.from(data.subarray(offset, offset + length)))).toBe(true);
        } finally {
          exact.free();
        }
      }
      expect(() => file.readInto(bytes - 10, 8192, buffer, 0, 4096)).toThrow(/file ends before the requested bytes/);
      expect(() => file.readInto(0, 100, buffer, 0, 1000)).toThrow(/not a positive multiple of 4096/);
    } finally {
      buffer.free();
      file.close();
    }
  });

  test("a missing file is a one-line error naming it", () => {
    expect(() => new DirectFile("/nonexistent/k3/shard.safetensors")).toThrow("/nonexistent/k3/shard.safetensors: cannot open (ENOENT)");
  });
});
