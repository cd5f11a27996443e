/**
 * What a finished generation reports to an API client, the same for /v1/chat/completions and
 * /v1/completions: OpenAI's `usage` (with `completion_tokens_details` when speculative decode
 * drafted ids, in OpenAI's predicted-output terms) and k3's own `k3` statistics object.
 */
import type { TurnResult } from "../session/conversation.ts";

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** Speculative decode only: drafted ids the model accepted, and those it did not. */
  completion_tokens_details?: { accepted_prediction_tokens: number; rejected_prediction_tokens: number };
}

export interface CompletionStats {
  /** The seed the reply was sampled with: the request's, or the fresh one drawn for it (send it back to get this answer again); choice i of `n` used this plus i (decode/sampling-options.ts choiceSampling). */
  seed: number;
  /** Prompt ids served from the carried state or a snapshot. */
  reused_prompt_ids: number;
  /** Prompt ids this request fed. */
  prefilled_ids: number;
  /** "live": the state the previous request left; "snapshot": one held in RAM; "parked": one read back from its file. */
  reused_from: TurnResult["reusedFrom"];
  prefill_seconds: number;
  decode_seconds: number;
  /** The snapshots held after this request. */
  snapshots?: { in_ram: number; parked: number; ram_bytes: number; parked_bytes: number; parked_writes: number; dropped: number };
  /** Speculative decode (`k3 serve --spec N` or `--draft-trunk`): ids drafted per sweep at most, sweeps, ids drafted and accepted (summed over the choices). */
  speculation?: { max_draft: number; sweeps: number; drafted: number; accepted: number };
  /**
   * With --parallel: the batched steps the request's sequences took part in, the rows of those
   * steps (its own included), and its rows' share of the bytes they read from disk.
   */
  batch?: { steps: number; shared_rows: number; bytes_read_share: number };
  /**
   * A constrained reply (response_format, tools): the ids its constraint forced, fed without
   * sampling (summed over the choices), and the tool-schema keywords it could not enforce.
   */
  constraint?: { forced_ids: number; unenforced?: string[] };
}

/** `usage`, counting the prompt once as chat.md 4.6 does (`promptTokens`) and the reply as the ids generated, summed over the choices. */
export function usageOf(promptTokens: number, turns: readonly TurnResult[]): Usage {
  const completion = turns.reduce((n, t) => n + t.generated.length, 0);
  const speculated = turns.flatMap((t) => (t.speculation ? [t.speculation] : []));
  const accepted = speculated.reduce((n, s) => n + s.accepted, 0);
  const rejected = speculated.reduce((n, s) => n + s.drafted - s.accepted, 0);
  return {
    prompt_tokens: promptTokens, completion_tokens: completion, total_tokens: promptTokens + completion,
    ...(speculated.length > 0 && { completion_tokens_details: { accepted_prediction_tokens: accepted, rejected_prediction_tokens: rejected } }),
  };
}

/**
 * k3's statistics of a request: the prefill and reuse of its first choice (the choices share
 * them), speculation summed, and what its steps shared with other requests: each choice holds
 * the request's count as it ended, so the last to end holds it all.
 */
export function statsOf(turns: readonly TurnResult[], seed: number): CompletionStats {
  const turn = turns[0] as TurnResult;
  const speculated = turns.flatMap((t) => (t.speculation ? [t.speculation] : []));
  const sum = (key: "sweeps" | "drafted" | "accepted") => speculated.reduce((n, s) => n + s[key], 0);
  const shared = turns.map((t) => t.batch).reduce((most, b) => (b && (!most || b.steps > most.steps) ? b : most), undefined);
  return {
    seed,
    reused_prompt_ids: turn.reusedPromptIds, prefilled_ids: turn.fedPromptIds, reused_from: turn.reusedFrom,
    prefill_seconds: turn.prefillSeconds, decode_seconds: Math.max(...turns.map((t) => t.decodeSeconds)),
    ...(turn.snapshots && {
      snapshots: {
        in_ram: turn.snapshots.inRam, parked: turn.snapshots.parked, ram_bytes: turn.snapshots.ramBytes,
        parked_bytes: turn.snapshots.parkedBytes, parked_writes: turn.snapshots.parkedWrites, dropped: turn.snapshots.dropped,
      },
    }),
    ...(speculated[0] && { speculation: { max_draft: speculated[0].maxDraft, sweeps: sum("sweeps"), drafted: sum("drafted"), accepted: sum("accepted") } }),
    ...(shared && { batch: { steps: shared.steps, shared_rows: shared.rows, bytes_read_share: Math.round(shared.bytesReadShare) } }),
    ...(turns.some((t) => t.forcedIds !== undefined) && { constraint: { forced_ids: turns.reduce((n, t) => n + (t.forcedIds ?? 0), 0) } }),
  };
}
