/**
 * The expert trace of runtime.md 6.6: every `get` the expert cache serves, in request order,
 * plus a sparse usage histogram. Routing does not depend on what the cache holds, so one recorded
 * run can be replayed offline at any capacity under any policy (`k3 sim-cache`).
 *
 * `expert_trace.bin`: flat int32 pairs (layer, expert), little-endian, 8 bytes per request.
 * `expert_hist.json`: {"n_layers":..,"n_experts":..,"counts":{"<L>,<E>":count,...}}, non-zero only.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { runtimeError } from "../errors.ts";
import { commitAll, stageBytes, writeAtomically, type StagedWrite } from "../fs.ts";

export const traceFileName = "expert_trace.bin";
export const histogramFileName = "expert_hist.json";
export const bytesPerRequest = 8;

/**
 * Layer and expert ids in a trace are below this. K3 has 93 layers and 896 experts, so anything
 * near it means a corrupt file, and it keeps `layer * traceIdLimit + expert` an exact key.
 */
export const traceIdLimit = 65_536;

/** More requests than this would overflow the replay's int32 indices; about 180k decode tokens. */
export const maxTraceRequests = 2 ** 28;

const initialRequests = 16_384;

export interface ExpertHistogram {
  n_layers: number;
  n_experts: number;
  /** Keyed "<layer>,<expert>"; only experts requested at least once. */
  counts: Record<string, number>;
}

/** Requests as two parallel arrays: request i asked for expert experts[i] of layer layers[i]. */
export interface ExpertTrace {
  layers: Int32Array;
  experts: Int32Array;
}

export interface TraceFileSummary {
  path: string;
  requests: number;
  bytes: number;
}

export interface CacheTraceDump {
  /** Absent when nothing was requested: an empty trace is not written (runtime.md 6.6). */
  trace: TraceFileSummary | undefined;
  histogramPath: string;
}

/** Records requests for a model of `layers` x `experts`; never reset, so prefill is included. */
export class ExpertTraceRecorder {
  readonly layers: number;
  readonly experts: number;
  #pairs = new Int32Array(2 * initialRequests);
  #requests = 0;
  /** Dense, because 93 x 896 counters are cheaper than a map lookup per request. */
  readonly #counts: Float64Array;

  constructor(layers: number, experts: number) {
    if (!Number.isInteger(layers) || layers < 1 || layers > traceIdLimit) throw new Error(`trace recorder: bad layer count ${layers}`);
    if (!Number.isInteger(experts) || experts < 1 || experts > traceIdLimit) throw new Error(`trace recorder: bad expert count ${experts}`);
    this.layers = layers;
    this.experts = experts;
    this.#counts = new Float64Array(layers * experts);
  }

