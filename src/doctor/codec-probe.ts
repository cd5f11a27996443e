/**
 * How fast this machine decodes the compressed trunk's code (`k3 pack-trunk --compress`), for
 * `k3 doctor` and the bench: bf16 words (normally drawn, as trained weights spread their
 * exponents, unless the caller fills them otherwise) coded once, then decoded in memory at each
 * thread count asked for.
 */
import { initPool, poolThreads } from "../native/kernel-runtime.ts";
import { NativeBuffer } from "../native/memory.ts";
import { blockCount, codeBound, decodeBlocks, encodeLayer, trunkEntryBytes, type BlockRun } from "../native/trunk-code.ts";

export interface CodecProbe {
  /** Stored bytes over plain bytes of the probe's words. */
  storedShare: number;
  oneThreadGbps: number;
  allThreads: number;
  allThreadsGbps: number;
}

const probeWords = 8 * 1024 * 1024;
const blockBytes = 256 * 1024;
const rounds = 4;

/** GB/s of decoded bytes of `run` (its `dstBytes`), after one decode that touches the pages. */
export function timeDecode(run: BlockRun): number {
  const decode = () => {
    const damaged = decodeBlocks(run);
    if (damaged !== undefined) throw new Error(`codec probe: layer ${run.layer} block ${damaged} damaged`);
  };
  decode();
  const started = performance.now();
  for (let r = 0; r < rounds; r++) decode();
  return (rounds * run.dstBytes) / 1e9 / ((performance.now() - started) / 1000);
}

/** N(0, 0.015²) words truncated to bf16, from a fixed seed. */
function normalWords(words: Uint16Array): void {
  const f = new Float32Array(1);
  const u = new Uint32Array(f.buffer);
  let seed = 0x2545f491;
  const uniform = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return ((seed >>> 0) + 1) / 4294967297;
  };
  for (let i = 0; i < words.length; i++) {
    f[0] = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform()) * 0.015;
    words[i] = (u[0] as number) >>> 16;
  }
}

/**
 * Codes `probeWords` words made by `fill` and decodes them (no checksums: the per-token path)
 * at each of `threads` (undefined: the pool's default); the stored share and GB/s per count.
 */
export function measureCode(fill: (words: Uint16Array) => void, threads: readonly (number | undefined)[]): { storedShare: number; gbps: number[] } {
  const bytes = probeWords * 2;
  const plain = NativeBuffer.allocate(bytes, "the codec probe", "read-target");
  const capacity = codeBound(bytes, blockBytes);
  const stored = NativeBuffer.allocate(capacity, "the codec probe", "read-target");
  const decoded = NativeBuffer.allocate(bytes, "the codec probe", "read-target");
  try {
    const view = plain.u8();
    fill(new Uint16Array(view.buffer, view.byteOffset, probeWords));
    const storedBytes = encodeLayer(plain.ptr, bytes, blockBytes, 0, stored.ptr, capacity);
    const blocks = blockCount(bytes, blockBytes);
    const tableBytes = blocks * trunkEntryBytes;
    const run: BlockRun = {
      layer: 0, table: stored.u8(0, tableBytes).slice(), first: 0, count: blocks, src: stored.u8(tableBytes, storedBytes - tableBytes),
      srcBytes: storedBytes - tableBytes, srcBase: tableBytes, dst: decoded.ptr, dstBytes: bytes, blockBytes, verify: false,
    };
    const gbps = threads.map((count) => {
      initPool(count);
      return timeDecode(run);
    });
    return { storedShare: storedBytes / bytes, gbps };
  } finally {
    initPool();
    plain.free();
    stored.free();
    decoded.free();
  }
}

export function measureCodec(): CodecProbe {
  const { storedShare, gbps } = measureCode(normalWords, [1, undefined]);
  return { storedShare, oneThreadGbps: gbps[0] as number, allThreads: poolThreads(), allThreadsGbps: gbps[1] as number };
}
