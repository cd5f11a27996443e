/**
 * Shared by the kernel tests (test/unit/native/kernels*.test.ts): native test buffers, a seeded PRNG,
 * bit-level comparison, the execution-path sweep of model.md §8.4, and plain TypeScript
 * transcriptions of the canonical summation orders (model.md §5, §6.1, §8.3).
 */
import { expect } from "bun:test";
import { f32View, NativeBuffer, offsetPointer, u16View, u8View, type Pointer } from "../../src/native/memory.ts";
import { axpy, matmulMxfp4, situGlu, type F32Ref, type Mxfp4Ref } from "../../src/native/kernels.ts";
import { initPool } from "../../src/native/kernel-runtime.ts";
import { availableIsas, isaInUse, otherVectorPorts, setFineGrain, setIsa, setVectorPorts, vectorPortsInUse } from "./kernel-hooks.ts";

// ---------------------------------------------------------------------------------------------
// Native memory and random inputs

const buffers: NativeBuffer[] = [];

/** Frees every buffer the helpers below allocated (call from afterAll). */
export function freeTestBuffers(): void {
  for (const b of buffers.splice(0)) b.free();
}

export interface F32Buf extends F32Ref {
  a: Float32Array;
}

export function f32(n: number): F32Buf {
  const buf = NativeBuffer.allocate(Math.max(n, 1) * 4, "test");
  buffers.push(buf);
  return { ptr: buf.ptr, length: n, a: f32View(buf.ptr, 0, Math.max(n, 1)) };
}

export function f32From(values: ArrayLike<number>): F32Buf {
  const b = f32(values.length);
  b.a.set(values);
  return b;
}

export function bytes(n: number): { ptr: Pointer; a: Uint8Array } {
  const buf = NativeBuffer.allocate(Math.max(n, 1), "test");
  buffers.push(buf);
  return { ptr: buf.ptr, a: u8View(buf.ptr, 0, Math.max(n, 1)) };
}

export function u16(n: number): { ptr: Pointer; a: Uint16Array } {
  const buf = NativeBuffer.allocate(Math.max(n, 1) * 2, "test");
  buffers.push(buf);
  return { ptr: buf.ptr, a: u16View(buf.ptr, 0, Math.max(n, 1)) };
}

/** Deterministic PRNG (mulberry32) so failures reproduce. */
export function rng(seed: number): { uniform: () => number; normal: () => number; int: (n: number) => number } {
  let s = seed >>> 0;
  const uniform = () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => Math.sqrt(-2 * Math.log(1 - uniform())) * Math.cos(2 * Math.PI * uniform());
  return { uniform, normal, int: (n) => Math.floor(uniform() * n) };
}

export function fillNormal(b: { a: Float32Array }, r: ReturnType<typeof rng>, scale = 1, mean = 0): void {
  for (let i = 0; i < b.a.length; i++) b.a[i] = mean + scale * r.normal();
}

export const fr = Math.fround;
const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

export function bf16ToF32(bits: number): number {
  u32Scratch[0] = bits << 16;
  return f32Scratch[0] as number;
}

export function f32ToBf16Trunc(v: number): number {
  f32Scratch[0] = v;
  return (u32Scratch[0] as number) >>> 16;
}

/** 2^e exactly, from the bit pattern. */
export function pow2(e: number): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(e + 1023) << 52n);
  return view.getFloat64(0);
}

export function bits(a: Float32Array): Uint32Array {
  return new Uint32Array(a.slice().buffer);
}

/** §8.5 op tolerance: |got − want| ≤ atol + rtol·|want|, elementwise, with the first failure named. */
export function expectClose(got: ArrayLike<number>, want: ArrayLike<number>, what: string, atol = 1e-5, rtol = 1e-4): void {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    const g = got[i] as number;
    const w = want[i] as number;
    if (!(Math.abs(g - w) <= atol + rtol * Math.abs(w))) {
      throw new Error(`${what}: element ${i} is ${g}, want ${w} (|diff| ${Math.abs(g - w)})`);
    }
  }
}

