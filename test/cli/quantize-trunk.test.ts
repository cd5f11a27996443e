/**
 * `k3 quantize-trunk` through dist/k3: the I8R container (runtime.md 9.3) from a packed trunk,
 * checked against the source byte for byte (matrices by the quantisation rule, everything else
 * copied), alignment, the re-run and overwrite rules, and its refusals.
 */
import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { expectation, modelDir } from "../support/fixtures.ts";
import { k3Async } from "../support/k3-async.ts";
import { tempDir } from "../support/tmp.ts";

// The tests are independent dist/k3 runs and run concurrently; a test's time includes the others'.
setDefaultTimeout(60_000);

interface Manifest {
  n_layers: number;
  derived?: { kind: string; source_hashes: string[] };
  layers: { file_off: number; nbytes: number; payload_bytes: number; hash: string; tensors: Record<string, { off: number; nbytes: number; dtype: string; shape: number[] }> }[];
}

const dir = modelDir("nested14");
const want = expectation("nested14");
const readManifest = (trunk: string) => JSON.parse(readFileSync(join(trunk, "trunk.json"), "utf8")) as Manifest;

function bf16(bits: number): number {
  return new Float32Array(new Uint32Array([bits << 16]).buffer)[0] as number;
}

describe.concurrent("k3 quantize-trunk", () => {
  let source = "";
  let draft = "";
  beforeAll(async () => {
    source = join(tempDir("qsource"), "trunk");
    expect((await k3Async(["pack-trunk", dir, source])).code).toBe(0);
    draft = join(tempDir("qdraft"), "draft");
    const r = await k3Async(["quantize-trunk", source, draft]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain("quantized 14/14 layers");
    expect(r.stderr).toContain("verified");
  });

  test("every 2-D BF16 matrix becomes I8R rows by the rule; every other tensor is copied byte for byte; runs stay aligned", async () => {
    const from = readManifest(source);
    const to = readManifest(draft);
    expect(readdirSync(draft).sort()).toEqual(["trunk.bin", "trunk.json"]);
    expect(to.n_layers).toBe(14);
    expect(to.derived).toEqual({ kind: "I8R", source_hashes: from.layers.map((l) => l.hash) });
    const src = readFileSync(join(source, "trunk.bin"));
    const dst = readFileSync(join(draft, "trunk.bin"));
    let matrices = 0;
    let checkedRows = 0;
    for (const [l, layer] of to.layers.entries()) {
      expect(layer.file_off % 4096).toBe(0);
      expect(layer.nbytes % 4096).toBe(0);
      const sourceLayer = from.layers[l]!;
      expect(Object.keys(layer.tensors)).toEqual(Object.keys(sourceLayer.tensors));
      for (const [name, t] of Object.entries(layer.tensors)) {
        const s = sourceLayer.tensors[name]!;
        expect(t.shape).toEqual(s.shape);
        expect(t.off % 64).toBe(0);
        const bytesOf = (buf: Buffer, base: number, e: { off: number; nbytes: number }) => buf.subarray(base + e.off, base + e.off + e.nbytes);
        const isMatrix = s.dtype === "BF16" && s.shape.length === 2 && s.shape[0] !== 1;
        if (!isMatrix) {
          expect(t.dtype).toBe(s.dtype);
          expect(bytesOf(dst, layer.file_off, t).equals(bytesOf(src, sourceLayer.file_off, s))).toBe(true);
          continue;
        }
        matrices++;
        expect(t.dtype).toBe("I8R");
        const [rows, cols] = s.shape as [number, number];
        expect(t.nbytes).toBe(rows * (4 + cols));
        // Rows 0 and the last: scale = f32(absmax / 127), q = clip(round-half-even(w / scale)).
        const q = bytesOf(dst, layer.file_off, t);
        const w = bytesOf(src, sourceLayer.file_off, s);
        for (const row of [0, rows - 1]) {
          const values = Array.from({ length: cols }, (_, i) => bf16(w.readUInt16LE(2 * (row * cols + i))));
          const scale = Math.fround(Math.max(...values.map(Math.abs)) / 127);
          expect(q.readFloatLE(row * (4 + cols))).toBe(scale);
          values.forEach((v, i) => {
            const x = v / scale;
            const lower = Math.floor(x);
            const rounded = x - lower > 0.5 || (x - lower === 0.5 && lower % 2 !== 0) ? lower + 1 : lower;
            expect(q.readInt8(row * (4 + cols) + 4 + i)).toBe(Math.max(-127, Math.min(127, scale === 0 ? 0 : rounded)));
          });
          checkedRows++;
        }
      }
    }
    expect(matrices).toBeGreaterThan(14 * 5);
    expect(checkedRows).toBe(2 * matrices);
    expect(dst.length).toBeLessThan(src.length);
  });

  test("a re-run is a no-op; a different trunk in the output is refused without --force; the source itself is refused", async () => {
    const again = await k3Async(["quantize-trunk", source, draft]);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain("already holds the draft trunk of this source");
    const other = join(tempDir("qother"), "trunk");
    expect((await k3Async(["pack-trunk", modelDir("tiny13"), other])).code).toBe(0);
    const before = readFileSync(join(other, "trunk.bin"));
    const refused = await k3Async(["quantize-trunk", source, other]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toBe(`k3: ${other} already holds a different or incomplete trunk; pass --force to replace it\n`);
    expect(readFileSync(join(other, "trunk.bin")).equals(before)).toBe(true);
    expect((await k3Async(["quantize-trunk", source, other, "--force"])).code).toBe(0);
    expect(readManifest(other).derived?.kind).toBe("I8R");
    const self = await k3Async(["quantize-trunk", source, source]);
    expect(self.code).toBe(2);
    expect(self.stderr).toContain("the output directory is the source trunk");
    const twice = await k3Async(["quantize-trunk", draft, join(tempDir("qtwice"), "t")]);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain("already a quantised (I8R) trunk");
  });

  test("a corrupted source layer is refused and leaves the previous output whole", async () => {
    const broken = join(tempDir("qbroken"), "trunk");
    expect((await k3Async(["pack-trunk", dir, broken])).code).toBe(0);
    const tiny = join(tempDir("qtiny"), "trunk");
    expect((await k3Async(["pack-trunk", modelDir("tiny13"), tiny])).code).toBe(0);
    const out = join(tempDir("qkeep"), "draft");
    expect((await k3Async(["quantize-trunk", tiny, out])).code).toBe(0);
    const kept = readFileSync(join(out, "trunk.bin"));
    const bin = join(broken, "trunk.bin");
    const bytes = readFileSync(bin);
    const at = readManifest(broken).layers[6]!.file_off + 10;
    bytes[at] = (bytes[at] as number) ^ 0x55;
    writeFileSync(bin, bytes);
    const r = await k3Async(["quantize-trunk", broken, out, "--force"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("quantized 6/14 layers");
    expect(r.stderr.trimEnd().split("\n").at(-1)).toBe(`k3: ${bin}: layer 6 does not match its recorded hash (corrupted?); re-run 'k3 pack-trunk'`);
    expect(readdirSync(out).sort()).toEqual(["trunk.bin", "trunk.json"]);
    expect(readFileSync(join(out, "trunk.bin")).equals(kept)).toBe(true);
  });

  test("a draft trunk given to --trunk is refused: it never computes the exact tokens", async () => {
    const r = await k3Async([dir, "--ids", want.prompt_ids.join(","), "--gen", "2", "--trunk", draft, "--out", "-"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`k3: ${draft}: a quantised (I8R) draft trunk only drafts; give it to --draft-trunk`);
    expect(r.stdout).toBe("");
  });

  test("usage errors exit 2", async () => {
    expect((await k3Async(["quantize-trunk", source])).code).toBe(2);
    expect((await k3Async(["quantize-trunk", source, "x", "--bits", "4"])).stderr).toBe("k3: unknown option --bits\n");
    const missing = await k3Async(["quantize-trunk", join(tempDir("qnone"), "nothing"), join(tempDir("qnone2"), "out")]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("trunk.json is missing");
  });
});
