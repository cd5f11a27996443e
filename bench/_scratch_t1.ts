import { f32View, NativeBuffer, offsetPointer } from "../src/native/memory.ts";
import { matmulMxfp4 } from "../src/native/kernels.ts";
import { initPool } from "../src/native/kernel-runtime.ts";
import { fillRandom } from "../src/doctor/machine-speed.ts";
import { best } from "./kernels.ts";
const cols = 3584;
for (const rows of [768, 3072, 12288, 24576]) {
  const packed = (rows * cols) / 2, scales = (rows * cols) / 32;
  const buf = NativeBuffer.allocate(packed + scales + 64, "e", "read-target");
  fillRandom(buf);
  buf.u8().fill(121, packed + 8, packed + scales + 8);
  const x = NativeBuffer.allocate(cols * 4, "x"); const xa = f32View(x.ptr, 0, cols); for (let i = 0; i < cols; i++) xa[i] = Math.cos(i);
  const y = NativeBuffer.allocate(rows * 4, "y");
  const e = { packed: offsetPointer(buf.ptr, 8), scales: offsetPointer(buf.ptr, packed + 8), rows, cols };
  const xr = { ptr: x.ptr, length: cols }, yr = { ptr: y.ptr, length: rows };
  const line: string[] = [];
  for (const t of [1, 2]) {
    initPool(t);
    matmulMxfp4(e, xr, yr, 1);
    const s = best(rows <= 3072 ? 50 : 10, () => matmulMxfp4(e, xr, yr, 1));
    line.push(`${t} thr ${(rows * cols / s / 1e9).toFixed(2)} G w/s (${(s * 1e6).toFixed(0)} us)`);
  }
  console.log(`${rows}x${cols}: ${line.join("  ")}`);
  buf.free(); x.free(); y.free();
}
