/**
 * The draft model's trunk for hybrid decode (runtime.md 9.3): a packed trunk, usually the int8
 * one `k3 quantize-trunk` writes, holding the same tensors by name and shape as the checkpoint's
 * trunk, each either in the checkpoint's own dtype or, for a matrix, in the I8R container. It is
 * streamed like the exact trunk (its own ring and budget); a draft only proposes, so a draft
 * trunk from another source of the same shapes makes decoding slower, never different.
 */
import { dtypeBytes } from "../checkpoint/safetensors.ts";
import { K3Error, ExitCode } from "../errors.ts";
import { i8rRowBytes } from "../native/kernels.ts";
import { isMatrixSpec, vectorBytes } from "./bind.ts";
import type { PackedTrunk } from "./streamed-trunk.ts";
import type { TensorReader } from "./tensor-reader.ts";
import { layerSource, layoutOfPacked, readTrunkManifest, type PackedLayer } from "./trunk-file.ts";
import type { LayerLayout, LayoutTensor } from "./trunk-layout.ts";

/** Why a packed tensor cannot stand in for the checkpoint's, or undefined when it can. */
function mismatch(packed: LayoutTensor, want: LayoutTensor): string | undefined {
  if (JSON.stringify(packed.shape) !== JSON.stringify(want.shape)) return `shape [${packed.shape.join(", ")}], the checkpoint has [${want.shape.join(", ")}]`;
  if (packed.dtype === "I8R") {
    if (!isMatrixSpec(want) || want.dtype !== "BF16") return "I8R, but the checkpoint's tensor is not a bf16 matrix";
    const [rows, cols] = want.shape as [number, number];
    if (packed.nbytes !== rows * i8rRowBytes(cols)) return `${packed.nbytes} bytes, an I8R [${rows}, ${cols}] has ${rows * i8rRowBytes(cols)}`;
    return undefined;
  }
  if (packed.dtype !== want.dtype) return `dtype ${packed.dtype}, the checkpoint has ${want.dtype}`;
  if (packed.nbytes !== want.nbytes) return `${packed.nbytes} bytes, the checkpoint's has ${want.nbytes}`;
  // Matrices are read in place: a bf16 or f32 matrix must sit on its element boundary.
  if (packed.off % dtypeBytes[packed.dtype] !== 0) return `offset ${packed.off} is not ${dtypeBytes[packed.dtype]}-byte aligned`;
  return undefined;
}

function checkDraftLayer(packed: PackedLayer, layout: LayerLayout, dir: string): LayerLayout {
  const ours = layoutOfPacked(packed);
  const byName = new Map(ours.tensors.map((t) => [t.name, t]));
  const problems: string[] = [];
  for (const want of layout.tensors) {
    const got = byName.get(want.name);
    const why = got ? mismatch(got, want) : "missing";
    if (why) problems.push(`${want.name}: ${why}`);
    byName.delete(want.name);
  }
  for (const extra of byName.keys()) problems.push(`${extra}: not a trunk tensor of this checkpoint`);
  if (problems.length > 0) {
    const more = problems.length > 3 ? `; and ${problems.length - 3} more` : "";
    throw new K3Error(ExitCode.runtime, `${dir}: layer ${packed.layer} of the draft trunk does not fit this checkpoint: ${problems.slice(0, 3).join("; ")}${more}`);
  }
  return { ...ours, tensors: ours.tensors.sort((a, b) => a.name.localeCompare(b.name)) };
}

/**
 * Reads a draft trunk's trunk.json and checks it against the bound layers (`layouts`, in order):
 * the checkpoint's tensors by name and shape, and each layer's `source` (the binding to the
 * checkpoint's contents its pack recorded, which quantising keeps) recomputed through `reader`.
 */
export function openDraftTrunk(dir: string, layouts: readonly LayerLayout[], reader: TensorReader): PackedTrunk {
  const manifest = readTrunkManifest(dir);
  if (manifest.codec) {
    throw new K3Error(ExitCode.usage, `${dir}: a compressed (${manifest.codec.name}) trunk computes exact tokens; give it to --trunk, and --draft-trunk a trunk 'k3 quantize-trunk' wrote`);
  }
  if (manifest.n_layers < layouts.length) {
    throw new K3Error(ExitCode.runtime, `${dir}: the draft trunk holds ${manifest.n_layers} layers, ${layouts.length} are needed`);
  }
  const layers = manifest.layers.slice(0, layouts.length);
  const draftLayouts = layers.map((packed, l) => {
    const layout = layouts[l] as LayerLayout;
    const checked = checkDraftLayer(packed, layout, dir);
    const source = layerSource(reader, layout);
    if (packed.source !== source) {
      throw new K3Error(
        ExitCode.runtime,
        `${dir}: layer ${l} of the draft trunk was made from other contents than ${reader.index.dir} holds (source ${packed.source}, this checkpoint ${source}); quantise this checkpoint's packed trunk`,
      );
    }
    return checked;
  });
  return {
    dir, layers, layouts: draftLayouts,
    layerCosts: layers.map((packed, l) => packed.nbytes + vectorBytes(draftLayouts[l] as LayerLayout)),
    packedBytes: layers.reduce((sum, l) => sum + l.payload_bytes, 0),
  };
}