  append(layer: number, expert: number): void {
    if (!(layer >= 0 && layer < this.layers && expert >= 0 && expert < this.experts && Number.isInteger(layer) && Number.isInteger(expert))) {
      throw new Error(`trace recorder: (layer ${layer}, expert ${expert}) is outside ${this.layers} x ${this.experts}`);
    }
    if (2 * this.#requests === this.#pairs.length) {
      const grown = new Int32Array(this.#pairs.length * 2);
      grown.set(this.#pairs);
      this.#pairs = grown;
    }
    this.#pairs[2 * this.#requests] = layer;
    this.#pairs[2 * this.#requests + 1] = expert;
    this.#requests++;
    this.#counts[layer * this.experts + expert]! += 1;
  }

  get requests(): number {
    return this.#requests;
  }

  count(layer: number, expert: number): number {
    return this.#counts[layer * this.experts + expert] ?? 0;
  }

  /** A view of the interleaved (layer, expert) pairs; valid until the next append. */
  pairs(): Int32Array {
    return this.#pairs.subarray(0, 2 * this.#requests);
  }

  histogram(): ExpertHistogram {
    const counts: Record<string, number> = {};
    for (let key = 0; key < this.#counts.length; key++) {
      const count = this.#counts[key]!;
      if (count > 0) counts[`${Math.floor(key / this.experts)},${key % this.experts}`] = count;
    }
    return { n_layers: this.layers, n_experts: this.experts, counts };
  }
}

/** Little-endian whatever the host, so a trace moves between machines unchanged. */
export function encodeTrace(pairs: Int32Array): Uint8Array {
  const bytes = new Uint8Array(pairs.length * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < pairs.length; i++) view.setInt32(4 * i, pairs[i]!, true);
  return bytes;
}

export function writeTraceFile(path: string, pairs: Int32Array): TraceFileSummary {
  if (pairs.length % 2 !== 0) throw new Error("trace pairs must come in (layer, expert) pairs");
  const bytes = encodeTrace(pairs);
  writeAtomically(path, bytes, "the expert trace");
  return { path, requests: pairs.length / 2, bytes: bytes.length };
}

/**
 * Both files of `--dump-cache-trace DIR`, complete in their temporaries but not yet visible: the
 * run commits them with its other outputs (results last). `flag` names the option in errors.
 */
export function stageCacheTrace(dir: string, recorder: ExpertTraceRecorder, flag?: string): { writes: StagedWrite[]; dump: CacheTraceDump } {
  const histogramPath = join(dir, histogramFileName);
  const writes = [stageBytes({ path: histogramPath, what: "the expert histogram", flag }, `${JSON.stringify(recorder.histogram())}\n`)];
  let trace: TraceFileSummary | undefined;
  try {
    if (recorder.requests > 0) {
      const path = join(dir, traceFileName);
      const bytes = encodeTrace(recorder.pairs());
      writes.push(stageBytes({ path, what: "the expert trace", flag }, bytes));
      trace = { path, requests: recorder.requests, bytes: bytes.length };
    }
  } catch (error) {
    for (const write of writes) write.discard();
    throw error;
  }
  return { writes, dump: { trace, histogramPath } };
}

/** Writes both files of `--dump-cache-trace DIR`; the caller reports `traceWrittenLine`. */
export function dumpCacheTrace(dir: string, recorder: ExpertTraceRecorder): CacheTraceDump {
  const { writes, dump } = stageCacheTrace(dir, recorder);
  commitAll(writes);
  return dump;
}

/** `wrote <path>: <n> requests (<KB> KB)`, KB being 1000 bytes like every size k3 prints. */
export function traceWrittenLine(summary: TraceFileSummary): string {
  return `wrote ${summary.path}: ${summary.requests} requests (${(summary.bytes / 1000).toFixed(1)} KB)`;
}

/** Parses trace bytes, refusing anything that is not whole, in-range (layer, expert) pairs. */
export function decodeTrace(bytes: Uint8Array, path: string): ExpertTrace {
  if (bytes.length === 0) throw runtimeError(`${path}: the expert trace is empty`);
  if (bytes.length % bytesPerRequest !== 0) {
    throw runtimeError(`${path}: ${bytes.length} bytes is not a whole number of 8-byte (layer, expert) pairs; the trace is truncated or not a trace`);
  }
  const requests = bytes.length / bytesPerRequest;
  if (requests > maxTraceRequests) throw runtimeError(`${path}: ${requests} requests is more than the ${maxTraceRequests} a replay can index`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const layers = new Int32Array(requests);
  const experts = new Int32Array(requests);
  for (let i = 0; i < requests; i++) {
    const layer = view.getInt32(8 * i, true);
    const expert = view.getInt32(8 * i + 4, true);
    if (layer < 0 || layer >= traceIdLimit || expert < 0 || expert >= traceIdLimit) {
      throw runtimeError(`${path}: request ${i} is (layer ${layer}, expert ${expert}); ids must be from 0 to ${traceIdLimit - 1}`);
    }
    layers[i] = layer;
    experts[i] = expert;
  }
  return { layers, experts };
}

export function readTraceFile(path: string): ExpertTrace {
  let bytes: Uint8Array;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw runtimeError(`${path}: cannot read the expert trace (${(error as NodeJS.ErrnoException).code ?? "unreadable"})`);
  }
  return decodeTrace(bytes, path);
}
