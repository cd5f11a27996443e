/**
 * The progress k3 serve puts in a streamed response as SSE comment lines (conforming clients
 * ignore comments, so the OpenAI shape of the stream is untouched): written by src/serve/http.ts,
 * read by this page. One place for the format, so the two cannot drift apart.
 *
 *   : k3 queue 2                                        (once, first: generations ahead of this one)
 *   : k3 prefill 128/512 3.104s reused=40 from=live     (before the first prefill chunk and after each)
 *
 * `prefill FED/TOTAL`: prompt ids fed so far of the ids this request feeds (the reused ones not
 * counted; TOTAL is the `k3.prefilled_ids` of the final chunk), the seconds since the request's
 * turn began, and the prompt ids reused and from where (`live`, `snapshot`, `parked`, `none`).
 */

export interface QueueProgress {
  kind: "queue";
  /** Generations running or waiting ahead of this request when it arrived. */
  ahead: number;
}

export interface PrefillProgress {
  kind: "prefill";
  fed: number;
  total: number;
  seconds: number;
  reused: number;
  reusedFrom: string;
}

export type StreamProgress = QueueProgress | PrefillProgress;

/** What the server writes: one comment line and the blank line that ends it as a block of its own. */
export function progressComment(p: StreamProgress): string {
  const text = p.kind === "queue"
    ? `k3 queue ${p.ahead}`
    : `k3 prefill ${p.fed}/${p.total} ${p.seconds.toFixed(3)}s reused=${p.reused} from=${p.reusedFrom}`;
  return `: ${text}\n\n`;
}

/** Longer comments are not k3's: nothing of them is read. */
const maxCommentChars = 200;
const count = (text: string | undefined) => (text !== undefined && /^\d{1,15}$/.test(text) ? Number(text) : undefined);

/**
 * A comment's text (after the colon and its one optional space) as k3 progress, or undefined when
 * it is anything else: other servers' comments, keep-alives, a malformed or impossible line.
 */
export function parseProgress(comment: string): StreamProgress | undefined {
  if (comment.length > maxCommentChars) return undefined;
  const queue = /^k3 queue (\d+)$/.exec(comment);
  if (queue) {
    const ahead = count(queue[1]);
    return ahead === undefined ? undefined : { kind: "queue", ahead };
  }
  const prefill = /^k3 prefill (\d+)\/(\d+) (\d+(?:\.\d+)?)s((?: [a-z_]+=[a-z0-9_]+)*)$/.exec(comment);
  if (!prefill) return undefined;
  const fed = count(prefill[1]);
  const total = count(prefill[2]);
  const seconds = Number(prefill[3]);
  if (fed === undefined || total === undefined || total < 1 || fed > total || !Number.isFinite(seconds)) return undefined;
  const fields = new Map((prefill[4] ?? "").trim().split(" ").filter(Boolean).map((kv) => kv.split("=") as [string, string]));
  return { kind: "prefill", fed, total, seconds, reused: count(fields.get("reused")) ?? 0, reusedFrom: fields.get("from") ?? "none" };
}
