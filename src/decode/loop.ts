/**
 * The decode loop (runtime.md 7.1). Incremental decode (the default) prefills the prompt once
 * and then feeds one token per step, carrying the sequence state; full recompute runs the whole
 * prefix from a fresh state every step. Both must emit the same tokens. The loop only composes:
 * the model makes logits, the sampler picks, stop ids and the caller end the run.
 */
import type { Forward, Outputs, Rewindable, RunOptions } from "../model/sequence.ts";
import { maskCount, maskHas, maskLogits, type Constraint } from "./constraint.ts";
import type { Drafter } from "./drafter.ts";
import { greedy, type Sampler } from "./sampler.ts";
import type { StepBatch } from "./step-batch.ts";

export type DecodeMode = "incremental" | "recompute";

/**
 * Why generation ended, the one table of engine finish reasons: `length` (the token budget
 * was spent), `stop` (a stop id was emitted, or the caller asked to stop there), `cancelled`
 * (the caller gave up, e.g. a client went away).
 */
export const finishReasons = ["length", "stop", "cancelled"] as const;
export type FinishReason = (typeof finishReasons)[number];

export interface StepRecord {
  step: number;
  token: number;
  seconds: number;
}

export interface DecodeOptions<State = unknown> {
  maxNewTokens: number;
  mode: DecodeMode;
  /**
   * Ids per forward call when feeding a prompt (or, in recompute, a prefix): each chunk goes
   * through every layer together, so weights and experts are read once per chunk. Any size
   * gives the same bits; the whole prompt in one call when omitted.
   */
  prefillChunk?: number;
  /**
   * Prompt positions where a prefill chunk must also end (a caller snapshots the state there, in
   * onPrefill). Chunk boundaries do not change the bits.
   */
  prefillBreaks?: readonly number[];
  /** Picks each token from its logits; greedy (ties to the lowest id) when omitted. */
  sampler?: Sampler;
  /**
   * Masks the logits the sampler draws from (decode/constraint.ts); the ids it forces are fed
   * without sampling, several in one forward call. Without it nothing is masked.
   */
  constraint?: Constraint;
  /**
   * Told each id with the row it was chosen from (masked when a constraint masked it), before
   * onToken; `row` is undefined for an id a constraint forced (fed without logits of its own).
   */
  onChosen?: (token: number, row: Float32Array | undefined) => void;
  /** Emitting one of these ends the run with `stop`; the id itself is kept in `generated`. */
  stopIds?: ReadonlySet<number>;
  /** Told each token as it is chosen; returning a reason ends the run after that token. */
  onToken?: (token: number, step: number) => "stop" | "cancelled" | undefined | void;
  /**
   * Asked after the event loop has run, before each prefill chunk and before each step: true ends
   * the run there as `cancelled` (during the prefill, with nothing generated).
   */
  cancelled?: () => boolean;
  /** Prompt ids fed so far: once before the first prefill chunk and after every one. */
  onPrefill?: (fed: number) => void;
  /** Before a step's forward pass (per-step counters reset here). */
  beforeStep?: (step: number) => void;
  /** After a step, with its token and wall time. */
  afterStep?: (record: StepRecord) => void;
  /**
   * Incremental only: the carried state to start from (a resumed state file, a conversation's
   * reused prefix), owned by the caller and left as the run ends: the prompt and every emitted id
   * but the last fed, the last pending. Without it the loop makes its own and releases it.
   */
  state?: State;
  /** The ids a carried state already holds, before `prompt`: a drafter sees the whole sequence. */
  history?: readonly number[];
  /** Speculative decode (runtime.md 9.1-9.2): drafts of up to `maxDraft` ids, each verified. */
  speculative?: { drafter: Drafter; maxDraft: number };
  /**
   * Incremental only: the forward calls join other sequences' in batched steps (step-batch.ts);
   * the bits are those of running alone.
   */
  batch?: StepBatch<State>;
}

/** The forward calls of one sequence's decode: through its batch when it has one, else the model's own. */
type StateForward = (ids: readonly number[], outputs?: Outputs, options?: RunOptions) => Promise<Float32Array>;

/**
 * What speculation did: sweeps that verified a draft, ids drafted, ids accepted, ids those sweeps
 * emitted, and the sweeps that kept less than they fed, so the state went back and replayed.
 */
export interface SpeculationStats {
  maxDraft: number;
  sweeps: number;
  drafted: number;
  accepted: number;
  emitted: number;
  replays: number;
}