export function expectBits(got: Float32Array, want: Float32Array, what: string): void {
  const g = bits(got);
  const w = bits(want);
  expect(g.length).toBe(w.length);
  for (let i = 0; i < w.length; i++) {
    if (g[i] !== w[i]) throw new Error(`${what}: element ${i} is ${got[i]}, want ${want[i]} (bits differ)`);
  }
}

/** The variant and the vector ports the library chose at load: what every path returns to. */
const loadedIsa = isaInUse();
const loadedPorts = vectorPortsInUse();
const otherPorts = otherVectorPorts();

export interface ExecutionPath {
  name: string;
  enter: () => void;
  leave: () => void;
}

function onThreads(isa: ReturnType<typeof isaInUse>, threads: number, fine: boolean, ports = loadedPorts): ExecutionPath {
  return {
    name: `${isa}, ${threads} thread${threads > 1 ? "s" : ""}${fine ? ", one-item chunks" : ""}${ports === loadedPorts ? "" : `, vector ports ${ports}`}`,
    enter: () => {
      setIsa(isa);
      initPool(threads);
      setFineGrain(fine);
      setVectorPorts(ports);
    },
    leave: () => {
      setVectorPorts(loadedPorts);
      setFineGrain(false);
      initPool();
      setIsa(loadedIsa);
    },
  };
}

/**
 * Every execution path of model.md §8.4 on this machine, the scalar reference on one thread
 * first: each kernel variant the library has and this CPU runs (scalar, v3, v4, ...) at 1, 2
 * and 3 threads, the pool splitting every job into one-item chunks at 2 and 3 (so even small
 * inputs are spread over all threads), v4 once more at 2 threads with the other vector ports
 * (the paths chosen for the other kind of CPU), and the variant chosen at load with the default
 * pool.
 */
export function executionPaths(): ExecutionPath[] {
  const paths: ExecutionPath[] = [];
  for (const isa of availableIsas()) {
    for (const threads of [1, 2, 3]) paths.push(onThreads(isa, threads, threads > 1));
    // the paths planned for the other kind of CPU (zig/pool.zig `VectorPorts`): only the
    // AVX-512 code reads the setting
    if (isa === "v4") paths.push(onThreads(isa, 2, false, otherPorts));
  }
  paths.push({ name: `${loadedIsa} (chosen at load), default pool`, enter: () => {}, leave: () => {} });
  return paths;
}

export function onPath<T>(path: ExecutionPath, run: () => T): T {
  path.enter();
  try {
    return run();
  } finally {
    path.leave();
  }
}

/**
 * Runs `compute` (which must start from the same inputs and state each time and return its
 * outputs) on every execution path and asserts that each gives the bits of the first, the
 * scalar reference on one thread. Returns those outputs.
 */
export function expectPathIdentity(what: string, compute: () => Float32Array[]): Float32Array[] {
  const [reference, ...others] = executionPaths();
  const base = onPath(reference as ExecutionPath, () => compute().map((a) => a.slice()));
  for (const path of others) {
    const got = onPath(path, compute);
    got.forEach((a, i) => expectBits(a, base[i] as Float32Array, `${what}, ${path.name} vs ${reference?.name}, output ${i}`));
  }
  return base;
}

// ---------------------------------------------------------------------------------------------
// Spec transcriptions (model.md §5, §6, §8.3), in plain TypeScript

/** §6.1 / §8.3 canonical dot: f64 products, 16 lanes by i mod 16, the tree, sequential tail, f32. */
export function dotCanonical(w: ArrayLike<number>, wOff: number, x: ArrayLike<number>, xOff: number, n: number): number {
  const body = n - (n % 16);
  const a = new Float64Array(16);
  for (let i = 0; i < body; i++) a[i % 16] = (a[i % 16] as number) + (w[wOff + i] as number) * (x[xOff + i] as number);
  const c = [0, 1, 2, 3].map((m) => ((a[m] as number) + (a[m + 4] as number)) + ((a[m + 8] as number) + (a[m + 12] as number)));
  let acc = ((c[0] as number) + (c[1] as number)) + ((c[2] as number) + (c[3] as number));
  for (let i = body; i < n; i++) acc += (w[wOff + i] as number) * (x[xOff + i] as number);
  return fr(acc);
}

