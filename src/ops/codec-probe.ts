/**
 * How fast this machine decodes the compressed trunk's code (`k3 pack-trunk --compress`), for
 * `k3 doctor`: normally drawn bf16 words (as trained weights spread their exponents) coded once,
 * then decoded on one thread and on all, in memory.
 */
import { initPool, poolThreads } from "../native/kernels.ts";
import { NativeBuffer } from "../native/memory.ts";
import { blockCount, codeBound, decodeBlocks, encodeLayer, trunkEntryBytes } from "../native/trunk-code.ts";

export interface CodecProbe {
  /** Stored bytes over plain bytes of the probe's words. */
  storedShare: number;
  oneThreadGbps: number;
  allThreads: number;
  allThreadsGbps: number;
}

const probeWords = 8 * 1024 * 1024;
const blockBytes = 256 * 1024;

export function measureCodec(): CodecProbe {
  const bytes = probeWords * 2;
  const plain = NativeBuffer.allocate(bytes, "the codec probe", "read-target");
  const capacity = codeBound(bytes, blockBytes);
  const stored = NativeBuffer.allocate(capacity, "the codec probe", "read-target");
  const decoded = NativeBuffer.allocate(bytes, "the codec probe", "read-target");
  try {
    const words = new Uint16Array(plain.u8().buffer, plain.u8().byteOffset, probeWords);
    const f = new Float32Array(1);
    const u = new Uint32Array(f.buffer);
    let seed = 0x2545f491;
    const uniform = () => {
      seed ^= seed << 13;
      seed ^= seed >>> 17;
      seed ^= seed << 5;
      return ((seed >>> 0) + 1) / 4294967297;
    };
    for (let i = 0; i < probeWords; i++) {
      f[0] = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform()) * 0.015;
      words[i] = (u[0] as number) >>> 16;
    }
    const storedBytes = encodeLayer(plain.ptr, bytes, blockBytes, 0, stored.ptr, capacity);
    const blocks = blockCount(bytes, blockBytes);
    const tableBytes = blocks * trunkEntryBytes;
    const table = stored.u8(0, tableBytes).slice();
    const rate = (threads: number | undefined) => {
      initPool(threads);
      const decode = () => decodeBlocks({
        layer: 0, table, first: 0, count: blocks, src: stored.u8(tableBytes, storedBytes - tableBytes), srcBytes: storedBytes - tableBytes, srcBase: tableBytes,
        dst: decoded.ptr, dstBytes: bytes, blockBytes, verify: false,
      });
      decode();
      const rounds = 4;
      const started = performance.now();
      for (let r = 0; r < rounds; r++) decode();
      return (rounds * bytes) / 1e9 / ((performance.now() - started) / 1000);
    };
    const oneThreadGbps = rate(1);
    const allThreadsGbps = rate(undefined);
    return { storedShare: storedBytes / bytes, oneThreadGbps, allThreads: poolThreads(), allThreadsGbps };
  } finally {
    initPool();
    plain.free();
    stored.free();
    decoded.free();
  }
}