export interface DecodeResult {
  generated: number[];
  /** Ids a constraint forced (each the only one its mask allowed), emitted without sampling. */
  forcedIds: number;
  /** Prompt ids the state consumed: all of them, unless the run was cancelled during the prefill. */
  promptFed: number;
  speculation?: SpeculationStats;
  steps: StepRecord[];
  /** Logits of the last prompt position (step 0), for --dump-logits. */
  firstLogits: Float32Array | undefined;
  finish: FinishReason;
}

/** The ids per forward call feed and feedInSteps use: `chunk`, or all of them at once without one. */
function chunkSize(ids: readonly number[], chunk: number | undefined): number {
  if (ids.length === 0) throw new Error("feed: no ids to feed");
  const size = chunk ?? ids.length;
  if (!Number.isInteger(size) || size < 1) throw new Error(`feed: chunk size ${size} is not a positive integer`);
  return size;
}

/** Feeds `ids` in chunks of `chunk` (all at once without one); returns the last position's logits. */
export function feed<State>(model: Forward<State>, state: State, ids: readonly number[], chunk?: number): Float32Array {
  const size = chunkSize(ids, chunk);
  let logits: Float32Array | undefined;
  for (let at = 0; at < ids.length; at += size) logits = model.run(state, ids.slice(at, at + size));
  return logits as Float32Array;
}

/**
 * Lets sockets, timers, input and signals (Ctrl-C, a client that went away) run between prefill
 * chunks and between tokens: the forward pass is synchronous. A timer turn rather than
 * setImmediate: measured on Bun 1.4.5, bytes a Bun.serve stream enqueued are written to the
 * socket during a Bun.sleep(0) yield, but only one setImmediate yield later (a chunk late). It
 * costs about 3 microseconds.
 */
const yieldToEventLoop = () => Bun.sleep(0);

/** Where each prefill chunk ends: `chunk` ids on from the start or the last break, and at every break inside the prompt. */
function chunkEnds(length: number, chunk: number, breaks: readonly number[]): number[] {
  const inside = [...new Set(breaks)].filter((at) => at > 0 && at < length).sort((a, b) => a - b);
  const ends: number[] = [];
  for (let at = 0; at < length;) {
    at = Math.min(at + chunk, inside.find((b) => b > at) ?? length, length);
    ends.push(at);
  }
  return ends;
}

/**
 * Feeds the prompt in chunks, yielding and asking `cancelled` before each one. Returns the ids
 * fed and, when all were, the last position's logits.
 */
async function prefill<State>(
  forward: StateForward, prompt: readonly number[], options: DecodeOptions<State>,
): Promise<{ fed: number; logits: Float32Array | undefined }> {
  const size = chunkSize(prompt, options.prefillChunk);
  let logits: Float32Array | undefined;
  let at = 0;
  options.onPrefill?.(0);
  for (const end of chunkEnds(prompt.length, size, options.prefillBreaks ?? [])) {
    await yieldToEventLoop();
    if (options.cancelled?.()) return { fed: at, logits: undefined };
    logits = await forward(prompt.slice(at, end));
    at = end;
    options.onPrefill?.(at);
  }
  return { fed: at, logits };
}

/**
 * What every step ends with, in both modes: the sampler chooses from one row of logits, the
 * caller's onToken or a stop id may end the run there, and the step is recorded and reported.
 * `choose` and `record` are the two halves, for a sweep that has work to finish between them.
 */