export const E2M1 = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6];

/** §5.3: element (r, c) of an MXFP4 matrix; low nibble = even element. */
export function mxfp4Element(packed: Uint8Array, scales: Uint8Array, cols: number, r: number, c: number): number {
  const byte = packed[r * (cols / 2) + (c >> 1)] as number;
  const code = c % 2 === 0 ? byte & 0x0f : byte >> 4;
  const s = scales[r * (cols / 32) + (c >> 5)] as number;
  return s === 255 ? 0 : (E2M1[code] as number) * pow2(s - 127);
}

/** §8.3 MXFP4 row order: per group 8 lanes, (l0+l4)… then (b0+b1)+(b2+b3), × 2^(s−127), groups in order. */
export function mxfp4DotCanonical(packed: Uint8Array, scales: Uint8Array, cols: number, r: number, x: ArrayLike<number>, xOff: number): number {
  let total = 0;
  for (let g = 0; g < cols / 32; g++) {
    const s = scales[r * (cols / 32) + g] as number;
    if (s === 255) continue;
    const l = new Float64Array(8);
    for (let k = 0; k < 32; k++) {
      const c = 32 * g + k;
      const byte = packed[r * (cols / 2) + (c >> 1)] as number;
      const code = c % 2 === 0 ? byte & 0x0f : byte >> 4;
      l[k % 8] = (l[k % 8] as number) + (E2M1[code] as number) * (x[xOff + c] as number);
    }
    const b = [0, 1, 2, 3].map((m) => (l[m] as number) + (l[m + 4] as number));
    total += (((b[0] as number) + (b[1] as number)) + ((b[2] as number) + (b[3] as number))) * pow2(s - 127);
  }
  return fr(total);
}

// ---------------------------------------------------------------------------------------------
// The routed experts of a LatentMoE block, as src/model/blocks.ts composes them

/** One routed expert's MXFP4 matrices: w1 = gate [I][Λ], w3 = up [I][Λ], w2 = down [Λ][I]. */
export interface ExpertMatrices {
  w1: Mxfp4Ref;
  w3: Mxfp4Ref;
  w2: Mxfp4Ref;
}

/**
 * acc[t] = Σ_j f32(w_j · W2(SiTU(W1 z_t, W3 z_t))) over the picks of token t in top-k order,
 * from +0, built from the kernels the model calls (matmulMxfp4, situGlu, axpy), one token at a
 * time. Returns the 255 scale bytes met.
 */
export function routedExperts(z: F32Ref, picks: readonly ExpertMatrices[], weights: Float32Array, acc: F32Ref, tokens: number, k: number, latent: number, inter: number, beta1: number, beta2: number): number {
  const gate = f32(inter);
  const up = f32(inter);
  const down = f32(latent);
  let bad = 0;
  f32View(acc.ptr, 0, tokens * latent).fill(0);
  for (let t = 0; t < tokens; t++) {
    const zt = { ptr: offsetPointer(z.ptr, t * latent * 4), length: latent };
    const at = { ptr: offsetPointer(acc.ptr, t * latent * 4), length: latent };
    for (let j = 0; j < k; j++) {
      const m = picks[t * k + j] as ExpertMatrices;
      bad += matmulMxfp4(m.w1, zt, gate, 1) + matmulMxfp4(m.w3, zt, up, 1);
      situGlu(gate, up, gate, inter, beta1, beta2);
      bad += matmulMxfp4(m.w2, gate, down, 1);
      axpy(at, down, latent, weights[t * k + j] as number);
    }
  }
  return bad;
}

