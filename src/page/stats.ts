/**
 * The status line: what someone waiting on a slow engine wants to see. Before the first token,
 * k3's progress comments (progress.ts): the queue, then the prefill chunk by chunk; while a reply
 * streams, the page's own clock and delta count (an estimate: a token that ends inside a
 * character or a marker sends nothing); once the server's last chunk arrives, k3's own figures
 * (`stream_options.include_usage` brings `usage` and the `k3` statistics of chat-completion.ts).
 */
import type { PrefillProgress } from "./progress.ts";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** k3's statistics object on the final chunk (src/serve/turn-stats.ts CompletionStats). */
export interface K3Stats {
  reused_prompt_ids: number;
  prefilled_ids: number;
  reused_from: string;
  prefill_seconds: number;
  decode_seconds: number;
  /** When the server decodes speculatively (`k3 serve --spec N` or `--draft-trunk`). */
  speculation?: { drafted: number; accepted: number };
}

/**
 * `waiting` lasts until the first prefill comment (a server without them: until the first
 * token, covering the queue and the prefill together); `prefill` until the first token.
 */
export type Phase = "waiting" | "prefill" | "thinking" | "answering";

/** The last prefill comment, and when it came (seconds since the request was sent). */
export interface PrefillSeen extends PrefillProgress {
  arrivedSeconds: number;
}

export interface LiveTurn {
  phase: Phase;
  /** Seconds since the request was sent. */
  elapsedSeconds: number;
  /** Generations ahead in the server's queue when the request arrived (k3's first comment). */
  queueAhead?: number;
  prefill?: PrefillSeen;
  /** Seconds from sending to the first reasoning or content delta. */
  firstDeltaSeconds: number | undefined;
  /** Reasoning and content deltas so far. */
  deltas: number;
}

export interface FinishedTurn {
  usage: Usage | undefined;
  k3: K3Stats | undefined;
  finishReason: string | undefined;
  stopped: boolean;
  elapsedSeconds: number;
  firstDeltaSeconds: number | undefined;
  deltas: number;
}

export function seconds(s: number): string {
  if (s < 1) return `${(s * 1000).toFixed(s < 0.01 ? 1 : 0)} ms`;
  return `${s.toFixed(s < 10 ? 2 : 1)} s`;
}

const rate = (count: number, s: number) => (s > 0 ? count / s : 0);
const perSecond = (r: number) => (r >= 100 ? r.toFixed(0) : r.toFixed(1));

/** The prefill line: ids fed of the ids to feed, its time (ticking on between comments), what is left, the reuse. */
function describePrefill(p: PrefillSeen, elapsedSeconds: number): string {
  const spent = p.seconds + Math.max(0, elapsedSeconds - p.arrivedSeconds);
  const percent = Math.floor((100 * p.fed) / p.total);
  // Chunks cost about the same on a streaming engine (each reads the experts its ids pick): a linear guess.
  const left = p.fed > 0 && p.fed < p.total ? `, ≈${seconds(Math.max(0, (p.seconds / p.fed) * p.total - spent))} left` : "";
  const reused = p.reused > 0 ? ` · ${p.reused} ids reused (${p.reusedFrom})` : "";
  return `Prefill: ${p.fed} / ${p.total} ids (${percent}%), ${seconds(spent)}${left}${reused} · Esc stops`;
}

/** One line while the reply is being produced. */
export function describeLive(t: LiveTurn): string {
  const elapsed = seconds(t.elapsedSeconds);
  if (t.phase === "prefill" && t.prefill) return describePrefill(t.prefill, t.elapsedSeconds);
  if (t.phase === "waiting" || t.phase === "prefill") {
    if (t.queueAhead === undefined) return `Waiting for the first token (queue, then prefill)… ${elapsed} · Esc stops`;
    if (t.queueAhead > 0) return `Queued behind ${t.queueAhead} ${t.queueAhead === 1 ? "request" : "requests"}… ${elapsed} · Esc stops`;
    return `Waiting for the prefill to start… ${elapsed} · Esc stops`;
  }
  const decoding = t.elapsedSeconds - (t.firstDeltaSeconds ?? 0);
  const what = t.phase === "thinking" ? "Thinking" : "Answering";
  const prefill = t.firstDeltaSeconds === undefined ? "" : ` · first text after ${seconds(t.firstDeltaSeconds)}`;
  return `${what}… ≈${t.deltas} tokens in ${seconds(decoding)}, ≈${perSecond(rate(t.deltas, decoding))} tok/s${prefill} · Esc stops`;
}

/** The line a finished (or stopped) reply leaves, also kept under its message. */
export function describeFinished(t: FinishedTurn): string {
  if (t.stopped || !t.usage || !t.k3) {
    const head = t.stopped ? "Stopped" : "Ended without statistics";
    const first = t.firstDeltaSeconds === undefined ? "before any text" : `≈${t.deltas} tokens, first text after ${seconds(t.firstDeltaSeconds)}`;
    return `${head} after ${seconds(t.elapsedSeconds)} (${first})`;
  }
  const { usage, k3 } = t;
  const reused = k3.reused_prompt_ids > 0 ? `${k3.reused_prompt_ids} ids reused (${k3.reused_from})` : "nothing reused";
  const prefill = `prefill ${k3.prefilled_ids} ids in ${seconds(k3.prefill_seconds)}` +
    (k3.prefill_seconds > 0 && k3.prefilled_ids > 0 ? ` (${perSecond(rate(k3.prefilled_ids, k3.prefill_seconds))} ids/s)` : "");
  const n = usage.completion_tokens;
  const decode = `${n} tokens in ${seconds(k3.decode_seconds)}: ${perSecond(rate(n, k3.decode_seconds))} tok/s, ${seconds(n > 0 ? k3.decode_seconds / n : 0)}/token`;
  const spec = k3.speculation;
  const drafts = spec ? ` · ${spec.accepted} of ${spec.drafted} drafted ids accepted` : "";
  return `${prefill}, ${reused} · ${decode}${drafts} · finish ${t.finishReason ?? "?"}`;
}