function emitter(options: DecodeOptions<never>) {
  const sampler = options.sampler ?? greedy;
  const constraint = options.constraint;
  const out = { generated: [] as number[], steps: [] as StepRecord[], finish: undefined as FinishReason | undefined, forced: 0 };
  /** An id is emitted: the sampler's history, the caller, a stop id. */
  const take = (token: number, row: Float32Array | undefined): number => {
    sampler.accept?.(token);
    out.generated.push(token);
    options.onChosen?.(token, row);
    out.finish = options.onToken?.(token, out.generated.length - 1) || (options.stopIds?.has(token) ? "stop" : undefined);
    return token;
  };
  /** Picks the next id and tells the caller at once (a streamed token does not wait for the step's bookkeeping). */
  const choose = async (logits: Float32Array): Promise<number> => {
    const mask = constraint && (await constraint.allowed());
    if (!mask) return take(sampler.choose(logits), logits);
    const { count, first } = maskCount(mask, logits.length);
    if (count === 0) throw new Error("decode: the constraint allows no id at this point");
    const row = maskLogits(logits, mask);
    // One allowed id is taken without a draw; an allowed row of -Infinity or NaN logits gives the lowest allowed id.
    let token = count === 1 ? first : sampler.choose(row);
    if (!maskHas(mask, token)) token = first;
    constraint.accept(token);
    return take(token, row);
  };
  /** Closes the step of the last id chosen: its wall time from `started`, reported. */
  const record = (started: number): void => {
    const step = out.generated.length - 1;
    const record = { step, token: out.generated[step] as number, seconds: (performance.now() - started) / 1000 };
    out.steps.push(record);
    options.afterStep?.(record);
  };
  const emit = async (logits: Float32Array, started: number): Promise<number> => {
    const token = await choose(logits);
    record(started);
    return token;
  };
  /**
   * The ids the constraint forces next, emitted as steps of their own (no logits, no draw), at
   * most `limit`; the emission stops early where the run ends. Returns those emitted.
   */
  const emitForced = async (limit: number): Promise<number[]> => {
    if (!constraint || limit <= 0) return [];
    const forced = await constraint.takeForced(limit);
    const emitted: number[] = [];
    for (const token of forced) {
      options.beforeStep?.(out.generated.length);
      const started = performance.now();
      take(token, undefined);
      out.forced++;
      emitted.push(token);
      record(started);
      if (out.finish !== undefined) break;
    }
    return emitted;
  };
  return { out, emit, choose, record, emitForced };
}

/**
 * The one generation loop: run, chat and serve all decode here. It yields to the event loop
 * before every prefill chunk and every step, so a server flushes what it streamed and a
 * cancellation is seen within one forward pass.
 */
export async function decode<State>(model: Forward<State>, prompt: readonly number[], options: DecodeOptions<State>): Promise<DecodeResult> {
  if (options.mode === "incremental") return decodeIncremental(model, prompt, options);
  if (options.state !== undefined || options.speculative || options.history?.length || options.batch) {
    throw new Error("decode: a carried state, speculation and batching need incremental decode");
  }
  const { out, emit } = emitter(options as DecodeOptions<never>);
  let firstLogits: Float32Array | undefined;
  for (let step = 0; step < options.maxNewTokens && out.finish === undefined; step++) {
    await yieldToEventLoop();
    if (options.cancelled?.()) {
      out.finish = "cancelled";
      break;
    }
    options.beforeStep?.(step);
    const started = performance.now();
    const fresh = model.newState();
    let logits: Float32Array;
    try {
      logits = feed(model, fresh, [...prompt, ...out.generated], options.prefillChunk);
    } finally {
      model.release(fresh);
    }
    if (step === 0) firstLogits = logits.slice();
    await emit(logits, started);
  }
  const promptFed = out.generated.length > 0 ? prompt.length : 0;
  return { generated: out.generated, forcedIds: out.forced, promptFed, steps: out.steps, firstLogits, finish: out.finish ?? "length" };
}

