/**
 * The per-shard table of the Kimi K3 release (runtime.md 11.2): one line per shard, its file name
 * and size in bytes, as the release's published file listing gives them. `k3 verify` and
 * `k3 doctor` check a model directory against it; the test of this table derives the same sizes
 * independently from the spec's run-length table and checks the count and the total.
 */
import type { ModelCensus } from "../plan/forecast.ts";

export const releaseShardCount = 96;
export const releaseTotalBytes = 1_560_936_091_448;

export const releaseShardTable = `
model-00001-of-000096.safetensors 2341216112
model-00002-of-000096.safetensors 16990911504
model-00003-of-000096.safetensors 16990911504
model-00004-of-000096.safetensors 16567501776
model-00005-of-000096.safetensors 16990911504
model-00006-of-000096.safetensors 16990911504
model-00007-of-000096.safetensors 16990911504
model-00008-of-000096.safetensors 16567501776
model-00009-of-000096.safetensors 16990911504
model-00010-of-000096.safetensors 16990911504
model-00011-of-000096.safetensors 16990916912
model-00012-of-000096.safetensors 16567507176
model-00013-of-000096.safetensors 16990916912
model-00014-of-000096.safetensors 16990916912
model-00015-of-000096.safetensors 16990916912
model-00016-of-000096.safetensors 16567507176
model-00017-of-000096.safetensors 16990916912
model-00018-of-000096.safetensors 16990916912
model-00019-of-000096.safetensors 16990916912
model-00020-of-000096.safetensors 16567507176
model-00021-of-000096.safetensors 16990916912
model-00022-of-000096.safetensors 16990916912
model-00023-of-000096.safetensors 16990916912
model-00024-of-000096.safetensors 16567507176
model-00025-of-000096.safetensors 16990916912
model-00026-of-000096.safetensors 16990916912
model-00027-of-000096.safetensors 16990916912
model-00028-of-000096.safetensors 16567507176
model-00029-of-000096.safetensors 16990916912
model-00030-of-000096.safetensors 16990916912
model-00031-of-000096.safetensors 16990916912
model-00032-of-000096.safetensors 16567507176
model-00033-of-000096.safetensors 16990916912
model-00034-of-000096.safetensors 16990916912
model-00035-of-000096.safetensors 16990916912
model-00036-of-000096.safetensors 16567507176
model-00037-of-000096.safetensors 16990916912
model-00038-of-000096.safetensors 16990916912
model-00039-of-000096.safetensors 16990916912
model-00040-of-000096.safetensors 16567507176
model-00041-of-000096.safetensors 16990916912
model-00042-of-000096.safetensors 16990916912
model-00043-of-000096.safetensors 16990916912
model-00044-of-000096.safetensors 16567507176
model-00045-of-000096.safetensors 16990916912
model-00046-of-000096.safetensors 16990916912
model-00047-of-000096.safetensors 16990916912
model-00048-of-000096.safetensors 16567507176
model-00049-of-000096.safetensors 16990916912
model-00050-of-000096.safetensors 16990916912
model-00051-of-000096.safetensors 16990916912
model-00052-of-000096.safetensors 16567507176
model-00053-of-000096.safetensors 16990916912
model-00054-of-000096.safetensors 16990916912
model-00055-of-000096.safetensors 16990916912
model-00056-of-000096.safetensors 16567507176
model-00057-of-000096.safetensors 16990916912
model-00058-of-000096.safetensors 16990916912
model-00059-of-000096.safetensors 16990916912
model-00060-of-000096.safetensors 16567507176
model-00061-of-000096.safetensors 16990916912
model-00062-of-000096.safetensors 16990916912
model-00063-of-000096.safetensors 16990916912
model-00064-of-000096.safetensors 16567507176
model-00065-of-000096.safetensors 16990916912
model-00066-of-000096.safetensors 16990916912
model-00067-of-000096.safetensors 16990916912
model-00068-of-000096.safetensors 16567507176
model-00069-of-000096.safetensors 16990916912
model-00070-of-000096.safetensors 16990916912
model-00071-of-000096.safetensors 16990916912
model-00072-of-000096.safetensors 16567507176
model-00073-of-000096.safetensors 16990916912
model-00074-of-000096.safetensors 16990916912
model-00075-of-000096.safetensors 16990916912
model-00076-of-000096.safetensors 16567507176
model-00077-of-000096.safetensors 16990916912
model-00078-of-000096.safetensors 16990916912
model-00079-of-000096.safetensors 16990916912
model-00080-of-000096.safetensors 16567507176
model-00081-of-000096.safetensors 16990916912
model-00082-of-000096.safetensors 16990916912
model-00083-of-000096.safetensors 16990916912
model-00084-of-000096.safetensors 16567507176
model-00085-of-000096.safetensors 16990916912
model-00086-of-000096.safetensors 16990916912
model-00087-of-000096.safetensors 16990916912
model-00088-of-000096.safetensors 16567507176
model-00089-of-000096.safetensors 16990916912
model-00090-of-000096.safetensors 16990916912
model-00091-of-000096.safetensors 16990916912
model-00092-of-000096.safetensors 16567507176
model-00093-of-000096.safetensors 16567507176
model-00094-of-000096.safetensors 4697664072
model-00095-of-000096.safetensors 92289328
model-00096-of-000096.safetensors 802448352
`;

export interface ReleaseShard {
  name: string;
  bytes: number;
}

/** The table as records, in shard order. */
export const releaseShards: readonly ReleaseShard[] = releaseShardTable
  .trim()
  .split("\n")
  .map((line) => {
    const [name = "", bytes = ""] = line.split(" ");
    return { name, bytes: Number(bytes) };
  });

/** The release's trunk runs per layer kind (model.md 3.8): layer 0 is KDA + dense, then KDA or MLA + MoE. */
const releaseTrunkRunBytes = { dense: 2_341_213_184, kdaMoe: 1_267_744_256, mlaMoe: 844_335_616 } as const;
/** Zero-based MLA layers: config.json's one-based full_attn_layers 4, 8, ..., 92 and 93. */
const releaseMlaLayers = new Set([...Array.from({ length: 23 }, (_, i) => 4 * i + 3), 92]);

/** The released model's sizes as the forecast needs them, for a doctor run before any download. */
export function releaseCensus(): ModelCensus {
  const trunkLayers = Array.from({ length: 93 }, (_, layer) => {
    const bytes = layer === 0 ? releaseTrunkRunBytes.dense : releaseMlaLayers.has(layer) ? releaseTrunkRunBytes.mlaMoe : releaseTrunkRunBytes.kdaMoe;
    return { bytes, bf16MatrixBytes: bytes };
  });
  return {
    source: "the released Kimi K3 (model.md 3.8 sizes)", trunkLayers, lmHeadBytes: 163_840 * 7168 * 2,
    expertBytes: 17_547_264, routedExperts: 896 * 92, expertsPerToken: 16, moeLayers: 92,
  };
}
