/**
 * What one sequence carries between forward calls (model.md section 9), and nothing else:
 * per KDA layer the recurrent matrices and the ShortConv histories, per MLA layer the latent
 * cache (the normalised c_kv and the shared rope key of every position: kv_lora_rank +
 * qk_rope_head_dim floats, never the expanded keys and values), and the position count.
 *
 * KDA and the convolutions fold every past token into fixed-size state, so a sequence cannot be
 * trimmed back to an earlier position: going back means restoring a snapshot taken there.
 */
import type { ModelConfig } from "../checkpoint/config.ts";
import { attentionKind } from "../checkpoint/tensor-names.ts";
import { runtimeError } from "../errors.ts";
import { F32, F32Pool } from "./f32.ts";

export interface KdaState {
  /** [heads][dim][dim]: row = key channel, column = value channel. */
  recurrent: F32;
  /** [P][Kc-1] raw projection outputs, oldest first. */
  convQ: F32;
  convK: F32;
  convV: F32;
}

export interface MlaCache {
  /** [capacity][kvLoraRank]: per position the kv_a_layernorm output, shared by all heads. */
  latent: F32;
  /** [capacity][dr], one rope key per position shared by all heads. */
  kr: F32;
}

/** The kinds of carried buffer, in the order a layer's sections are stored. */
const sectionKinds = ["kda recurrent", "kda conv q", "kda conv k", "kda conv v", "mla latent", "mla kr"] as const;
type SectionKind = (typeof sectionKinds)[number];

/** One carried buffer: whole for KDA, the first `position` rows for the MLA cache. */
interface Section {
  layer: number;
  kind: SectionKind;
  buffer: F32;
  /** Floats per position for the MLA cache (the stored part grows with position); 0 for KDA. */
  rowFloats: number;
}

const floatsAt = (s: Section, position: number) => (s.rowFloats > 0 ? s.rowFloats * position : s.buffer.length);

/** "K3SQ": the bytes of one sequence state (not a state file: no config fingerprint). */
const stateMagic = 0x5153_334b;
/** 2: the MLA sections hold the latent cache (version 1 held expanded keys and values). */
const stateVersion = 2;
const headerBytes = 16;
const sectionHeaderBytes = 12;

export class SequenceState {
  /** Positions consumed so far. */
  position = 0;
  readonly capacity: number;
  readonly kda = new Map<number, KdaState>();
  readonly mla = new Map<number, MlaCache>();
  readonly #pool = new F32Pool();

  constructor(config: ModelConfig, layerCount: number, capacity: number) {
    this.capacity = capacity;
    const c = config;
    const P = c.kdaNumHeads * c.kdaHeadDim;
    for (let layer = 0; layer < layerCount; layer++) {
      if (attentionKind(c, layer) === "kda") {
        const history = P * (c.shortConvKernel - 1);
        this.kda.set(layer, {
          recurrent: this.#pool.alloc(c.kdaNumHeads * c.kdaHeadDim * c.kdaHeadDim, `KDA state of layer ${layer}`),
          convQ: this.#pool.alloc(history, "conv history"),
          convK: this.#pool.alloc(history, "conv history"),
          convV: this.#pool.alloc(history, "conv history"),
        });
      } else {
        this.mla.set(layer, {
          latent: this.#pool.alloc(capacity * c.kvLoraRank, `MLA latent cache of layer ${layer}`),
          kr: this.#pool.alloc(capacity * c.qkRopeHeadDim, `MLA rope keys of layer ${layer}`),
        });
      }
    }
  }