/** Incremental decode: prefill once, then one id per step, or with speculation up to maxDraft + 1 ids per sweep. */
async function decodeIncremental<State>(model: Forward<State>, prompt: readonly number[], options: DecodeOptions<State>): Promise<DecodeResult> {
  const { out, emit, choose, record, emitForced } = emitter(options as DecodeOptions<never>);
  const { generated, steps } = out;
  let firstLogits: Float32Array | undefined;
  let promptFed = 0;
  const state = options.state ?? model.newState();
  const batch = options.batch;
  const forward: StateForward = batch
    ? (ids, outputs, runOptions) => batch.run(state, ids, outputs, runOptions)
    : async (ids, outputs, runOptions) => model.run(state, ids, outputs, runOptions);
  const leave = batch?.join();
  const spec = options.speculative;
  const rewind = state as unknown as Rewindable<unknown>;
  let snapshot: unknown;
  const stats: SpeculationStats | undefined = spec && { maxDraft: spec.maxDraft, sweeps: 0, drafted: 0, accepted: 0, emitted: 0, replays: 0 };
  const history = options.history ?? [];
  /** Every id the state has fed, for the drafter's sync (from the state's own start). */
  const fed: number[] = [...history];
  /**
   * After a sweep over `verified` that emitted its first `emitted` ids: the statistics, and the
   * state brought to those ids. It absorbed the whole draft; when fewer ids were emitted it goes
   * back to the snapshot and feeds only those kept (runtime.md 9.2, step 5).
   */
  const settle = async (verified: readonly number[], emitted: number) => {
    const draft = verified.slice(1);
    const sweep = generated.slice(-emitted);
    if (stats) {
      stats.sweeps++;
      stats.drafted += draft.length;
      stats.accepted += sweep.filter((token, i) => i < draft.length && token === draft[i]).length;
      stats.emitted += emitted;
    }
    const keep = verified.slice(0, emitted);
    if (emitted < verified.length) {
      // From what the sweep recorded when the model can (no weights read again), else by feeding the kept ids anew.
      if (model.replay) {
        model.replay(state, snapshot, emitted);
      } else {
        rewind.restore(snapshot);
        await forward(keep);
      }
      if (stats) stats.replays++;
    }
    fed.push(...keep);
    spec?.drafter.sync?.(fed);
  };
  try {
    if (options.maxNewTokens === 0) {
      // Nothing to generate: a caller that keeps the state still gets the prompt absorbed.
      if (options.state && prompt.length > 0) promptFed = (await prefill(forward, prompt, options)).fed;
      return { generated, forcedIds: 0, promptFed, steps, firstLogits, finish: promptFed < prompt.length ? "cancelled" : "length" };
    }
    options.beforeStep?.(0);
    const prefillStarted = performance.now();
    const prefilled = await prefill(forward, prompt, options);
    promptFed = prefilled.fed;
    if (!prefilled.logits) return { generated, forcedIds: 0, promptFed, steps, firstLogits, finish: "cancelled" };
    fed.push(...prompt);
    spec?.drafter.sync?.(fed);
    firstLogits = prefilled.logits.slice();
    await emit(prefilled.logits, prefillStarted);
    while (out.finish === undefined && generated.length < options.maxNewTokens) {
      await yieldToEventLoop();
      if (options.cancelled?.()) {
        out.finish = "cancelled";
        break;
      }
      const pending = generated[generated.length - 1] as number;
      // Forced ids go into the state with the pending one, in one call; one id of the budget is left to choose after them.
      const stateRoom = typeof rewind.capacity === "number" ? rewind.capacity - rewind.position - 2 : Number.POSITIVE_INFINITY;
      const forced = await emitForced(Math.min(options.maxNewTokens - generated.length - 1, stateRoom));
      if (forced.length > 0) {
        const kept = out.finish === undefined ? forced : forced.slice(0, -1);
        options.beforeStep?.(generated.length);
        const started = performance.now();
        const next = await forward([pending, ...kept]);
        fed.push(pending, ...kept);
        spec?.drafter.sync?.(fed);
        if (out.finish === undefined) await emit(next, started);
        continue;
      }
      const remaining = options.maxNewTokens - generated.length;
      options.beforeStep?.(generated.length);
      const started = performance.now();
      // Draft only while more than maxDraft ids remain and the state has room for all of them.
      const room = spec && remaining > spec.maxDraft && rewind.position + spec.maxDraft + 1 < rewind.capacity;
      const draft = room ? spec.drafter.propose([...history, ...prompt, ...generated], spec.maxDraft).slice(0, spec.maxDraft) : [];
      if (draft.length === 0) {
        const next = await forward([pending]);
        fed.push(pending);
        spec?.drafter.sync?.(fed);
        await emit(next, started);
        continue;
      }
      // One forward over the pending id and the draft, logits at every position (runtime.md 9.2).
      snapshot = rewind.snapshot(snapshot ?? undefined);
      const verified = [pending, ...draft];
      const rows = await forward(verified, "all", { replayable: true });
      const V = model.vocabSize;
      for (let i = 0; i <= draft.length; i++) {
        const stepStarted = i === 0 ? started : performance.now();
        if (i > 0) options.beforeStep?.(generated.length); // later ids of a sweep cost nothing more, unless the sweep ends there
        const token = await choose(rows.subarray(i * V, (i + 1) * V));
        const last = out.finish !== undefined || i === draft.length || token !== draft[i];
        // The sweep's last id pays for what the sweep leaves to do (a replay, the drafter's sync), so every forward is in a step's time.
        if (last) await settle(verified, i + 1);
        record(stepStarted);
        if (last) break;
      }
    }
  } finally {
    leave?.();
    if (snapshot) (snapshot as { free(): void }).free();
    if (!options.state) model.release(state);
  }
  return { generated, forcedIds: out.forced, promptFed, steps, firstLogits, finish: out.finish ?? "length", ...(stats && { speculation: stats }) };
}
