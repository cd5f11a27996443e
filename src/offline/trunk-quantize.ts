/**
 * `k3 quantize-trunk` (runtime.md 9.3, the int8 tool): a packed trunk becomes an int8 draft
 * trunk for hybrid decode. Every 2-D BF16 matrix becomes I8R rows ([f32 scale][int8 × cols],
 * per-row absmax / 127, round half to even; zig/kernels/matvec_i8r.zig); every other tensor is
 * copied byte for byte. Each layer is still one 4096-aligned run, read in one request, with a
 * content hash of its new bytes; inside a run the tensors keep their order, each at a 64-byte
 * boundary. Each source layer's hash is checked as it is read, trunk.bin is verified by reading
 * it back, and the files are renamed into place only then, trunk.json last.
 */
import { existsSync, realpathSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { K3Error, ExitCode } from "../errors.ts";
import { writeAtomically, writeFileAtomically, writeFully } from "../fs.ts";
import { DirectFile, readCapacity } from "../native/file.ts";
import { i8rRowBytes, quantizeI8r } from "../native/kernels.ts";
import { allocAlignment, NativeBuffer, offsetPointer } from "../native/memory.ts";
import { isMatrixSpec } from "../weights/bind.ts";
import {
  alignUp, checkLayerBytes, hashChunkBytes, hashSeed, readTrunkManifest, trunkBinName, trunkFormatVersion, trunkJsonName,
  type PackedLayer, type TrunkManifest,
} from "../weights/trunk-file.ts";
import { verifyPack } from "./trunk-pack.ts";
import { prepareTrunkDir, priorTrunk } from "./trunk-output.ts";

/** Tensors inside a quantised run start at this boundary (the f32 scale of row 0 is aligned). */
export const quantizedTensorAlignment = 64;

export interface QuantizeProgress {
  layersDone: number;
  layerCount: number;
  /** Source payload bytes read so far, and what they became. */
  bytesIn: number;
  bytesOut: number;
  seconds: number;
}

export interface QuantizeResult {
  manifest: TrunkManifest;
  bytesIn: number;
  bytesOut: number;
  matrices: number;
  copied: number;
  seconds: number;
  alreadyDone: boolean;
}

const quantizable = (t: { shape: number[]; dtype: string }) => t.dtype === "BF16" && isMatrixSpec(t);

/** Where each tensor of a source layer goes in the quantised run, and the run's size. */
function plannedLayer(source: PackedLayer, fileOff: number): PackedLayer {
  const ordered = Object.entries(source.tensors).sort((a, b) => a[1].off - b[1].off);
  const tensors: PackedLayer["tensors"] = {};
  let at = 0;
  for (const [name, t] of ordered) {
    at = Math.ceil(at / quantizedTensorAlignment) * quantizedTensorAlignment;
    const [rows, cols] = t.shape as [number, number];
    const entry = quantizable(t) ? { off: at, nbytes: rows * i8rRowBytes(cols), dtype: "I8R" as const, shape: t.shape } : { ...t, off: at };
    tensors[name] = entry;
    at += entry.nbytes;
  }
  const sorted = Object.fromEntries(Object.entries(tensors).sort((a, b) => a[0].localeCompare(b[0])));
  // The binding to the checkpoint is the source layer's: the draft is of that checkpoint's layer.
  return {
    layer: source.layer, shard: source.shard, run_start: source.run_start, nbytes: alignUp(at), payload_bytes: at, file_off: fileOff,
    source: source.source, hash: "", tensors: sorted,
  };
}

/** Everything a re-run would write except the hashes: the same source gives the same plan. */
function samePlan(existing: TrunkManifest, planned: PackedLayer[], sourceHashes: string[]): boolean {
  const strip = (layers: PackedLayer[]) => JSON.stringify(layers.map(({ hash: _hash, ...rest }) => rest));
  return JSON.stringify(existing.derived?.source_hashes) === JSON.stringify(sourceHashes) && strip(existing.layers) === strip(planned);
}

/**
 * Appends a layer's bytes to trunk.bin in hash-sized chunks, hashing exactly the chunks
 * `layerHash` hashes, so the hash is known without holding the whole layer.
 */
class LayerWriter {
  readonly #fd: number;
  readonly #stage = new Uint8Array(hashChunkBytes);
  #staged = 0;
  #written = 0;
  #hash = 0n;
  #fileOff = 0;


  constructor(fd: number) {
    this.#fd = fd;
  }

  /** A new layer at `fileOff`, its hash chained from `seed` (the layer's source, as `layerHash` does). */
  begin(fileOff: number, seed: bigint): void {
    this.#fileOff = fileOff;
    this.#staged = 0;
    this.#written = 0;
    this.#hash = seed;
  }

  append(bytes: Uint8Array): void {
    let at = 0;
    while (at < bytes.length) {
      const n = Math.min(bytes.length - at, hashChunkBytes - this.#staged);
      this.#stage.set(bytes.subarray(at, at + n), this.#staged);
      this.#staged += n;
      at += n;
      if (this.#staged === hashChunkBytes) this.#flush();
    }
  }

  zeros(count: number): void {
    if (count > 0) this.append(new Uint8Array(count));
  }

  #flush(): void {
    const chunk = this.#stage.subarray(0, this.#staged);
    this.#hash = Bun.hash.wyhash(chunk, this.#hash);
    writeFully(this.#fd, chunk, this.#fileOff + this.#written);
    this.#written += this.#staged;
    this.#staged = 0;
  }

  /** Flushes the last chunk, pads the run to `nbytes`, returns the payload's hash. */
  end(nbytes: number): string {
    if (this.#staged > 0 || this.#written === 0) this.#flush();
    const pad = nbytes - this.#written;
    if (pad > 0) writeFully(this.#fd, new Uint8Array(pad), this.#fileOff + this.#written);
    return this.#hash.toString(16).padStart(16, "0");
  }
}

function sameDirectory(a: string, b: string): boolean {
  const real = (p: string) => (existsSync(p) ? realpathSync(p) : resolve(p));
  return real(a) === real(b);
}

export function quantizeTrunk(
  sourceDir: string, outDir: string, options: { force: boolean; onProgress: (p: QuantizeProgress) => void },
): QuantizeResult {
  const started = performance.now();
  if (sameDirectory(sourceDir, outDir)) throw new K3Error(ExitCode.usage, `${outDir}: the output directory is the source trunk; give another directory`);
  const source = readTrunkManifest(sourceDir);
  if (source.derived) {
    throw new K3Error(ExitCode.usage, `${sourceDir}: already a quantised (${source.derived.kind}) trunk; quantise the trunk 'k3 pack-trunk' wrote`);
  }
  if (source.codec) {
    throw new K3Error(ExitCode.usage, `${sourceDir}: a compressed (${source.codec.name}) trunk; quantise a plain one ('k3 pack-trunk' without --compress)`);
  }
  const planned: PackedLayer[] = [];
  let fileOff = 0;
  for (const layer of source.layers) {
    const plan = plannedLayer(layer, fileOff);
    planned.push(plan);
    fileOff += plan.nbytes;
  }
  const sourceHashes = source.layers.map((l) => l.hash);
  const bytesIn = source.layers.reduce((sum, l) => sum + l.payload_bytes, 0);
  const bytesOut = planned.reduce((sum, l) => sum + l.payload_bytes, 0);
  const matrices = planned.reduce((sum, l) => sum + Object.values(l.tensors).filter((t) => t.dtype === "I8R").length, 0);
  const copied = planned.reduce((sum, l) => sum + Object.keys(l.tensors).length, 0) - matrices;
  const jsonPath = join(outDir, trunkJsonName);
  const binPath = join(outDir, trunkBinName);
  const existing = priorTrunk(outDir, (m) => samePlan(m, planned, sourceHashes), options.force === true, "trunk");
  if (existing) return { manifest: existing, bytesIn, bytesOut, matrices, copied, seconds: 0, alreadyDone: true };
  prepareTrunkDir(outDir);

  const sourceBin = join(sourceDir, trunkBinName);
  const input = new DirectFile(sourceBin);
  const largestRun = Math.max(...source.layers.map((l) => l.nbytes));
  const largestMatrix = Math.max(0, ...planned.flatMap((l) => Object.values(l.tensors).filter((t) => t.dtype === "I8R").map((t) => t.nbytes)));
  const runBuffer = NativeBuffer.allocate(readCapacity(largestRun), "a source trunk layer", "read-target");
  const quantized = NativeBuffer.allocate(Math.max(largestMatrix, allocAlignment()), "a quantised matrix", "read-target");
  try {
    let doneIn = 0;
    let doneOut = 0;
    const fill = (fd: number) => {
      const writer = new LayerWriter(fd);
      for (const [l, from] of source.layers.entries()) {
        const to = planned[l] as PackedLayer;
        const { payload } = input.submit(from.file_off, from.nbytes, runBuffer).wait();
        const base = offsetPointer(runBuffer.ptr, payload);
        checkLayerBytes(sourceBin, from, runBuffer.u8(payload, from.payload_bytes));
        writer.begin(to.file_off, hashSeed(to.source));
        let at = 0;
        for (const [name, t] of Object.entries(to.tensors).sort((a, b) => a[1].off - b[1].off)) {
          writer.zeros(t.off - at);
          const src = from.tensors[name]!;
          if (t.dtype === "I8R") {
            const [rows, cols] = t.shape as [number, number];
            const bad = quantizeI8r(offsetPointer(base, src.off), rows, cols, quantized.ptr);
            if (bad > 0) throw new K3Error(ExitCode.runtime, `${sourceBin}: ${name} (layer ${l}) holds ${bad} NaN or infinite weights; it cannot be quantised`);
            writer.append(quantized.u8(0, t.nbytes));
          } else {
            writer.append(runBuffer.u8(payload + src.off, src.nbytes));
          }
          at = t.off + t.nbytes;
        }
        to.hash = writer.end(to.nbytes);
        doneIn += from.payload_bytes;
        doneOut += to.payload_bytes;
        options.onProgress({ layersDone: l + 1, layerCount: source.layers.length, bytesIn: doneIn, bytesOut: doneOut, seconds: (performance.now() - started) / 1000 });
      }
    };
    writeFileAtomically(binPath, "the quantised trunk", fill, (temporary) => {
      verifyPack(temporary, planned);
      rmSync(jsonPath, { force: true }); // no moment pairs the old manifest with the new trunk.bin
    });
  } finally {
    runBuffer.free();
    quantized.free();
    input.close();
  }
  const manifest: TrunkManifest = {
    format: "k3-trunk", version: trunkFormatVersion, n_layers: source.n_layers, align: allocAlignment(), layers: planned,
    derived: { kind: "I8R", source_hashes: sourceHashes },
  };
  writeAtomically(jsonPath, `${JSON.stringify(manifest, null, 1)}\n`, "the trunk manifest");
  return { manifest, bytesIn, bytesOut, matrices, copied, seconds: (performance.now() - started) / 1000, alreadyDone: false };
}