  /** Every carried buffer, in layer order: the one list that snapshots and bytes walk. */
  #sections(): Section[] {
    const sections: Section[] = [];
    const layers = [...this.kda.keys(), ...this.mla.keys()].sort((a, b) => a - b);
    for (const layer of layers) {
      const k = this.kda.get(layer);
      if (k) {
        const parts = [k.recurrent, k.convQ, k.convK, k.convV];
        parts.forEach((buffer, i) => sections.push({ layer, kind: sectionKinds[i] as SectionKind, buffer, rowFloats: 0 }));
        continue;
      }
      const m = this.mla.get(layer) as MlaCache;
      sections.push({ layer, kind: "mla latent", buffer: m.latent, rowFloats: m.latent.length / this.capacity });
      sections.push({ layer, kind: "mla kr", buffer: m.kr, rowFloats: m.kr.length / this.capacity });
    }
    return sections;
  }

  /** Back to position 0 with zero recurrent and conv state, as a fresh state starts. */
  reset(): void {
    for (const k of this.kda.values()) for (const buffer of [k.recurrent, k.convQ, k.convK, k.convV]) buffer.fill(0);
    this.position = 0; // MLA rows are rewritten before they are read, so they need no clearing
  }

  /** A copy of everything carried at this position, in native memory; free it when done. */
  snapshot(): StateSnapshot {
    const pool = new F32Pool();
    const copies = this.#sections().map((s) => {
      const floats = floatsAt(s, this.position);
      const copy = pool.alloc(floats, `snapshot of ${s.kind} of layer ${s.layer}`);
      copy.a.set(s.buffer.a.subarray(0, floats));
      return copy;
    });
    return new StateSnapshot(this.position, copies, pool);
  }

  /** Puts this state back where `snapshot` was taken (of a state of the same model). */
  restore(snapshot: StateSnapshot): void {
    const sections = this.#sections();
    const copies = snapshot.copies;
    if (copies.length !== sections.length || snapshot.position > this.capacity) {
      throw new Error(`restore: a snapshot of ${copies.length} buffers at position ${snapshot.position} does not fit this state`);
    }
    sections.forEach((s, i) => {
      const copy = copies[i] as F32;
      if (copy.length !== floatsAt(s, snapshot.position)) throw new Error(`restore: ${s.kind} of layer ${s.layer} differs in size`);
      s.buffer.a.set(copy.a);
    });
    this.position = snapshot.position;
  }

  /** The state as bytes: a small header, then each section's floats (little-endian f32). */
  encode(): Uint8Array {
    const sections = this.#sections();
    const floats = sections.map((s) => floatsAt(s, this.position));
    // A section's float count is a u32 in the bytes; refuse rather than wrap.
    if (floats.some((n) => n > 0xffff_ffff)) throw runtimeError(`the state at position ${this.position} is too large to encode`);
    const payloadStart = headerBytes + sectionHeaderBytes * sections.length;
    const bytes = new Uint8Array(payloadStart + 4 * floats.reduce((a, b) => a + b, 0));
    const view = new DataView(bytes.buffer);
    view.setUint32(0, stateMagic, true);
    view.setUint32(4, stateVersion, true);
    view.setUint32(8, this.position, true);
    view.setUint32(12, sections.length, true);
    let at = payloadStart;
    sections.forEach((s, i) => {
      const entry = headerBytes + sectionHeaderBytes * i;
      view.setUint32(entry, s.layer, true);
      view.setUint32(entry + 4, sectionKinds.indexOf(s.kind), true);
      view.setUint32(entry + 8, floats[i] as number, true);
      new Float32Array(bytes.buffer, at, floats[i]).set(s.buffer.a.subarray(0, floats[i]));
      at += 4 * (floats[i] as number);
    });
    return bytes;
  }

  /**
   * Loads bytes made by `encode` for a state shaped like this one. Anything else (another
   * model, a truncated or altered buffer) is refused with a runtime error naming `source` and
   * the first field that disagrees; the state is left unchanged then.
   */
  decode(bytes: Uint8Array, source: string): void {
    const fail = (what: string) => runtimeError(`${source}: not a sequence state of this model (${what})`);
    if (bytes.length < headerBytes) throw fail(`${bytes.length} bytes is shorter than the header`);
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (view.getUint32(0, true) !== stateMagic) throw fail("bad magic");
    const version = view.getUint32(4, true);
    if (version !== stateVersion) throw fail(`version ${version}, k3 reads ${stateVersion}`);
    const position = view.getUint32(8, true);
    if (position > this.capacity) throw fail(`position ${position} exceeds the state's ${this.capacity}`);
    const sections = this.#sections();
    const count = view.getUint32(12, true);
    if (count !== sections.length) throw fail(`${count} sections, this model carries ${sections.length}`);
    const payloadStart = headerBytes + sectionHeaderBytes * count;
    let expected = payloadStart;
    sections.forEach((s, i) => {
      const entry = headerBytes + sectionHeaderBytes * i;
      if (entry + sectionHeaderBytes > bytes.length) throw fail("truncated section table");
      const [layer, kind, floats] = [view.getUint32(entry, true), view.getUint32(entry + 4, true), view.getUint32(entry + 8, true)];
      if (layer !== s.layer || sectionKinds[kind] !== s.kind || floats !== floatsAt(s, position)) {
        throw fail(`section ${i} is layer ${layer} ${sectionKinds[kind] ?? `kind ${kind}`} of ${floats} floats, expected layer ${s.layer} ${s.kind} of ${floatsAt(s, position)}`);
      }
      expected += 4 * floats;
    });
    if (bytes.length !== expected) throw fail(`${bytes.length} bytes, the header implies ${expected}`);
    // Copy through an aligned buffer: the caller's bytes may start at any offset.
    const payload = new Float32Array(bytes.slice(payloadStart).buffer);
    let at = 0;
    for (const s of sections) {
      const floats = floatsAt(s, position);
      s.buffer.a.set(payload.subarray(at, at + floats));
      at += floats;
    }
    this.position = position;
  }

  free(): void {
    this.#pool.free();
  }
}

/** A sequence state frozen at one position (see `SequenceState.snapshot`). */
export class StateSnapshot {
  readonly position: number;
  readonly copies: readonly F32[];
  readonly #pool: F32Pool;

  constructor(position: number, copies: readonly F32[], pool: F32Pool) {
    this.position = position;
    this.copies = copies;
    this.#pool = pool;
  }

  /** Bytes of native memory the snapshot holds. */
  get bytes(): number {
    return this.copies.reduce((sum, c) => sum + 4 * c.length, 0);
  }

  free(): void {
    this.#pool.free();
  }
}
