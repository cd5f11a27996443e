/**
 * The status line: what someone waiting on a slow engine wants to see. While a reply streams,
 * the page's own clock and delta count (an estimate: a token that ends inside a character or a
 * marker sends nothing); once the server's last chunk arrives, k3's own figures
 * (`stream_options.include_usage` brings `usage` and the `k3` statistics of chat-completion.ts).
 */

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** k3's statistics object on the final chunk (src/serve/chat-completion.ts CompletionStats). */
export interface K3Stats {
  reused_prompt_ids: number;
  prefilled_ids: number;
  reused_from: string;
  prefill_seconds: number;
  decode_seconds: number;
}

/**
 * No separate prefill phase: k3 feeds the prompt in one go before its first token, and the
 * stream's first bytes come with that token, so until then the page cannot tell the queue from
 * the prefill. The final statistics give the prefill time itself.
 */
export type Phase = "waiting" | "thinking" | "answering";

export interface LiveTurn {
  phase: Phase;
  /** Seconds since the request was sent. */
  elapsedSeconds: number;
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

/** One line while the reply is being produced. */
export function describeLive(t: LiveTurn): string {
  const elapsed = seconds(t.elapsedSeconds);
  if (t.phase === "waiting") return `Waiting for the first token (queue, then prefill)… ${elapsed} · Esc stops`;
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
  return `${prefill}, ${reused} · ${decode} · finish ${t.finishReason ?? "?"}`;
}
